package consumer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// ksCfg is pullCfg for a key_shared consumer keyed by subject.
func ksCfg(mod func(*jsapi.ConsumerConfig)) jsapi.ConsumerConfig {
	return pullCfg(func(c *jsapi.ConsumerConfig) {
		c.Metadata = map[string]string{MetaSubscription: SubscriptionKeyShared}
		if mod != nil {
			mod(c)
		}
	})
}

func TestKeyOf(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nX-Other: 1\r\nOrder-Id: 42 \r\n\r\n")
	for _, tc := range []struct {
		key, topic, subject string
		hdr                 []byte
		want                string
	}{
		{"", "acme.ops.orders", "acme.ops.orders.eu.7", nil, "eu.7"},
		{"subject", "acme.ops.orders", "acme.ops.orders", nil, ""},
		{"subject", "acme.ops.orders", "acme.ops.ordersx.1", nil, "acme.ops.ordersx.1"},
		{"subject", "", "ord.eu.7", nil, "ord.eu.7"},
		{"header:Order-Id", "", "ord.a", hdr, "42"},
		{"header:order-id", "", "ord.a", hdr, ""}, // header names are case-sensitive, as in nats.go
		{"header:Order-Id", "", "ord.a", nil, ""},
	} {
		cfg := ksCfg(func(c *jsapi.ConsumerConfig) {
			if tc.key != "" {
				c.Metadata[MetaKey] = tc.key
			}
		})
		c, err := New(cfg, nil, t0, newSource(), StreamName("S"), TopicSubject(tc.topic))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.keyOf(Msg{Subject: tc.subject, Header: tc.hdr}); got != tc.want {
			t.Errorf("key %q topic %q subject %q: %q, want %q", tc.key, tc.topic, tc.subject, got, tc.want)
		}
	}
}

// Invalid metadata is refused with an error naming the field.
func TestKeySharedConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		meta   map[string]string
		ack    jsapi.AckPolicy
		naming string
	}{
		{map[string]string{MetaSubscription: "exclusive"}, "", `"strata.subscription"`},
		{map[string]string{MetaSubscription: "key_shared", MetaKey: "header:a b"}, "", `"strata.key"`},
		{map[string]string{MetaSubscription: "key_shared", MetaKey: "data"}, "", `"strata.key"`},
		{map[string]string{MetaKey: "subject"}, "", `"strata.key"`},
		{map[string]string{MetaSubscription: "key_shared"}, jsapi.AckNone, "ack_policy"},
	} {
		cfg := pullCfg(func(c *jsapi.ConsumerConfig) {
			c.Metadata = tc.meta
			if tc.ack != "" {
				c.AckPolicy = tc.ack
			}
		})
		_, err := New(cfg, nil, t0, newSource(), StreamName("S"))
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.naming) {
			t.Errorf("%v: %v, want an invalid config naming %s", tc.meta, err, tc.naming)
		}
	}
	c, err := New(ksCfg(nil), nil, t0, newSource(), StreamName("S"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateConfig(pullCfg(nil)); !errors.Is(err, ErrImmutable) || !strings.Contains(err.Error(), "strata.subscription") {
		t.Fatalf("update to shared: %v", err)
	}
	if err := c.UpdateConfig(ksCfg(func(c *jsapi.ConsumerConfig) { c.Metadata["other"] = "x" })); err != nil {
		t.Fatalf("other metadata: %v", err)
	}
}

// A key goes to one puller while a delivery of it is in flight there;
// its messages for another puller are held and go first once a request
// may take them; a free key goes to anyone.
func TestKeySharedBinding(t *testing.T) {
	h := newHarness(t, newSource(), ksCfg(nil))
	for _, s := range []string{"k.1", "k.2", "k.1", "k.3", "k.1"} {
		h.publish(s, "x")
	}
	a := h.pull("A", jsapi.PullRequest{Batch: 1})
	expectOuts(t, a, "A<-1(d1,n1)") // k.1 bound to A
	// B may not take 3 or 5 (k.1): they are held; it gets 2 and 4.
	expectOuts(t, h.pull("B", jsapi.PullRequest{Batch: 3, Expires: time.Minute}), "B<-2(d2,n1); B<-4(d3,n1)")
	if got := h.c.Info(h.now); got.NumPending != 2 || got.NumAckPending != 3 {
		t.Fatalf("num_pending %d num_ack_pending %d, want 2 held, 3 in flight", got.NumPending, got.NumAckPending)
	}
	h.publish("k.4", "x") // 6: B's last credit
	expectOuts(t, h.c.Dispatch(h.now), "B<-6(d4,n1)")
	// A pulls again: the held k.1 messages, in order.
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 5, Expires: time.Minute}), "A<-3(d5,n1); A<-5(d6,n1)")
	// A acks everything: k.1 is free; the next k.1 goes to whoever asks.
	for _, s := range []uint64{1, 3, 5} {
		h.c.Ack(h.now, s, 0, jsapi.Ack{Kind: jsapi.AckAck}, "")
	}
	expectOuts(t, h.pull("C", jsapi.PullRequest{Batch: 1, Expires: time.Minute}), "")
	h.publish("k.1", "x") // 7: A's request is older than C's
	expectOuts(t, h.c.Dispatch(h.now), "A<-7(d7,n1)")
	h.publish("k.2", "x") // 8: bound to B (2 in flight), B has no request
	h.publish("k.5", "x") // 9: free: the oldest request, A's
	expectOuts(t, h.c.Dispatch(h.now), "A<-9(d8,n1)")
	h.c.checkInvariants(t)
}

