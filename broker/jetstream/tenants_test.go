package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	strata "github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/tenancy"
)

// TestStreamNameOfTwoTenants: tenants rival and newco both own namespace
// secrets, and a publish on each one's secrets.plans auto-creates its own
// topic, both seen as stream secrets:plans. That name (in neither the
// default tenant nor just one other) is refused with an error listing
// both topics; the qualified names rival:secrets:plans and
// newco:secrets:plans denote each exactly. A consumer on one reads and
// acknowledges that tenant's messages only, the admin stats keep the two
// topics apart, and after a restart the consumer is still on its topic
// where it left off. A name only one other tenant has resolves to it; one
// the default tenant has is the default tenant's.
func TestStreamNameOfTwoTenants(t *testing.T) {
	r := newStrataRegion(t, 1, func(c *strata.Config) {
		p := c.Policies.(strata.StaticPolicies)
		p["demo"]["secrets"] = strata.Namespace{AutoCreateTopics: true}
		p["rival"] = map[string]strata.Namespace{"secrets": {AutoCreateTopics: true}}
		p["newco"] = map[string]strata.Namespace{"secrets": {AutoCreateTopics: true}}
	})
	b := r.brokers[0]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func() jetstream.JetStream {
		nc, err := nats.Connect(b.url())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	js := connect()
	publish := func(subj, data string) {
		t.Helper()
		ack, err := js.Publish(ctx, subj, []byte(data))
		if err != nil {
			t.Fatalf("publish %s: %v", subj, err)
		}
		if ack.Stream != "secrets:plans" && ack.Stream != "secrets:memo" {
			t.Fatalf("publish %s: PubAck stream %q", subj, ack.Stream)
		}
	}
	publish("rival.secrets.plans", "r1")
	publish("newco.secrets.plans", "n1")
	publish("rival.secrets.plans", "r2")

	// The bare name is ambiguous, for every request that names a stream.
	wantAmbiguous := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s on secrets:plans succeeded; want the ambiguity error", what)
		}
		msg := err.Error()
		for _, want := range []string{"ambiguous", "rival/secrets/plans", "newco/secrets/plans", "rival:secrets:plans", "newco:secrets:plans"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("%s on secrets:plans: %v; want an error naming %q", what, err, want)
			}
		}
	}
	_, err := js.Stream(ctx, "secrets:plans")
	wantAmbiguous("stream info", err)
	_, err = js.CreateOrUpdateConsumer(ctx, "secrets:plans", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	wantAmbiguous("consumer create", err)

	// The qualified names resolve exactly.
	msgs := func(stream string) uint64 {
		t.Helper()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream info %s: %v", stream, err)
		}
		return s.CachedInfo().State.Msgs
	}
	if got := msgs("rival:secrets:plans"); got != 2 {
		t.Fatalf("rival:secrets:plans holds %d messages; want 2", got)
	}
	if got := msgs("newco:secrets:plans"); got != 1 {
		t.Fatalf("newco:secrets:plans holds %d messages; want 1", got)
	}

	// A consumer on rival's topic reads rival's messages only, and its
	// acks reach it.
	c, err := js.CreateOrUpdateConsumer(ctx, "rival:secrets:plans", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	read := func(c jetstream.Consumer, want ...string) {
		t.Helper()
		batch, err := c.Fetch(len(want)+1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
			if md, err := m.Metadata(); err != nil || md.Stream != "rival:secrets:plans" {
				t.Fatalf("message %q: metadata %+v (%v); want stream rival:secrets:plans", m.Data(), md, err)
			}
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatalf("acknowledging %q: %v", m.Data(), err)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("consumer read %v; want %v", got, want)
		}
	}
	read(c, "r1", "r2")
	publish("newco.secrets.plans", "n2")
	publish("rival.secrets.plans", "r3")

	// The admin stats keep the two topics apart.
	for _, tc := range []struct {
		tenant string
		msgs   uint64
		subs   int
	}{{"rival", 3, 1}, {"newco", 2, 0}} {
		ts, err := b.js.TopicStats(ctx, tenancy.Name{Tenant: tc.tenant, Namespace: "secrets", Topic: "plans"})
		if err != nil {
			t.Fatal(err)
		}
		if ts.Messages != tc.msgs || len(ts.Subscriptions) != tc.subs {
			t.Fatalf("stats of %s/secrets/plans: %d messages, subscriptions %+v; want %d and %d", tc.tenant, ts.Messages, ts.Subscriptions, tc.msgs, tc.subs)
		}
	}

	b.restart(t)
	js = connect()
	if _, err := js.Consumer(ctx, "newco:secrets:plans", "c"); err == nil {
		t.Fatal("after the restart, newco's topic has consumer c; want it on rival's only")
	}
	c, err = js.Consumer(ctx, "rival:secrets:plans", "c")
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if ci := c.CachedInfo(); ci.Delivered.Stream != 2 || ci.AckFloor.Stream != 2 {
		t.Fatalf("after the restart, consumer c delivered %d, ack floor %d; want 2 and 2", ci.Delivered.Stream, ci.AckFloor.Stream)
	}
	read(c, "r3")
	_, err = js.Stream(ctx, "secrets:plans")
	wantAmbiguous("stream info after the restart", err)

	// Only rival has secrets:memo: the bare name is rival's.
	publish("rival.secrets.memo", "m1")
	if got := msgs("secrets:memo"); got != 1 {
		t.Fatalf("secrets:memo holds %d messages; want 1", got)
	}
	// Once the default tenant has secrets:plans, the bare name is its.
	if _, err := js.Publish(ctx, "demo.secrets.plans", []byte("d1")); err != nil {
		t.Fatal(err)
	}
	if got := msgs("secrets:plans"); got != 1 {
		t.Fatalf("secrets:plans (demo's) holds %d messages; want 1", got)
	}
}
