package jetstream_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/audit"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestAuditSummariesAndHooks: both regions summarise the replicated
// origin stream alike; the remove hook leaves a hole in one region's
// copy only; the freeze hook stops the cursor while it reports no lag;
// hooks are refused where they are off.
func TestAuditSummariesAndHooks(t *testing.T) {
	a, b := twoRegions(t, func(c *jetstream.Config) {
		c.TestHooks = true
		c.Replicator.AckTimeout = 300 * time.Millisecond // the frozen cursor's dropped batches are resent soon after the thaw
	})
	nc, err := nats.Connect(a.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := natsjs.New(nc)
	for i := 0; i < 20; i++ {
		if _, err := js.Publish(testCtx(t), "demo.geo.t", fmt.Appendf(nil, "m%d", i), natsjs.WithMsgID(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	name := bqName("geo")
	testutil.Eventually(t, "replicated", 10*time.Second, func() bool {
		rs, ok := cursorOf(t, a, name.String())
		return ok && rs.Position == 20
	})
	summary := func(r *strataRegion) *audit.OriginSummary {
		t.Helper()
		s, err := r.brokers[0].js.TopicOrigins(testCtx(t), name, audit.Request{Span: 8})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Origins) != 1 {
			t.Fatalf("%s: origins %+v, want one", s.Region, s.Origins)
		}
		return &s.Origins[0]
	}
	sa, sb := summary(a), summary(b)
	if sa.Region != "r1" || !slices.Equal(sa.Held, []audit.Range{{From: 1, To: 20}}) {
		t.Fatalf("origin's summary %+v", sa)
	}
	if !slices.Equal(sa.Spans, sb.Spans) || !slices.Equal(sa.Held, sb.Held) {
		t.Fatalf("copies differ:\n%+v\n%+v", sa, sb)
	}

	if _, err := b.brokers[0].js.TestHook(testCtx(t), name, jetstream.TestHookRequest{Action: jetstream.HookRemoveMessage, OriginRegion: "r1", OriginSeq: 7}); err != nil {
		t.Fatal(err)
	}
	sb = summary(b)
	if want := []audit.Range{{From: 1, To: 6}, {From: 8, To: 20}}; !slices.Equal(sb.Held, want) {
		t.Fatalf("after remove: held %v, want %v", sb.Held, want)
	}
	if sa = summary(a); !slices.Equal(sa.Held, []audit.Range{{From: 1, To: 20}}) {
		t.Fatalf("the removal reached the origin: %v", sa.Held)
	}
	win, _ := audit.Window(sa, sb, audit.Bound(20, sb, 20))
	if res := audit.Compare(sa, sb, win, 20); !slices.Equal(res.MissingAtGot, []audit.Range{{From: 7, To: 7}}) {
		t.Fatalf("compare: %+v", res)
	}

	if _, err := a.brokers[0].js.TestHook(testCtx(t), name, jetstream.TestHookRequest{Action: jetstream.HookFreezeReplicator, Remote: "r2"}); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 25; i++ {
		if _, err := js.Publish(testCtx(t), "demo.geo.t", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	rs, _ := cursorOf(t, a, name.String())
	if rs.Position != 20 || rs.LastOriginSeq != 25 || rs.LagMsgs != 0 {
		t.Fatalf("frozen cursor: position %d last %d lag %d, want 20, 25 and a lying 0", rs.Position, rs.LastOriginSeq, rs.LagMsgs)
	}
	if _, err := a.brokers[0].js.TestHook(testCtx(t), name, jetstream.TestHookRequest{Action: jetstream.HookThawReplicator, Remote: "r2"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "thawed cursor catches up", 20*time.Second, func() bool {
		rs, _ := cursorOf(t, a, name.String())
		return rs.Position == 25
	})

	for _, bad := range []jetstream.TestHookRequest{
		{Action: "explode"},
		{Action: jetstream.HookRemoveMessage, OriginRegion: "r1"},
		{Action: jetstream.HookFreezeReplicator},
		{Action: jetstream.HookRemoveMessage, OriginRegion: "r9", OriginSeq: 1},
		{Action: jetstream.HookFreezeReplicator, Remote: "r9"},
	} {
		if _, err := a.brokers[0].js.TestHook(testCtx(t), name, bad); !errors.Is(err, jetstream.ErrBadHook) {
			t.Errorf("%+v: err %v, want ErrBadHook", bad, err)
		}
	}
	if _, err := a.brokers[0].js.TopicOrigins(testCtx(t), name, audit.Request{From: 9, To: 2}); !errors.Is(err, audit.ErrBadRequest) {
		t.Errorf("bad range: %v", err)
	}
}

func TestTestHooksOff(t *testing.T) {
	r := newStrataRegion(t, 1, nil)
	_, err := r.brokers[0].js.TestHook(testCtx(t), bqName("streams"), jetstream.TestHookRequest{Action: jetstream.HookFreezeReplicator, Remote: "x"})
	if !errors.Is(err, jetstream.ErrTestHooksOff) {
		t.Fatalf("err %v, want ErrTestHooksOff", err)
	}
}
