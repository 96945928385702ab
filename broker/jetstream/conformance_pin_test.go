package jetstream_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Exclusive/Failover subscriptions (spec §4 "Subscription types"): a
// consumer with priority_policy pinned_client and one priority group,
// pulled by several nats.go clients with PullPriorityGroup, on the
// reference nats-server and on Strata. Waiting for a pin to time out is
// the behaviour under test, so these tests take a few seconds each.

const (
	pinGroup   = "g"
	pinTimeout = 3 * time.Second // priority_timeout
)

// pinDelivery is one message a pinned-consumer client received.
type pinDelivery struct {
	seq       uint64
	delivered uint64
	pin       string
}

// pinClient is one nats.go client consuming the pinned consumer with its
// own connection (nats.go keeps the pin id per consumer handle).
type pinClient struct {
	name string
	cc   jetstream.ConsumeContext

	mu   sync.Mutex
	got  []pinDelivery
	ch   chan struct{}
	ack  func(seq uint64) bool
	stop bool
}

// startPinClient consumes "pin" on ORDERS with 1 s pulls (so a live
// client pulls well within priority_timeout); ack says which stream
// sequences it acks.
func startPinClient(t *testing.T, tg *target, name string, ack func(uint64) bool) *pinClient {
	t.Helper()
	_, js := connectJS(t, tg)
	c, err := js.Consumer(testCtx(t), ordersStream, "pin")
	if err != nil {
		t.Fatal(err)
	}
	pc := &pinClient{name: name, ch: make(chan struct{}, 1<<12), ack: ack}
	pc.cc, err = c.Consume(func(m jetstream.Msg) {
		md := meta(t, m)
		pc.mu.Lock()
		if pc.stop {
			pc.mu.Unlock()
			return
		}
		pc.got = append(pc.got, pinDelivery{seq: md.Sequence.Stream, delivered: md.NumDelivered, pin: m.Headers().Get("Nats-Pin-Id")})
		pc.mu.Unlock()
		if pc.ack(md.Sequence.Stream) {
			_ = m.Ack()
		}
		pc.ch <- struct{}{}
	}, jetstream.PullPriorityGroup(pinGroup), jetstream.PullExpiry(shortWait),
		jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) {})) // 408s, 423s: expected here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pc.halt)
	return pc
}

// halt stops consuming: no more pulls, nothing more recorded or acked.
func (pc *pinClient) halt() {
	pc.mu.Lock()
	pc.stop = true
	pc.mu.Unlock()
	pc.cc.Stop()
}

func (pc *pinClient) deliveries() []pinDelivery {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return slices.Clone(pc.got)
}

// waitFor blocks until cond holds for pc's deliveries, or fails after d.
func (pc *pinClient) waitFor(t *testing.T, d time.Duration, what string, cond func([]pinDelivery) bool) []pinDelivery {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if got := pc.deliveries(); cond(got) {
			return got
		}
		select {
		case <-pc.ch:
		case <-deadline.C:
			t.Fatalf("%s: %s not within %v; got %+v", pc.name, what, d, pc.deliveries())
		}
	}
}

func firstDeliveries(ds []pinDelivery) []uint64 {
	var out []uint64
	for _, d := range ds {
		if d.delivered == 1 {
			out = append(out, d.seq)
		}
	}
	return out
}

func createPinned(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	createConsumer(t, js, ordersStream, jetstream.ConsumerConfig{
		Durable: "pin", AckPolicy: jetstream.AckExplicitPolicy, AckWait: shortWait,
		PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{pinGroup}, PinnedTTL: pinTimeout,
	})
}

// pinnedID is the consumer's pin as CONSUMER.INFO reports it.
func pinnedID(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	c, err := js.Consumer(testCtx(t), ordersStream, "pin")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ci.PriorityGroups) != 1 || ci.PriorityGroups[0].Group != pinGroup {
		t.Fatalf("priority_groups %+v", ci.PriorityGroups)
	}
	return ci.PriorityGroups[0].PinnedClientID
}

