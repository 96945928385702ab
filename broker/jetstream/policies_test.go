package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
)

// livePolicies is a Policies that a test changes while the brokers run
// (the region's tenancy view in production).
type livePolicies struct {
	mu  sync.Mutex
	cur jetstream.StaticPolicies
}

func (p *livePolicies) Namespace(t, ns string) (jetstream.Namespace, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur.Namespace(t, ns)
}

func (p *livePolicies) Tenant(t string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur.Tenant(t)
}

func (p *livePolicies) Namespaces() [][2]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur.Namespaces()
}

func (p *livePolicies) set(r *strataRegion, t, ns string, pol *jetstream.Namespace) {
	p.mu.Lock()
	if pol == nil {
		delete(p.cur[t], ns)
	} else {
		p.cur[t][ns] = *pol
	}
	p.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.brokers {
		if b.js != nil && !b.stopped {
			b.js.PoliciesChanged()
		}
	}
}

// TestLivePolicies: a namespace's policies change while its topics are
// served, and existing topics follow (ARCHITECTURE §5): retention trims
// at once, max_consumers refuses the next consumer, a deleted namespace
// takes its topics with it; a stream created through the JetStream API
// keeps its own limits.
func TestLivePolicies(t *testing.T) {
	pol := &livePolicies{cur: jetstream.StaticPolicies{
		"demo": {"streams": {AutoCreateTopics: true}, "live": {AutoCreateTopics: true}},
	}}
	r := newStrataRegion(t, 2, func(c *jetstream.Config) { c.Policies = pol })
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := natsjs.New(nc)
	// The whole test's bound: the sum of its waits below (each has its
	// own), so a slow step shows as that step's timeout, never as a
	// shared context running out under a later one.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for i := 0; i < 10; i++ {
		if _, err := js.Publish(ctx, "demo.live.orders", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	own, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "OWN", Subjects: []string{"own.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := js.Publish(ctx, "own.x", nil); err != nil {
			t.Fatal(err)
		}
	}
	info := func(name string) *natsjs.StreamInfo {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		in, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	if in := info("live:orders"); in.State.Msgs != 10 || in.Config.MaxMsgs != -1 {
		t.Fatalf("before: %d msgs, max_msgs %d", in.State.Msgs, in.Config.MaxMsgs)
	}

	// Retention: max 4 messages, applied to the existing topic.
	pol.set(r, "demo", "live", &jetstream.Namespace{AutoCreateTopics: true, MaxMsgs: 4, MaxConsumers: 1})
	testutil.Eventually(t, "the namespace's retention applies to its existing topic", 20*time.Second, func() bool {
		in := info("live:orders")
		return in.State.Msgs == 4 && in.Config.MaxMsgs == 4
	})
	// Only namespace-made topics follow it: the JetStream stream keeps its own.
	pol.set(r, "demo", "streams", &jetstream.Namespace{AutoCreateTopics: true, MaxMsgs: 2})
	if in := info("OWN"); in.State.Msgs != 10 || in.Config.MaxMsgs != -1 {
		t.Fatalf("a JetStream-made stream followed the namespace: %d msgs, max_msgs %d", in.State.Msgs, in.Config.MaxMsgs)
	}
	_ = own

	// max_consumers: the second consumer of the topic is refused.
	st, err := js.Stream(ctx, "live:orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{Durable: "one"}); err != nil {
		t.Fatal(err)
	}
	_, err = st.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{Durable: "two"})
	var apiErr *natsjs.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10026 {
		t.Fatalf("second consumer with max_consumers 1: %v", err)
	}
	t.Logf("refused: %v", err)

	// A step that cannot succeed (a retention mode change under an
	// existing topic) is retried and shown in the topic's stats, not
	// dropped silently; fixing the policy clears it.
	pol.set(r, "demo", "live", &jetstream.Namespace{AutoCreateTopics: true, MaxMsgs: 4, MaxConsumers: 1, Retention: "interest"})
	name := tenancy.Name{Tenant: "demo", Namespace: "live", Topic: "orders"}
	policyErr := func() string {
		st, err := r.brokers[0].js.TopicStats(ctx, name)
		if err != nil || st.Policy == nil {
			return "?"
		}
		return st.Policy.Error
	}
	testutil.Eventually(t, "the failing step is in the topic's stats", 20*time.Second, func() bool {
		return strings.Contains(policyErr(), "retention mode cannot change")
	})
	pol.set(r, "demo", "live", &jetstream.Namespace{AutoCreateTopics: true, MaxMsgs: 4, MaxConsumers: 1})
	testutil.Eventually(t, "the error clears once the policy can apply", 90*time.Second, func() bool { return policyErr() == "" })

	// The bundle count changes: the topic moves to its new bundle's owner
	// and is served on, with its messages.
	pol.set(r, "demo", "live", &jetstream.Namespace{AutoCreateTopics: true, MaxMsgs: 4, MaxConsumers: 1, Bundles: 1})
	// A publish that times out while the topic moves may still be
	// stored, so the sequence to expect is the one acknowledged.
	var lastAck uint64
	testutil.Eventually(t, "the topic is served under its namespace's new bundles", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		ack, err := js.Publish(pctx, "demo.live.orders", []byte("after bundles"))
		if err != nil {
			return false
		}
		lastAck = ack.Sequence
		return true
	})
	if lastAck < 11 {
		t.Fatalf("after the bundle change: acked seq %d, want 11 or more", lastAck)
	}
	// max_msgs trims after the store, so right after the move the
	// topic may hold one more for a moment.
	testutil.Eventually(t, "the moved topic holds its last 4 messages", 20*time.Second, func() bool {
		in := info("live:orders")
		return in.State.Msgs == 4 && in.State.LastSeq == lastAck
	})

	// The namespace is deleted: its topic goes.
	pol.set(r, "demo", "live", nil)
	testutil.Eventually(t, "the topic of a deleted namespace is deleted", 20*time.Second, func() bool {
		// Each request bounded: one unanswered while the topic is being
		// deleted is asked again rather than waited on.
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		defer scancel()
		_, err := js.Stream(sctx, "live:orders")
		return errors.Is(err, natsjs.ErrStreamNotFound)
	})
}