// A redelivery goes to the puller the key is bound to; once nothing of
// the key is in flight it goes to anyone and binds the key there.
func TestKeySharedRedelivery(t *testing.T) {
	h := newHarness(t, newSource(), ksCfg(nil))
	h.publish("k.1", "x")
	h.publish("k.1", "x")
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1}), "A<-1(d1,n1)")
	h.advance(time.Second)
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1}), "A<-2(d2,n1)")
	expectOuts(t, h.pull("B", jsapi.PullRequest{Batch: 5, Expires: time.Minute}), "")
	// 1's ack wait ends; 2 is still in flight at A: 1 waits for A.
	h.advance(time.Second)
	expectOuts(t, h.tick(), "")
	// NAK 2: nothing of k.1 is in flight; B takes both, 1 first.
	expectOuts(t, h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckNak}, ""), "B<-1(d3,n2); B<-2(d4,n2)")
	// k.1 is now bound to B: a new k.1 goes to B, not to A.
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1, Expires: time.Minute}), "")
	h.publish("k.1", "x")
	expectOuts(t, h.c.Dispatch(h.now), "B<-3(d5,n1)")
	h.c.checkInvariants(t)
}

// At most max_ack_pending messages are held; the cursor stops at the
// first message it would have to hold beyond that. Held messages survive
// a restore as first deliveries, and count against max_ack_pending once
// delivered.
func TestKeySharedHeldLimitAndRestore(t *testing.T) {
	h := newHarness(t, newSource(), ksCfg(func(c *jsapi.ConsumerConfig) { c.MaxAckPending = 3 }))
	for _, s := range []string{"k.1", "k.1", "k.1", "k.2", "k.1", "k.1", "k.3"} {
		h.publish(s, "x")
	}
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1}), "A<-1(d1,n1)")
	// B: 2 and 3 are held (k.1 is A's), 4 goes to B, 5 is held; 6 would
	// be a fourth held message: the cursor stops there.
	expectOuts(t, h.pull("B", jsapi.PullRequest{Batch: 5, Expires: time.Minute}), "B<-4(d2,n1)")
	if len(h.c.held) != 3 || h.c.delivered != 5 {
		t.Fatalf("held %v delivered %d", h.c.held, h.c.delivered)
	}
	h.c.checkInvariants(t)
	h.persist()
	if len(h.persisted.Held) != 3 {
		t.Fatalf("persisted held %v", h.persisted.Held)
	}
	h.restart()
	h.persist()
	// 1 and 4 are redeliveries, 2 a first delivery; then max_ack_pending.
	expectOuts(t, h.pull("C", jsapi.PullRequest{Batch: 10, NoWait: true}),
		"C<-1(d1001,n2); C<-4(d1002,n2); C<-2(d1003,n1); C<-404 No Messages")
	h.c.checkInvariants(t)
	for _, s := range []uint64{1, 2, 4} {
		h.c.Ack(h.now, s, 0, jsapi.Ack{Kind: jsapi.AckAck}, "")
	}
	expectOuts(t, h.pull("D", jsapi.PullRequest{Batch: 10, NoWait: true}),
		"D<-3(d1004,n1); D<-5(d1005,n1); D<-6(d1006,n1); D<-404 No Messages")
	h.c.checkInvariants(t)
}

// A held message trimmed by retention counts as acked and is not
// delivered.
func TestKeySharedHeldTrimmed(t *testing.T) {
	src := newSource()
	h := newHarness(t, src, ksCfg(nil))
	h.publish("k.1", "x")
	h.publish("k.1", "x")
	h.publish("k.2", "x")
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1}), "A<-1(d1,n1)")
	expectOuts(t, h.pull("B", jsapi.PullRequest{Batch: 1}), "B<-3(d2,n1)")
	src.trim(2)
	h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.c.Ack(h.now, 3, 2, jsapi.Ack{Kind: jsapi.AckAck}, "")
	expectOuts(t, h.pull("B", jsapi.PullRequest{Batch: 1, NoWait: true}), "B<-404 No Messages")
	if md := h.c.MarkDelete(); md != 3 {
		t.Fatalf("mark-delete %d", md)
	}
	h.c.checkInvariants(t)
}

// Requests of one puller are served oldest first; a request the message
// does not fit ends with 409 and the puller's next request takes it.
func TestKeySharedMaxBytes(t *testing.T) {
	h := newHarness(t, newSource(), ksCfg(nil))
	h.publish("k.1", "x")
	h.publish("k.1", strings.Repeat("y", 200))
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1}), "A<-1(d1,n1)")
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1, MaxBytes: 100, Expires: time.Minute}),
		"A<-409 Message Size Exceeds MaxBytes [1/100]")
	expectOuts(t, h.pull("B", jsapi.PullRequest{Batch: 1, Expires: time.Minute}), "") // 2 is held for A
	expectOuts(t, h.pull("A", jsapi.PullRequest{Batch: 1, Expires: time.Minute}), "A<-2(d2,n1)")
	h.c.checkInvariants(t)
}
