package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// twoTenantsRegion is jsRegion with tenants rival and newco, each owning
// a namespace secrets (topics auto-created).
const twoTenantsRegion = jsRegion + `  - name: rival
    namespaces:
      - name: secrets
  - name: newco
    namespaces:
      - name: secrets
`

// TestJetStreamTwoTenantsSameStreamName: rival.secrets.plans and
// newco.secrets.plans are two topics, both seen as stream secrets:plans.
// Through either broker that name is refused as ambiguous, naming both;
// rival:secrets:plans is rival's topic, whose consumer reads rival's
// messages only; the admin stats keep the topics apart; and after the
// owner is killed and started again the consumer is still there, on the
// same topic, and resumes where its acks left it.
func TestJetStreamTwoTenantsSameStreamName(t *testing.T) {
	c := startJSClusterWith(t, twoTenantsRegion)
	_, js1 := jsConnect(t, c.brokers["b1"].report.NATS, c.brokers["b2"].report.NATS)
	_, js2 := jsConnect(t, c.brokers["b2"].report.NATS, c.brokers["b1"].report.NATS)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	publish := func(subj, data string) {
		t.Helper()
		testutil.Eventually(t, "a PubAck for "+subj, 20*time.Second, func() bool {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			defer pcancel()
			ack, err := js1.Publish(pctx, subj, []byte(data), jetstream.WithMsgID(subj+"-"+data))
			if err == nil && ack.Stream != "secrets:plans" {
				t.Fatalf("publish %s: PubAck stream %q; want secrets:plans", subj, ack.Stream)
			}
			return err == nil
		})
	}
	publish("rival.secrets.plans", "r1")
	publish("newco.secrets.plans", "n1")
	publish("rival.secrets.plans", "r2")
	for _, js := range []jetstream.JetStream{js1, js2} {
		_, err := js.Stream(ctx, "secrets:plans")
		if err == nil || !strings.Contains(err.Error(), "ambiguous") ||
			!strings.Contains(err.Error(), "rival/secrets/plans") || !strings.Contains(err.Error(), "newco/secrets/plans") {
			t.Fatalf("stream info secrets:plans: %v; want the ambiguity error naming both topics", err)
		}
	}
	cons, err := js2.CreateOrUpdateConsumer(ctx, "rival:secrets:plans", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	read := func(cons jetstream.Consumer, want ...string) {
		t.Helper()
		batch, err := cons.Fetch(len(want)+1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatalf("acknowledging %q: %v", m.Data(), err)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("consumer read %v; want %v", got, want)
		}
	}
	read(cons, "r1", "r2")

	stats := func(topic string) (owner string, msgs uint64, subs []string) {
		t.Helper()
		var v struct {
			Topic struct {
				Owner         string `json:"owner"`
				Messages      uint64 `json:"messages"`
				Subscriptions []struct {
					Name string `json:"name"`
				} `json:"subscriptions"`
			} `json:"topic"`
		}
		testutil.Eventually(t, "the stats of "+topic, 20*time.Second, func() bool {
			resp, err := http.Get(c.brokers["b1"].report.Admin + "/admin/v1/topics/" + topic + "/stats")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil
		})
		for _, s := range v.Topic.Subscriptions {
			subs = append(subs, s.Name)
		}
		return v.Topic.Owner, v.Topic.Messages, subs
	}
	owner, msgs, subs := stats("rival/secrets/plans")
	if msgs != 2 || fmt.Sprint(subs) != "[c]" {
		t.Fatalf("stats of rival/secrets/plans: %d messages, subscriptions %v; want 2 and [c]", msgs, subs)
	}
	if _, msgs, subs := stats("newco/secrets/plans"); msgs != 1 || len(subs) != 0 {
		t.Fatalf("stats of newco/secrets/plans: %d messages, subscriptions %v; want 1 and none", msgs, subs)
	}

	id := strings.TrimPrefix(owner, "solo.")
	if c.brokers[id] == nil {
		t.Fatalf("owner %q of rival/secrets/plans is not a broker of the test", owner)
	}
	c.restart(t, id)
	publish("newco.secrets.plans", "n2")
	publish("rival.secrets.plans", "r3")
	if _, err := js1.Consumer(ctx, "newco:secrets:plans", "c"); err == nil {
		t.Fatal("after the restart, newco's topic has consumer c; want it on rival's only")
	}
	cons, err = js1.Consumer(ctx, "rival:secrets:plans", "c")
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	read(cons, "r3")
}