// The pinned client gets every message with Nats-Pin-Id; a second client
// gets nothing while the pin lives, and a pull with another id gets 423.
// When the pinned client stops, after priority_timeout the standby gets
// a new pin and receives from the first unacked message (the old pin's
// unacked messages come back after ack_wait, before new ones; on Strata
// lowest sequence first).
func TestJSPinnedClientFailover(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		createStream(t, js, ordersConfig())
		publishN(t, js, "ord.a", 5, 1)
		createPinned(t, js)

		a := startPinClient(t, tg, "A", func(seq uint64) bool { return seq <= 2 })
		got := a.waitFor(t, 10*time.Second, "messages 1–5", func(ds []pinDelivery) bool { return len(firstDeliveries(ds)) == 5 })
		pinA := got[0].pin
		for _, d := range got {
			if d.pin == "" || d.pin != pinA {
				t.Fatalf("A's deliveries carry pins %+v, want one", got)
			}
		}
		if s := firstDeliveries(got); !slices.Equal(s, []uint64{1, 2, 3, 4, 5}) {
			t.Fatalf("A got %v", s)
		}
		if id := pinnedID(t, js); id != pinA {
			t.Fatalf("CONSUMER.INFO pinned_client_id %q, want %q", id, pinA)
		}
		raw := rawPull(t, nc, ordersStream, "pin", `{"batch":1,"expires":1000000000,"group":"g","id":"not-the-pin"}`, 5, 5*time.Second)
		if len(raw) != 1 {
			t.Fatalf("pull with another pin id: %d frames", len(raw))
		}
		wantStatus(t, raw[0], "423", "Nats-Pin-Id mismatch")

		// B is a standby: nothing while A pulls (every second, within
		// priority_timeout), though A leaves 3–5 unacked and they come back.
		b := startPinClient(t, tg, "B", func(uint64) bool { return true })
		time.Sleep(pinTimeout) // the pin must outlive this
		if ds := b.deliveries(); len(ds) != 0 {
			t.Fatalf("the standby got %+v while A was pinned", ds)
		}
		if id := pinnedID(t, js); id != pinA {
			t.Fatalf("pin moved to %q while A pulled", id)
		}

		// A stops: after priority_timeout B is pinned and gets 3, 4, 5 first.
		stopped := time.Now()
		a.halt()
		got = b.waitFor(t, pinTimeout+15*time.Second, "3, 4 and 5", func(ds []pinDelivery) bool { return len(ds) >= 3 })
		after := time.Since(stopped)
		pinB := got[0].pin
		if pinB == "" || pinB == pinA {
			t.Fatalf("B's pin %q (A's %q)", pinB, pinA)
		}
		var first3 []uint64
		for _, d := range got[:3] {
			if d.delivered < 2 || d.pin != pinB {
				t.Fatalf("B's deliveries %+v, want redeliveries of 3, 4, 5 with pin %q", got, pinB)
			}
			first3 = append(first3, d.seq)
		}
		// Strata redelivers lowest sequence first; the reference in the
		// order its redelivery queue got them (e.g. 5, 3, 4).
		if sorted := slices.Sorted(slices.Values(first3)); !slices.Equal(sorted, []uint64{3, 4, 5}) ||
			(tg.Name == strataName && !slices.Equal(first3, sorted)) {
			t.Fatalf("B's first deliveries %v, want 3, 4, 5", first3)
		}
		// The pin lives priority_timeout past the pinned client's last
		// pull (both targets reset it per pull), and A's last pull went
		// out up to one pull expiry (shortWait) before it stopped.
		if earliest := (pinTimeout - shortWait) * 9 / 10; after < earliest {
			t.Fatalf("the pin moved %v after A stopped: before priority_timeout %v less A's pull expiry %v", after, pinTimeout, shortWait)
		}
		publishN(t, js, "ord.a", 1, 6)
		got = b.waitFor(t, 10*time.Second, "message 6", func(ds []pinDelivery) bool { return slices.Contains(firstDeliveries(ds), 6) })
		if last := got[len(got)-1]; last.seq != 6 || last.pin != pinB {
			t.Fatalf("B's last delivery %+v", last)
		}
		t.Logf("%s: pin moved %v after the pinned client stopped", tg.Name, after.Round(10*time.Millisecond))
	})
}

// CONSUMER.UNPIN moves the pin: the pinned client's pulls go stale (423,
// then it pulls again without an id) and the next message goes to a
// waiting standby with a new pin.
func TestJSPinnedClientUnpin(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		s := createStream(t, js, ordersConfig())
		createPinned(t, js)
		publishN(t, js, "ord.a", 1, 1)
		b := startPinClient(t, tg, "B", func(uint64) bool { return true })
		got := b.waitFor(t, 10*time.Second, "message 1", func(ds []pinDelivery) bool { return len(ds) == 1 })
		pinB := got[0].pin
		if pinB == "" {
			t.Fatal("no Nats-Pin-Id")
		}
		c := startPinClient(t, tg, "C", func(uint64) bool { return true })
		// Both clients wait (B pinned, C a standby) before the unpin.
		waitCond(t, 10*time.Second, "two waiting pulls", func() bool {
			ci, err := s.Consumer(testCtx(t), "pin")
			if err != nil {
				t.Fatal(err)
			}
			info, err := ci.Info(testCtx(t))
			return err == nil && info.NumWaiting >= 2
		})
		if err := s.UnpinConsumer(testCtx(t), "pin", pinGroup); err != nil {
			t.Fatal(err)
		}
		if id := pinnedID(t, js); id != "" {
			t.Fatalf("pinned_client_id %q after UNPIN", id)
		}
		wantAPIError(t, s.UnpinConsumer(testCtx(t), "pin", "other"), jetstream.ErrorCode(10160))
		publishN(t, js, "ord.a", 1, 2)
		got = c.waitFor(t, 10*time.Second, "message 2", func(ds []pinDelivery) bool { return len(ds) == 1 })
		pinC := got[0].pin
		if got[0].seq != 2 || pinC == "" || pinC == pinB {
			t.Fatalf("C got %+v; B's pin was %q", got, pinB)
		}
		if ds := b.deliveries(); len(ds) != 1 {
			t.Fatalf("B got %+v after the unpin", ds)
		}
		if id := pinnedID(t, js); id != pinC {
			t.Fatalf("pinned_client_id %q, want C's %q", id, pinC)
		}
		raw := rawPull(t, nc, ordersStream, "pin", `{"batch":1,"expires":1000000000,"group":"g","id":"`+pinB+`"}`, 5, 5*time.Second)
		if len(raw) != 1 {
			t.Fatalf("pull with the old pin: %d frames", len(raw))
		}
		wantStatus(t, raw[0], "423", "Nats-Pin-Id mismatch")
	})
}

// waitCond polls cond every 20 ms until it holds, or fails after d.
func waitCond(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
