package jetstream_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/bundle"
	jsvc "github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
)

// owners returns bundle → owner as broker b sees it, and whether every
// bundle has one.
func owners(b *strataBroker) (map[string]string, bool) {
	out := map[string]string{}
	all := true
	for _, bi := range b.js.Bundles() {
		out[bi.Bundle] = bi.Owner
		all = all && bi.Owner != ""
	}
	return out, all
}

// balanced reports whether every bundle is owned and the live brokers'
// counts differ by at most one.
func balanced(b *strataBroker, live ...*strataBroker) bool {
	own, all := owners(b)
	if !all {
		return false
	}
	counts := map[string]int{}
	for _, o := range own {
		counts[o]++
	}
	lo, hi := len(own), 0
	for _, l := range live {
		lo, hi = min(lo, counts[l.name]), max(hi, counts[l.name])
	}
	return hi-lo <= 1 && len(counts) == len(live)
}

// TestBundlesSpreadUnloadAndDrain: bundles spread evenly over three
// brokers; an admin unload moves a bundle with topics (to the least
// loaded other broker, or to a named one); a broker that stops hands its
// bundles over; publishes through every broker keep working across each
// move and nothing stored is lost or duplicated; a broker that comes back
// gets bundles again (load shedding).
func TestBundlesSpreadUnloadAndDrain(t *testing.T) {
	r := newStrataRegion(t, 3, nil)
	b1, b2, b3 := r.brokers[0], r.brokers[1], r.brokers[2]
	testutil.Eventually(t, "8 bundles spread over 3 brokers", 30*time.Second, func() bool { return balanced(b1, b1, b2, b3) })

	conns := map[string]jetstream.JetStream{}
	for _, b := range r.brokers {
		nc, err := nats.Connect(b.url())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		conns[b.name] = js
	}
	const topics = 12
	sent := map[int]int{} // topic → messages acked
	publishAll := func(via ...*strataBroker) {
		t.Helper()
		for i := 1; i <= topics; i++ {
			for _, b := range via {
				n := sent[i] + 1
				var err error
				for try := 0; try < 20; try++ { // retries across a move, deduplicated
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err = conns[b.name].Publish(ctx, fmt.Sprintf("demo.events.t%d", i), []byte(fmt.Sprint(n)), jetstream.WithMsgID(fmt.Sprintf("t%d-%d", i, n)))
					cancel()
					if err == nil {
						break
					}
					t.Logf("publish %d to t%d via %s: %v (retrying)", n, i, b.name, err)
				}
				if err != nil {
					t.Fatalf("publish %d to t%d via %s: %v", n, i, b.name, err)
				}
				sent[i] = n
			}
		}
	}
	check := func(via *strataBroker) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := 1; i <= topics; i++ {
			st, err := conns[via.name].Stream(ctx, fmt.Sprintf("events:t%d", i))
			if err != nil {
				t.Fatalf("stream of t%d: %v", i, err)
			}
			info, err := st.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != uint64(sent[i]) || info.State.LastSeq != uint64(sent[i]) || info.State.FirstSeq != 1 {
				t.Fatalf("t%d holds %d msgs, seqs %d..%d; want %d from 1", i, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq, sent[i])
			}
		}
	}
	publishAll(b1, b2, b3)
	check(b2)

	// The bundle holding t1, unloaded without a target.
	id := bundle.Of("demo", "events", "t1", jsvc.DefaultBundles)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	from, err := b3.js.Unload(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	to, err := b3.js.WaitMoved(ctx, id, from)
	if err != nil {
		t.Fatalf("bundle %s did not move from %s: %v", id, from, err)
	}
	t.Logf("unloaded %s: %s → %s", id, from, to)
	publishAll(b1, b2, b3)
	check(b1)

	// To a named broker.
	var target string
	for _, b := range r.brokers {
		if b.name != to {
			target = b.name
			break
		}
	}
	if _, err := b1.js.Unload(ctx, id, target); err != nil {
		t.Fatal(err)
	}
	if got, err := b1.js.WaitMoved(ctx, id, to); err != nil || got != target {
		t.Fatalf("unload to %s: bundle went to %q (%v)", target, got, err)
	}
	if _, err := b1.js.Unload(ctx, id, "test.nobody"); err == nil {
		t.Fatal("an unload to an unknown broker was accepted")
	}
	if _, err := b1.js.Unload(ctx, bundle.ID{Tenant: "demo", Namespace: "nope", Range: id.Range}, ""); err == nil {
		t.Fatal("an unload of an unknown bundle was accepted")
	}
	publishAll(b1, b2, b3)

	// b2 stops: it hands its bundles over before it goes (its owner keys
	// are gone from etcd when stop returns; another broker's view of them
	// follows its watch, so etcd itself is asked).
	b2.stop(t)
	kvs, err := r.store.List(ctx, "bundles/owners/")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) == 0 {
		t.Fatal("no owner keys under bundles/owners/: the check below would prove nothing")
	}
	for _, kv := range kvs {
		if strings.Contains(string(kv.Value), `"`+b2.name+`"`) {
			t.Fatalf("bundle %s still owned by the stopped %s: %s", kv.Key, b2.name, kv.Value)
		}
	}
	testutil.Eventually(t, "bundles spread over the 2 brokers left", 30*time.Second, func() bool { return balanced(b1, b1, b3) })
	publishAll(b1, b3)
	check(b3)

	// b2 comes back and gets its share again.
	b2.start(t)
	testutil.Eventually(t, "bundles spread over 3 brokers again", 30*time.Second, func() bool { return balanced(b1, b1, b2, b3) })
	publishAll(b1, b2, b3)
	check(b2)
}
