package quotanet

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/quota"
)

var testRegions = []string{"r1", "r2"}

func TestDecodeInboundRefusesMisfits(t *testing.T) {
	for _, c := range []struct {
		name string
		o    origin
		in   string
		want error // nil: accepted
	}{
		{"broker report", fromBroker, `{"from":"broker/b1","sent":5}`, nil},
		{"coordinator message", fromCoordinator, `{"from":"region/r1","term":3,"sent":5}`, nil},
		{"remote coordinator", fromRegion, `{"from":"region/r2","term":3,"sent":5}`, nil},
		{"not JSON", fromBroker, `{"from":`, quota.ErrBadMsg},
		{"no sender", fromBroker, `{"sent":5}`, quota.ErrBadMsg},
		{"negative lease", fromBroker, `{"from":"broker/b1","sent":5,"tenants":{"t":{"lend":[-1]}}}`, quota.ErrBadMsg},
		{"no sent", fromBroker, `{"from":"broker/b1"}`, ErrBadMessage},
		{"negative sent", fromCoordinator, `{"from":"region/r1","term":1,"sent":-4}`, ErrBadMessage},
		{"region on a coordinator's subject", fromBroker, `{"from":"region/r1","sent":5}`, ErrBadMessage},
		{"broker with a term", fromBroker, `{"from":"broker/b1","term":2,"sent":5}`, ErrBadMessage},
		{"broker id not a token", fromBroker, `{"from":"broker/b.1","sent":5}`, ErrBadMessage},
		{"empty broker id", fromBroker, `{"from":"broker/","sent":5}`, ErrBadMessage},
		{"another region to a broker", fromCoordinator, `{"from":"region/r2","term":3,"sent":5}`, ErrBadMessage},
		{"a broker to a broker", fromCoordinator, `{"from":"broker/b2","sent":5}`, ErrBadMessage},
		{"coordinator without term", fromCoordinator, `{"from":"region/r1","sent":5}`, ErrBadMessage},
		{"own region over the WAN", fromRegion, `{"from":"region/r1","term":3,"sent":5}`, ErrBadMessage},
		{"unknown region over the WAN", fromRegion, `{"from":"region/r9","term":3,"sent":5}`, ErrBadMessage},
		{"WAN without term", fromRegion, `{"from":"region/r2","sent":5}`, ErrBadMessage},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := decodeInbound(c.o, "r1", testRegions, []byte(c.in))
			if c.want == nil {
				if err != nil || m == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
}

func TestUsageWire(t *testing.T) {
	if _, err := parseUsageRequest([]byte("a.b")); !errors.Is(err, tenancy.ErrInvalidName) {
		t.Errorf("tenant a.b: err %v, want ErrInvalidName", err)
	}
	if _, err := parseUsageRequest(nil); !errors.Is(err, tenancy.ErrInvalidName) {
		t.Errorf("no tenant: err %v, want ErrInvalidName", err)
	}
	good := quota.Usage{Tenant: "acme", Quotas: []quota.QuotaUsage{{Quota: "publish_rate", Unit: "msgs/s", Limit: 10, Use: 3,
		Regions: []quota.RegionUsage{{Region: "r1", Use: 3, Share: 5, Reachable: true}}}}}
	u, err := decodeUsageAnswer("acme", encodeUsageAnswer(&good, nil))
	if err != nil || u.Quotas[0].Regions[0].Share != 5 {
		t.Fatalf("round trip: %+v, %v", u, err)
	}
	if _, err := decodeUsageAnswer("acme", encodeUsageAnswer(nil, errors.New("no"))); !errors.Is(err, ErrCoordinator) || !strings.Contains(err.Error(), "no") {
		t.Errorf("an error answer: %v, want ErrCoordinator with its text", err)
	}
	for name, in := range map[string]string{
		"not JSON":       `{"usage":`,
		"empty":          `{}`,
		"both":           `{"usage":{"tenant":"acme"},"error":"x"}`,
		"other tenant":   `{"usage":{"tenant":"bravo"}}`,
		"unknown quota":  `{"usage":{"tenant":"acme","quotas":[{"quota":"speed"}]}}`,
		"negative use":   `{"usage":{"tenant":"acme","quotas":[{"quota":"storage","use":-1}]}}`,
		"negative share": `{"usage":{"tenant":"acme","quotas":[{"quota":"storage","regions":[{"region":"r1","share":-2}]}]}}`,
	} {
		if _, err := decodeUsageAnswer("acme", []byte(in)); !errors.Is(err, ErrUsageAnswer) {
			t.Errorf("%s: err %v, want ErrUsageAnswer", name, err)
		}
	}
	if n, ok := parseReplySubject(replySubject("r1", "b1", 7), replyPrefix("r1", "b1")); !ok || n != 7 {
		t.Errorf("reply subject: %d %v", n, ok)
	}
	for _, s := range []string{"$STRATA.QUOTA.r1.reply.b1.", "$STRATA.QUOTA.r1.reply.b1.x", "$STRATA.QUOTA.r1.reply.b1.0", "$STRATA.QUOTA.r1.reply.b2.1"} {
		if _, ok := parseReplySubject(s, replyPrefix("r1", "b1")); ok {
			t.Errorf("reply subject %q accepted", s)
		}
	}
}

// Garbage on every subject the drivers listen on is dropped and
// counted; the region keeps coordinating; usage without a coordinator
// is a clear error.
func TestDriversDropMalformedMessages(t *testing.T) {
	store := metatest.OpenStore(t)
	nodes := startRegion(t, store, "r1", testRegions, 1, nil)
	nd := nodes[0]
	lonely, err := NewAgent(Config{Region: "r2", Regions: testRegions, BrokerID: "b1", Brokers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lonely.TenantUsage(context.Background(), "acme"); !errors.Is(err, ErrClosed) {
		t.Errorf("usage from an agent not started: %v, want ErrClosed", err)
	}
	if err := lonely.Start(nd.srv); err != nil {
		t.Fatal(err)
	}
	if _, err := lonely.TenantUsage(context.Background(), "acme"); !errors.Is(err, ErrNoCoordinator) {
		t.Errorf("usage in a region without a coordinator: %v, want ErrNoCoordinator", err)
	}
	if err := lonely.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	setLimits(nodes, limit(100))
	lead := leaderOf(t, nodes, 0)
	term := lead.coord.Term()
	bad := [][]byte{nil, []byte("{"), []byte(`{"from":"broker/b9"}`), []byte(`{"from":"region/r2","term":1,"sent":1}`),
		[]byte(`{"from":"broker/b1","sent":1,"tenants":{"acme":null}}`)}
	for _, b := range bad {
		for _, s := range []string{coordSubject("r1", term), wanSubject("r1", term), wanSubject("r1", 0), brokerSubject("r1", "b1"), leaderSubject("r1")} {
			nd.srv.PublishInternal([]byte(s), nil, nil, b)
		}
	}
	nd.srv.PublishInternal([]byte(usageSubject("r1")), []byte(replySubject("r1", "b1", 99)), nil, []byte("not a tenant"))
	// region/r2 is a fit on the two WAN subjects: 3×5 − 2 refused.
	testutil.Eventually(t, "bad messages counted", 5*time.Second, func() bool { return nd.coord.bad.Load() == 13 })
	if _, err := nd.agent.TenantUsage(context.Background(), "bad.name"); !errors.Is(err, tenancy.ErrInvalidName) {
		t.Errorf("usage of a bad name: %v", err)
	}
	u, err := nd.agent.TenantUsage(context.Background(), "acme")
	if err != nil || len(u.Quotas) != 1 || u.Quotas[0].Limit != 100 {
		t.Fatalf("usage after garbage: %+v, %v", u, err)
	}
	if nd.coord.Term() != term {
		t.Errorf("term changed from %d to %d", term, nd.coord.Term())
	}
}

func FuzzDecodeInbound(f *testing.F) {
	f.Add(uint8(0), []byte(`{"from":"broker/b1","sent":5,"tenants":{"acme":{"offered":[3,300],"lend":[1],"lend_for":[1000]}}}`))
	f.Add(uint8(1), []byte(`{"from":"region/r1","term":3,"sent":5,"echo":4,"tenants":{"acme":{"cap":[0,0,0,0,4]}}}`))
	f.Add(uint8(2), []byte(`{"from":"region/r2","term":3,"sent":5}`))
	f.Add(uint8(2), []byte(`{"from":"region/","term":3,"sent":5}`))
	f.Fuzz(func(t *testing.T, o uint8, b []byte) {
		or := origin(o % 3)
		m, err := decodeInbound(or, "r1", testRegions, b)
		if err != nil {
			if m != nil {
				t.Fatal("a message with an error")
			}
			return
		}
		if m.Sent <= 0 {
			t.Fatalf("accepted sent %d", m.Sent)
		}
		switch or {
		case fromBroker:
			if !strings.HasPrefix(m.From, "broker/") || m.Term != 0 {
				t.Fatalf("accepted %q term %d from a broker", m.From, m.Term)
			}
		case fromCoordinator:
			if m.From != "region/r1" || m.Term == 0 {
				t.Fatalf("accepted %q term %d from the coordinator", m.From, m.Term)
			}
		case fromRegion:
			if m.From != "region/r2" || m.Term == 0 {
				t.Fatalf("accepted %q term %d over the WAN", m.From, m.Term)
			}
		}
		// What is accepted survives a round trip.
		again, err := decodeInbound(or, "r1", testRegions, m.Encode())
		if err != nil {
			t.Fatalf("re-encoded message refused: %v", err)
		}
		if again.From != m.From || again.Sent != m.Sent || len(again.Tenants) != len(m.Tenants) {
			t.Fatalf("round trip changed the message: %+v → %+v", m, again)
		}
	})
}

func FuzzDecodeUsageAnswer(f *testing.F) {
	f.Add([]byte(`{"usage":{"tenant":"acme","quotas":[{"quota":"publish_rate","limit":10,"use":3,"regions":[{"region":"r1","use":3,"share":5,"reachable":true}]}]}}`))
	f.Add([]byte(`{"error":"tenant: bad"}`))
	f.Add([]byte(`{"usage":{"tenant":"acme","quotas":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := decodeUsageAnswer("acme", b)
		if err != nil {
			if !errors.Is(err, ErrUsageAnswer) && !errors.Is(err, ErrCoordinator) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		if u.Tenant != "acme" || u.Quotas == nil {
			t.Fatalf("accepted %+v", u)
		}
		for _, q := range u.Quotas {
			if _, ok := quota.ParseKind(q.Quota); !ok || q.Use < 0 || q.Limit < 0 {
				t.Fatalf("accepted quota %+v", q)
			}
		}
		enc, _ := json.Marshal(usageAnswer{Usage: &u})
		if _, err := decodeUsageAnswer("acme", enc); err != nil {
			t.Fatalf("re-encoded answer refused: %v", err)
		}
	})
}
