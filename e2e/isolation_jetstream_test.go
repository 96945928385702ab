package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream API between tenants (a step of TestTenantIsolation).

// JetStream error codes the refusals carry.
const (
	errCodeStreamNotFound   = 10059
	errCodeConsumerNotFound = 10014
)

// jsError is the error of a JetStream API answer.
type jsError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// jsRequest sends a JetStream API request as ic and returns the answer.
func jsRequest(t *testing.T, ic *isoConn, subject, body string) (*nats.Msg, error) {
	t.Helper()
	return ic.Request("$JS.API."+subject, []byte(body), 10*time.Second)
}

// jsRefused sends a JetStream API request as ic and fails unless it is
// refused: a JSON error with one of codes (any error when codes is
// empty), or, for a pull, a status without data (no responders, 404, 408:
// what a pull on a stream or consumer that does not exist gets). An API
// Strata does not serve yet ("does not support … yet") is a refusal too,
// logged. It returns the refusal.
func jsRefused(t *testing.T, ic *isoConn, subject, body string, codes ...int) string {
	t.Helper()
	m, err := jsRequest(t, ic, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return "no responders"
	}
	if err != nil {
		t.Fatalf("%s: $JS.API.%s: %v, want a refusal", ic.user, subject, err)
	}
	if st := m.Header.Get("Status"); st != "" {
		if len(m.Data) == 0 && slices.Contains([]string{"404", "408", "503"}, st) {
			return "status " + st + " " + m.Header.Get("Description")
		}
		t.Fatalf("%s: $JS.API.%s: status %s %q with %q, want a refusal", ic.user, subject, st, m.Header.Get("Description"), m.Data)
	}
	var resp struct {
		Error *jsError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Error == nil {
		t.Fatalf("%s: $JS.API.%s was answered %q, want an error", ic.user, subject, m.Data)
	}
	e := resp.Error
	if strings.Contains(e.Description, "does not support") {
		t.Logf("%s: $JS.API.%s: %d %s", ic.user, subject, e.ErrCode, e.Description)
	} else if len(codes) > 0 && !slices.Contains(codes, e.ErrCode) {
		t.Fatalf("%s: $JS.API.%s: error %d %q, want one of %v", ic.user, subject, e.ErrCode, e.Description, codes)
	}
	return fmt.Sprintf("%d %s", e.ErrCode, e.Description)
}

// jsOK sends a JetStream API request as ic, fails on an error answer,
// and decodes the answer into v.
func jsOK(t *testing.T, ic *isoConn, subject, body string, v any) {
	t.Helper()
	m, err := jsRequest(t, ic, subject, body)
	if err != nil {
		t.Fatalf("%s: $JS.API.%s: %v", ic.user, subject, err)
	}
	var resp struct {
		Error *jsError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Error != nil {
		t.Fatalf("%s: $JS.API.%s: %q", ic.user, subject, m.Data)
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		t.Fatalf("%s: $JS.API.%s: %v in %q", ic.user, subject, err, m.Data)
	}
}

// jetStreamAPI: as alpha, in both regions, every JetStream API verb on
// bravo's streams and consumer — by the stream name bravo uses when
// alpha has none of that name ("ns:orders"), and by the qualified names
// ("bravo:ns:orders", "bravo:streams:ORDERS") — finds no such stream;
// the bare name ORDERS is alpha's own; lists show alpha's streams only;
// streams on bravo's subjects are refused; acks forged on bravo's
// delivery do nothing.
func (s *isoSuite) jetStreamAPI(t *testing.T) {
	for _, r := range s.regions {
		a := s.alice[r]
		for _, T := range []string{"ns:orders", victim + ":ns:orders", victim + ":streams:ORDERS"} {
			nf := errCodeStreamNotFound
			for _, c := range []struct{ subject, body string }{
				{"STREAM.INFO." + T, ""},
				{"STREAM.UPDATE." + T, fmt.Sprintf(`{"name":%q,"subjects":["spy.>"]}`, T)},
				{"STREAM.PURGE." + T, ""},
				{"STREAM.PURGE." + T, `{"filter":"orders.new"}`},
				{"STREAM.DELETE." + T, ""},
				{"STREAM.MSG.GET." + T, `{"seq":1}`},
				{"STREAM.MSG.DELETE." + T, `{"seq":1}`},
				{"DIRECT.GET." + T, `{"seq":1}`},
				{"CONSUMER.CREATE." + T, fmt.Sprintf(`{"stream_name":%q,"config":{"durable_name":"spy","ack_policy":"explicit"}}`, T)},
				{"CONSUMER.CREATE." + T + ".spy", fmt.Sprintf(`{"stream_name":%q,"config":{"name":"spy","ack_policy":"explicit"}}`, T)},
				{"CONSUMER.CREATE." + T + ".billing", fmt.Sprintf(`{"stream_name":%q,"config":{"durable_name":"billing","ack_policy":"none"}}`, T)},
				{"CONSUMER.DURABLE.CREATE." + T + ".spy", fmt.Sprintf(`{"stream_name":%q,"config":{"durable_name":"spy","ack_policy":"explicit"}}`, T)},
				{"CONSUMER.INFO." + T + ".billing", ""},
				{"CONSUMER.DELETE." + T + ".billing", ""},
				{"CONSUMER.NAMES." + T, ""},
				{"CONSUMER.LIST." + T, ""},
				{"CONSUMER.UNPIN." + T + ".billing", `{"group":"g"}`},
			} {
				why := jsRefused(t, a, c.subject, c.body, nf)
				t.Logf("%s: %s → %s", r, c.subject, why)
			}
			for _, body := range []string{`{"batch":1,"no_wait":true}`, `{"batch":3,"expires":1000000000}`} {
				why := jsRefused(t, a, "CONSUMER.MSG.NEXT."+T+".billing", body, nf)
				t.Logf("%s: CONSUMER.MSG.NEXT.%s.billing %s → %s", r, T, body, why)
			}
		}
		// ORDERS is alpha's own: two messages, no consumer billing.
		var info struct {
			Config struct {
				Name     string   `json:"name"`
				Subjects []string `json:"subjects"`
			} `json:"config"`
			State struct {
				Messages uint64 `json:"messages"`
			} `json:"state"`
		}
		jsOK(t, a, "STREAM.INFO.ORDERS", "", &info)
		if info.State.Messages != 2 {
			t.Fatalf("%s: alpha's STREAM.INFO.ORDERS: %+v, want its own 2 messages", r, info)
		}
		jsRefused(t, a, "CONSUMER.INFO.ORDERS.billing", "", errCodeConsumerNotFound)
		jsRefused(t, a, "CONSUMER.DELETE.ORDERS.billing", "", errCodeConsumerNotFound)
		jsRefused(t, a, "CONSUMER.MSG.NEXT.ORDERS.billing", `{"batch":1,"no_wait":true}`, errCodeConsumerNotFound)
		var names struct {
			Streams   []string `json:"streams"`
			Consumers []string `json:"consumers"`
		}
		jsOK(t, a, "CONSUMER.NAMES.ORDERS", "", &names)
		if len(names.Consumers) != 0 {
			t.Fatalf("%s: consumers of alpha's ORDERS: %v", r, names.Consumers)
		}
		s.alphaSeesOwnOnly(t, r)
		// Streams on bravo's subjects, or named as bravo's.
		for _, c := range []struct{ name, subjects string }{
			{"SPY", `["` + victim + `.>"]`}, {"SPY", `["` + victim + `.ns.orders"]`}, {"SPY", `["` + victim + `.ns.*"]`},
			{"SPY", `["` + victim + `.streams.ORDERS.>"]`}, {victim + ":ns:spy", `["spy.>"]`}, {victim + ":streams:ORDERS", `["spy.>"]`},
		} {
			why := jsRefused(t, a, "STREAM.CREATE."+c.name, fmt.Sprintf(`{"name":%q,"subjects":%s}`, c.name, c.subjects))
			t.Logf("%s: STREAM.CREATE.%s on %s → %s", r, c.name, c.subjects, why)
		}
		// Streams that would copy bravo's: a mirror or sources of bravo's
		// streams, a republish into bravo's subjects; a push consumer
		// delivering into them.
		for _, body := range []string{
			`{"name":"COPY","mirror":{"name":"` + victim + `:ns:orders"}}`,
			`{"name":"COPY","mirror":{"name":"ns:orders"}}`,
			`{"name":"COPY","sources":[{"name":"` + victim + `:streams:ORDERS"}]}`,
			`{"name":"COPY","subjects":["copy.>"],"republish":{"src":">","dest":"` + victim + `.ns.orders"}}`,
		} {
			why := jsRefused(t, a, "STREAM.CREATE.COPY", body)
			t.Logf("%s: STREAM.CREATE.COPY %s → %s", r, body, why)
		}
		why := jsRefused(t, a, "CONSUMER.CREATE.ORDERS.push", `{"stream_name":"ORDERS","config":{"name":"push","deliver_subject":"`+victim+`.ns.orders","ack_policy":"none"}}`)
		t.Logf("%s: a push consumer of alpha's ORDERS delivering to %s.ns.orders → %s", r, victim, why)
		s.alphaSeesOwnOnly(t, r)
		// Acks on the subject of bravo's unacknowledged delivery.
		for _, ack := range []string{"+WPI", "-NAK", "+TERM", "+ACK"} {
			if err := a.Publish(s.billingReply, []byte(ack)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// alphaSeesOwnOnly checks that alpha's stream lists and account info in
// region name its own stream ORDERS only.
func (s *isoSuite) alphaSeesOwnOnly(t *testing.T, region string) {
	t.Helper()
	a := s.alice[region]
	var names struct {
		Streams []string `json:"streams"`
	}
	jsOK(t, a, "STREAM.NAMES", "", &names)
	if !slices.Equal(names.Streams, []string{"ORDERS"}) {
		t.Fatalf("%s: alpha's STREAM.NAMES: %v, want its own ORDERS only", region, names.Streams)
	}
	names.Streams = nil
	jsOK(t, a, "STREAM.NAMES", `{"subject":"`+victim+`.>"}`, &names)
	if len(names.Streams) != 0 {
		t.Fatalf("%s: alpha's STREAM.NAMES on %s.>: %v", region, victim, names.Streams)
	}
	var list struct {
		Streams []struct {
			Config struct {
				Name string `json:"name"`
			} `json:"config"`
			State struct {
				Messages uint64 `json:"messages"`
			} `json:"state"`
		} `json:"streams"`
	}
	jsOK(t, a, "STREAM.LIST", "", &list)
	if len(list.Streams) != 1 || list.Streams[0].Config.Name != "ORDERS" || list.Streams[0].State.Messages != 2 {
		t.Fatalf("%s: alpha's STREAM.LIST: %+v, want its own ORDERS (2 messages) only", region, list.Streams)
	}
	var acct struct {
		Streams   int `json:"streams"`
		Consumers int `json:"consumers"`
	}
	jsOK(t, a, "INFO", "", &acct)
	if acct.Streams != 1 || acct.Consumers != 0 {
		t.Fatalf("%s: alpha's account info: %+v, want its 1 stream and no consumer", region, acct)
	}
}

// wildcardCapture: a stream of alpha's on wildcard subjects whose first
// token is no tenant ("*.ns.orders") is alpha's alone: it takes alpha's
// publishes, while publishes on bravo.ns.orders — bravo's, and the
// superuser's (the system account's publishes may go to any tenant's
// stream) — go to bravo's ns:orders. It leaves bravo with two more
// messages, in both regions (and alpha without its ORDERS, deleted to
// make room: any wildcard first token overlaps orders.>).
func (s *isoSuite) wildcardCapture(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ja := s.alice["r1"].js(t)
	// (alpha's ORDERS, on orders.>, would overlap any subject of WILD's)
	if err := ja.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatalf("alpha deletes its ORDERS: %v", err)
	}
	wild, err := ja.CreateStream(ctx, jetstream.StreamConfig{Name: "WILD", Subjects: []string{"*.ns.orders"}})
	if err != nil {
		t.Fatalf("alpha's stream WILD on *.ns.orders: %v", err)
	}
	defer func() {
		if err := ja.DeleteStream(ctx, "WILD"); err != nil {
			t.Errorf("alpha deletes WILD: %v", err)
		}
	}()
	if ack, err := ja.Publish(ctx, attacker+".ns.orders", []byte("alpha's own")); err != nil || ack.Stream != "WILD" {
		t.Fatalf("alpha's publish on %s.ns.orders: %+v %v, want it in WILD", attacker, ack, err)
	}
	super := s.connect(t, "r1", "b1", "superuser").js(t)
	for name, js := range map[string]jetstream.JetStream{"the superuser": super, "bob": s.bob2["r1"].js(t)} {
		ack, err := js.Publish(ctx, victim+".ns.orders", []byte("from "+name))
		if err != nil || (ack.Stream != "ns:orders" && ack.Stream != victim+":ns:orders") {
			t.Errorf("%s publishes on %s.ns.orders: %+v %v, want bravo's ns:orders", name, victim, ack, err)
		}
	}
	if info, err := wild.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("alpha's WILD: %+v %v, want alpha's 1 message only", info, err)
	}
	for _, r := range s.regions {
		st, err := s.bob1[r].js(t).Stream(ctx, "ns:orders")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, r+": bravo's ns:orders has 7 messages", 60*time.Second, func() bool {
			info, err := st.Info(ctx)
			return err == nil && info.State.Msgs == 7
		})
	}
}
