package jetstream_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// Conformance items 24–38: pulling, acking and consumer state (see
// conformance_test.go). Timing items use ack_wait of shortWait (1 s) and
// wait for events (a fetch with a deadline); a fixed sleep appears only
// where time must pass for the behaviour under test, and says so.

// setupConsumer creates ORDERS and, on it, addConsumer's durable "c".
func setupConsumer(t *testing.T, js jetstream.JetStream, mod func(*jetstream.ConsumerConfig)) jetstream.Consumer {
	t.Helper()
	createStream(t, js, ordersConfig())
	return addConsumer(t, js, mod)
}

// addConsumer creates the durable "c" on ORDERS: explicit acks, with the
// given changes. Tests that check pending counts publish before they
// create it: the reference counts a message published after the consumer
// into num_pending asynchronously, so right after a PubAck it may not be
// counted yet; a consumer counts what is stored when it is created.
func addConsumer(t *testing.T, js jetstream.JetStream, mod func(*jetstream.ConsumerConfig)) jetstream.Consumer {
	t.Helper()
	cfg := jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy}
	if mod != nil {
		mod(&cfg)
	}
	return createConsumer(t, js, ordersStream, cfg)
}

// Item 24: Fetch(2) returns the original subjects and correct Metadata().
func TestJS24FetchMetadata(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		createStream(t, js, ordersConfig())
		before := time.Now()
		msg := nats.NewMsg("ord.b")
		msg.Header.Set("X-Trace", "abc")
		msg.Data = []byte("two")
		for _, m := range []*nats.Msg{{Subject: "ord.a", Data: []byte("one")}, msg, {Subject: "ord.c", Data: []byte("three")}} {
			if _, err := js.PublishMsg(testCtx(t), m); err != nil {
				t.Fatal(err)
			}
		}
		c := addConsumer(t, js, nil)
		msgs := fetch(t, c, 2, jetstream.FetchMaxWait(5*time.Second))
		after := time.Now()
		if len(msgs) != 2 {
			t.Fatalf("got %d messages, want 2", len(msgs))
		}
		for i, m := range msgs {
			wantSubj, wantData := []string{"ord.a", "ord.b"}[i], []string{"one", "two"}[i]
			if m.Subject() != wantSubj || string(m.Data()) != wantData {
				t.Fatalf("message %d: %s %q, want %s %q", i, m.Subject(), m.Data(), wantSubj, wantData)
			}
			md := meta(t, m)
			seq := uint64(i + 1)
			if md.Stream != ordersStream || md.Consumer != "c" || md.Sequence.Stream != seq ||
				md.Sequence.Consumer != seq || md.NumDelivered != 1 || md.NumPending != 3-seq {
				t.Fatalf("message %d metadata %+v: want stream %s consumer c sseq=dseq=%d delivered 1 pending %d",
					i, md, ordersStream, seq, 3-seq)
			}
			// The store time, in ns: between our publish and our fetch
			// (same host, same clock; a little slack for rounding).
			if md.Timestamp.Before(before.Add(-time.Second)) || md.Timestamp.After(after.Add(time.Second)) {
				t.Fatalf("message %d timestamp %v not within [%v, %v]", i, md.Timestamp, before, after)
			}
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		if got := msgs[1].Headers().Get("X-Trace"); got != "abc" {
			t.Fatalf("header X-Trace = %q", got)
		}
	})
}

// Item 25: FetchNoWait on empty: 404, an empty batch, no error; with some
// messages: those, then 404.
func TestJS25FetchNoWait(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		c := setupConsumer(t, js, nil)
		b, err := c.FetchNoWait(5)
		if err != nil {
			t.Fatal(err)
		}
		if msgs := drain(t, b); len(msgs) != 0 {
			t.Fatalf("empty stream: %d messages", len(msgs))
		}
		got := rawPull(t, nc, ordersStream, "c", `{"batch":5,"no_wait":true}`, 10, 5*time.Second)
		if len(got) != 1 {
			t.Fatalf("no_wait on empty: %d frames, want one 404", len(got))
		}
		wantStatus(t, got[0], "404", "")

		publishN(t, js, "ord.a", 2, 1)
		b, err = c.FetchNoWait(5)
		if err != nil {
			t.Fatal(err)
		}
		msgs := drain(t, b)
		if s := seqs(t, msgs); !slices.Equal(s, []uint64{1, 2}) {
			t.Fatalf("FetchNoWait(5) with 2 available: seqs %v", s)
		}
		publishN(t, js, "ord.a", 2, 3)
		got = rawPull(t, nc, ordersStream, "c", `{"batch":5,"no_wait":true}`, 10, 5*time.Second)
		if len(got) != 3 || status(got[0]) != "" || status(got[1]) != "" {
			t.Fatalf("no_wait with 2 available: %d frames %v", len(got), got)
		}
		wantStatus(t, got[2], "404", "")
	})
}

// Item 26: an idle Fetch(…, FetchMaxWait(1s)) ends with a 408 carrying the
// pending headers, and no error.
func TestJS26FetchExpiry408(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		c := setupConsumer(t, js, nil)
		if msgs := fetch(t, c, 1, jetstream.FetchMaxWait(shortWait)); len(msgs) != 0 {
			t.Fatalf("idle fetch: %d messages", len(msgs))
		}
		for _, tc := range []struct{ body, msgs, bytes string }{
			{`{"batch":3,"expires":1000000000}`, "3", "0"},
			{`{"batch":3,"expires":1000000000,"max_bytes":4096}`, "3", "4096"},
		} {
			got := rawPull(t, nc, ordersStream, "c", tc.body, 10, 5*time.Second)
			if len(got) != 1 {
				t.Fatalf("%s: %d frames, want one 408", tc.body, len(got))
			}
			wantStatus(t, got[0], "408", "Request Timeout")
			if m, b := got[0].Header.Get("Nats-Pending-Messages"), got[0].Header.Get("Nats-Pending-Bytes"); m != tc.msgs || b != tc.bytes {
				t.Fatalf("%s: pending headers %q/%q, want %s/%s", tc.body, m, b, tc.msgs, tc.bytes)
			}
		}
	})
}

// Item 27: an idle Fetch with expiry ≥ 10 s gets a 100 heartbeat every 5 s
// and no ErrNoHeartbeat.
func TestJS27IdleHeartbeat(t *testing.T) {
	const expiry, hb = 10 * time.Second, 5 * time.Second
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		c := setupConsumer(t, js, nil)
		// On the wire, next to the client's own Fetch (both idle).
		var raw []*nats.Msg
		var rawAt []time.Time
		var wg sync.WaitGroup
		wg.Add(1)
		start := time.Now()
		go func() {
			defer wg.Done()
			inbox := nc.NewInbox()
			sub, err := nc.SubscribeSync(inbox)
			if err != nil {
				t.Error(err)
				return
			}
			defer sub.Unsubscribe()
			body := fmt.Sprintf(`{"batch":1,"expires":%d,"idle_heartbeat":%d}`, expiry, hb)
			if err := nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.ORDERS.c", inbox, []byte(body)); err != nil {
				t.Error(err)
				return
			}
			for {
				m, err := sub.NextMsg(expiry + 5*time.Second)
				if err != nil {
					return
				}
				raw, rawAt = append(raw, m), append(rawAt, time.Now())
				if status(m) != "100" {
					return
				}
			}
		}()
		// nats.go's Fetch turns heartbeats on (5 s) for expiries ≥ 10 s and
		// fails with ErrNoHeartbeat after two missed beats.
		if msgs := fetch(t, c, 1, jetstream.FetchMaxWait(expiry)); len(msgs) != 0 {
			t.Fatalf("idle fetch: %d messages", len(msgs))
		}
		wg.Wait()
		if len(raw) < 2 {
			t.Fatalf("raw pull got %d frames, want heartbeats then a 408", len(raw))
		}
		last := start
		for i, m := range raw[:len(raw)-1] {
			wantStatus(t, m, "100", "Idle Heartbeat")
			if m.Header.Get("Nats-Last-Consumer") == "" || m.Header.Get("Nats-Last-Stream") == "" {
				t.Errorf("heartbeat %d lacks Nats-Last-Consumer/Nats-Last-Stream: %v", i, m.Header)
			}
			if gap := rawAt[i].Sub(last); gap > hb+2*time.Second {
				t.Errorf("heartbeat %d came %v after the previous event, want about %v", i, gap, hb)
			}
			last = rawAt[i]
		}
		wantStatus(t, raw[len(raw)-1], "408", "")
	})
}

// Item 28: Consume survives repeated expiries and sees live publishes
// within milliseconds.
func TestJS28ConsumeLive(t *testing.T) {
	const rounds, maxLatency = 3, 500 * time.Millisecond
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		c := setupConsumer(t, js, nil)
		got := newCollector()
		var errMu sync.Mutex
		var errs []error
		cc, err := c.Consume(func(m jetstream.Msg) {
			_ = m.Ack()
			got.add(m)
		}, jetstream.PullExpiry(shortWait), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		ctx := testCtx(t)
		for i := range rounds {
			// Idle time is the point: each 1 s pull expires (408) with
			// nothing to deliver before the next publish.
			time.Sleep(shortWait + shortWait/2)
			sent := time.Now()
			if _, err := js.Publish(ctx, "ord.live", []byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
			got.wait(t, i+1, 10*time.Second)
			got.mu.Lock()
			lat := got.at[i].Sub(sent)
			got.mu.Unlock()
			if lat > maxLatency {
				t.Errorf("round %d: delivered %v after the publish, want within %v", i, lat, maxLatency)
			}
			t.Logf("%s round %d: publish → handler %v", tg.Name, i, lat.Round(time.Microsecond))
		}
		errMu.Lock()
		defer errMu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("Consume reported errors: %v", errs)
		}
	})
}

// Item 29: an unacked message comes back after ack_wait with delivered=2
// and a new dseq; +WPI postpones it.
func TestJS29AckWaitRedelivery(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		c := setupConsumer(t, js, func(cfg *jetstream.ConsumerConfig) { cfg.AckWait = shortWait })
		publishN(t, js, "ord.a", 1, 1)
		first := fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		delivered := time.Now()
		if len(first) != 1 {
			t.Fatalf("got %d messages", len(first))
		}
		again := fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		if len(again) != 1 {
			t.Fatalf("no redelivery within 5 s of a 1 s ack_wait")
		}
		if d := time.Since(delivered); d < shortWait*9/10 {
			t.Fatalf("redelivered %v after delivery, before ack_wait %v", d, shortWait)
		}
		md := meta(t, again[0])
		if md.Sequence.Stream != 1 || md.NumDelivered != 2 || md.Sequence.Consumer != 2 {
			t.Fatalf("redelivery metadata %+v: want sseq 1, delivered 2, dseq 2", md)
		}
		if err := again[0].DoubleAck(testCtx(t)); err != nil {
			t.Fatal(err)
		}

		// +WPI: two progress reports 0.7 s apart keep a 1 s ack_wait from
		// expiring for 1.4 s; the redelivery comes ack_wait after the last.
		publishN(t, js, "ord.a", 1, 2)
		m := fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		if len(m) != 1 {
			t.Fatalf("got %d messages", len(m))
		}
		var lastWPI time.Time
		for range 2 {
			time.Sleep(shortWait * 7 / 10) // the spacing of the progress reports is the behaviour under test
			lastWPI = time.Now()
			if err := m[0].InProgress(); err != nil {
				t.Fatal(err)
			}
		}
		again = fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		if len(again) != 1 {
			t.Fatalf("no redelivery after +WPI")
		}
		if d := time.Since(lastWPI); d < shortWait*9/10 {
			t.Fatalf("redelivered %v after the last +WPI, before ack_wait %v: +WPI did not postpone it", d, shortWait)
		}
		if md := meta(t, again[0]); md.Sequence.Stream != 2 || md.NumDelivered != 2 || md.Sequence.Consumer != 4 {
			t.Fatalf("redelivery metadata %+v: want sseq 2, delivered 2, dseq 4", md)
		}
	})
}

// Item 30: Nak redelivers at once; NakWithDelay(d) no sooner than d.
func TestJS30Nak(t *testing.T) {
	const delay = 1500 * time.Millisecond
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		c := setupConsumer(t, js, nil) // ack_wait 30 s: only a NAK redelivers within the test
		publishN(t, js, "ord.a", 1, 1)
		m := fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		if err := m[0].Nak(); err != nil {
			t.Fatal(err)
		}
		m = fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		if len(m) != 1 {
			t.Fatalf("no redelivery within 5 s of a NAK")
		}
		if md := meta(t, m[0]); md.NumDelivered != 2 || md.Sequence.Consumer != 2 {
			t.Fatalf("after NAK: %+v", md)
		}
		naked := time.Now()
		if err := m[0].NakWithDelay(delay); err != nil {
			t.Fatal(err)
		}
		m = fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		if len(m) != 1 {
			t.Fatalf("no redelivery within 5 s of a NAK with delay %v", delay)
		}
		if d := time.Since(naked); d < delay {
			t.Fatalf("redelivered %v after NakWithDelay(%v)", d, delay)
		}
		if md := meta(t, m[0]); md.NumDelivered != 3 || md.Sequence.Consumer != 3 {
			t.Fatalf("after delayed NAK: %+v", md)
		}
	})
}

// Item 31: a Term'ed message is never redelivered; after max_deliver
// deliveries a message stops.
func TestJS31TermMaxDeliver(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		c := setupConsumer(t, js, func(cfg *jetstream.ConsumerConfig) {
			cfg.AckWait, cfg.MaxDeliver = shortWait, 2
		})
		publishN(t, js, "ord.a", 1, 1)
		m := fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
		if err := m[0].Term(); err != nil {
			t.Fatal(err)
		}
		// 2.5 ack_waits with a pull waiting: nothing may come.
		if m := fetch(t, c, 1, jetstream.FetchMaxWait(shortWait*5/2)); len(m) != 0 {
			t.Fatalf("a terminated message came back: %+v", meta(t, m[0]))
		}

		publishN(t, js, "ord.a", 1, 2)
		for want := uint64(1); want <= 2; want++ {
			m := fetch(t, c, 1, jetstream.FetchMaxWait(5*time.Second))
			if len(m) != 1 {
				t.Fatalf("delivery %d: nothing within 5 s", want)
			}
			if md := meta(t, m[0]); md.Sequence.Stream != 2 || md.NumDelivered != want {
				t.Fatalf("delivery %d: %+v", want, md)
			}
		}
		if m := fetch(t, c, 1, jetstream.FetchMaxWait(shortWait*5/2)); len(m) != 0 {
			t.Fatalf("delivered again after max_deliver 2: %+v", meta(t, m[0]))
		}
	})
}

// Item 32: AckSync gets an empty reply; a second ack is harmless.
func TestJS32AckSync(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		c := setupConsumer(t, js, func(cfg *jetstream.ConsumerConfig) { cfg.AckWait = shortWait })
		publishN(t, js, "ord.a", 2, 1)
		msgs := fetch(t, c, 2, jetstream.FetchMaxWait(5*time.Second))
		if len(msgs) != 2 {
			t.Fatalf("got %d messages", len(msgs))
		}
		ctx := testCtx(t)
		if err := msgs[0].DoubleAck(ctx); err != nil {
			t.Fatalf("DoubleAck: %v", err)
		}
		// The same ack as a raw request shows the empty reply; sent twice,
		// the second is answered too and changes nothing.
		for i := range 2 {
			r, err := nc.Request(msgs[1].Reply(), []byte("+ACK"), 5*time.Second)
			if err != nil {
				t.Fatalf("ack request %d: %v", i, err)
			}
			if len(r.Data) != 0 || status(r) != "" {
				t.Fatalf("ack request %d: reply %q %v, want an empty message", i, r.Data, r.Header)
			}
		}
		if err := msgs[0].DoubleAck(ctx); !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			t.Fatalf("second DoubleAck through the client: %v, want ErrMsgAlreadyAckd", err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 0 || info.AckFloor.Stream != 2 || info.NumRedelivered != 0 {
			t.Fatalf("after acking both: ack_pending %d ack_floor %+v redelivered %d",
				info.NumAckPending, info.AckFloor, info.NumRedelivered)
		}
		// Past ack_wait with a pull waiting: nothing is redelivered.
		if m := fetch(t, c, 1, jetstream.FetchMaxWait(shortWait*3/2)); len(m) != 0 {
			t.Fatalf("an acked message came back: %+v", meta(t, m[0]))
		}
	})
}

// Item 33: AckAll on sseq N clears everything ≤ N (ack_floor N,
// num_ack_pending 0).
func TestJS33AckAll(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		createStream(t, js, ordersConfig())
		publishN(t, js, "ord.a", 5, 1)
		c := addConsumer(t, js, func(cfg *jetstream.ConsumerConfig) {
			cfg.AckPolicy, cfg.AckWait = jetstream.AckAllPolicy, shortWait
		})
		msgs := fetch(t, c, 3, jetstream.FetchMaxWait(5*time.Second))
		if s := seqs(t, msgs); !slices.Equal(s, []uint64{1, 2, 3}) {
			t.Fatalf("seqs %v", s)
		}
		ctx := testCtx(t)
		if err := msgs[2].DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.AckFloor.Stream != 3 || info.AckFloor.Consumer != 3 || info.NumAckPending != 0 || info.NumPending != 2 {
			t.Fatalf("after AckAll on 3: ack_floor %+v ack_pending %d pending %d", info.AckFloor, info.NumAckPending, info.NumPending)
		}
		// Past ack_wait of 1…3, only the two undelivered ones come (each is
		// acked on arrival, so neither comes back either).
		b, err := c.Fetch(5, jetstream.FetchMaxWait(shortWait*3/2))
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for m := range b.Messages() {
			got = append(got, meta(t, m).Sequence.Stream)
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Error(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []uint64{4, 5}) {
			t.Fatalf("after AckAll on 3, fetched seqs %v, want [4 5]", got)
		}
	})
}

// Item 34: max_ack_pending=1 holds back a second message until the first
// is acked or times out.
func TestJS34MaxAckPending(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		c := setupConsumer(t, js, func(cfg *jetstream.ConsumerConfig) { cfg.MaxAckPending, cfg.AckWait = 1, shortWait })
		publishN(t, js, "ord.a", 2, 1)
		msgs := fetch(t, c, 2, jetstream.FetchMaxWait(shortWait/2))
		if s := seqs(t, msgs); !slices.Equal(s, []uint64{1}) {
			t.Fatalf("with max_ack_pending 1, fetched seqs %v, want [1]", s)
		}
		// When the first times out it is redelivered (redeliveries go
		// first) and takes the slot again: the second is still held back.
		// The spec's "until the first is acked or times out" reads as if a
		// timeout let the second through; on the reference it does not.
		msgs = fetch(t, c, 1, jetstream.FetchMaxWait(3*shortWait))
		if len(msgs) != 1 {
			t.Fatalf("nothing within 3 s of a 1 s ack_wait")
		}
		if md := meta(t, msgs[0]); md.Sequence.Stream != 1 || md.NumDelivered != 2 {
			t.Fatalf("after ack_wait: %+v, want seq 1 redelivered", md)
		}
		if err := msgs[0].DoubleAck(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		msgs = fetch(t, c, 2, jetstream.FetchMaxWait(shortWait/2))
		if s := seqs(t, msgs); !slices.Equal(s, []uint64{2}) {
			t.Fatalf("after the ack, fetched seqs %v, want [2]", s)
		}
	})
}

// Item 35: FetchBytes below the next message's size gets a 409 MaxBytes:
// an empty batch with no error.
func TestJS35FetchBytesMaxBytes(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		c := setupConsumer(t, js, nil)
		if _, err := js.Publish(testCtx(t), "ord.a", make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		b, err := c.FetchBytes(50, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if msgs := drain(t, b); len(msgs) != 0 {
			t.Fatalf("FetchBytes(50) with a 100-byte message: %d messages", len(msgs))
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("FetchBytes(50) ended after %v: no 409, the batch waited for its expiry", d)
		}
		got := rawPull(t, nc, ordersStream, "c", `{"batch":10,"max_bytes":50,"expires":5000000000}`, 10, 5*time.Second)
		if len(got) != 1 {
			t.Fatalf("raw pull: %d frames, want one 409", len(got))
		}
		wantStatus(t, got[0], "409", "Message Size Exceeds MaxBytes")
		if got[0].Header.Get("Nats-Pending-Messages") != "10" || got[0].Header.Get("Nats-Pending-Bytes") != "50" {
			t.Errorf("409 pending headers: %v", got[0].Header)
		}
		b, err = c.FetchBytes(4096, jetstream.FetchMaxWait(shortWait))
		if err != nil {
			t.Fatal(err)
		}
		if msgs := drain(t, b); len(msgs) != 1 {
			t.Fatalf("FetchBytes(4096): %d messages, want 1", len(msgs))
		}
	})
}

// Item 36: several clients on one durable get disjoint messages (apart
// from redeliveries).
func TestJS36SharedDurable(t *testing.T) {
	const n, clients = 300, 3
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		setupConsumer(t, js, nil)
		publishN(t, js, "ord.a", n, 1)
		var mu sync.Mutex
		owner := map[uint64]int{} // sseq → client, first deliveries only
		perClient := make([]int, clients)
		var wg sync.WaitGroup
		for i := range clients {
			_, cjs := connectJS(t, tg)
			c, err := cjs.Consumer(testCtx(t), ordersStream, "c")
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					mu.Lock()
					done := len(owner) == n
					mu.Unlock()
					if done {
						return
					}
					b, err := c.Fetch(10, jetstream.FetchMaxWait(shortWait))
					if err != nil {
						t.Error(err)
						return
					}
					for m := range b.Messages() {
						md, err := m.Metadata()
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if prev, dup := owner[md.Sequence.Stream]; dup && md.NumDelivered == 1 {
							t.Errorf("seq %d delivered first-time to clients %d and %d", md.Sequence.Stream, prev, i)
						}
						if md.NumDelivered == 1 {
							owner[md.Sequence.Stream] = i
							perClient[i]++
						}
						mu.Unlock()
						if err := m.Ack(); err != nil {
							t.Error(err)
						}
					}
					if err := b.Error(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if len(owner) != n {
			t.Fatalf("%d of %d messages delivered", len(owner), n)
		}
		t.Logf("%s: messages per client %v", tg.Name, perClient)
	})
}

// Item 37: the ordered consumer works: ephemeral, ack none, mem_storage,
// and dseq without gaps.
func TestJS37OrderedConsumer(t *testing.T) {
	const n = 50
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		ctx := testCtx(t)
		createStream(t, js, ordersConfig())
		publishN(t, js, "ord.a", n, 1)
		oc, err := js.OrderedConsumer(ctx, ordersStream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		got := newCollector()
		cc, err := oc.Consume(got.add)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		msgs := got.wait(t, n, 30*time.Second)
		for i, m := range msgs[:n] {
			md := meta(t, m)
			if want := uint64(i + 1); md.Sequence.Stream != want || md.Sequence.Consumer != want || md.NumDelivered != 1 {
				t.Fatalf("message %d: %+v, want sseq = dseq = %d", i, md, want)
			}
		}
		info, err := oc.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := info.Config
		if cfg.Durable != "" || cfg.AckPolicy != jetstream.AckNonePolicy || !cfg.MemoryStorage || info.Name == "" {
			t.Fatalf("ordered consumer %q config: durable %q ack %v mem_storage %v", info.Name, cfg.Durable, cfg.AckPolicy, cfg.MemoryStorage)
		}
		// Live messages keep the sequence.
		publishN(t, js, "ord.a", 5, n+1)
		msgs = got.wait(t, n+5, 10*time.Second)
		for i, m := range msgs[n:] {
			if md := meta(t, m); md.Sequence.Consumer != uint64(n+i+1) {
				t.Fatalf("live message %d: dseq %d", i, md.Sequence.Consumer)
			}
		}
	})
}

// Item 38: ConsumerInfo counters match what the client saw, and the cursor
// survives a restart.
func TestJS38ConsumerInfoCounters(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		createStream(t, js, ordersConfig())
		publishN(t, js, "ord.a", 5, 1)
		c := addConsumer(t, js, nil)
		ctx := testCtx(t)
		msgs := fetch(t, c, 3, jetstream.FetchMaxWait(5*time.Second))
		if len(msgs) != 3 {
			t.Fatalf("got %d messages", len(msgs))
		}
		if err := msgs[0].DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		check := func(when string, info *jetstream.ConsumerInfo, delivered, ackFloor uint64, ackPending, pending int) {
			t.Helper()
			if info.Delivered.Stream != delivered || info.Delivered.Consumer != delivered ||
				info.AckFloor.Stream != ackFloor || info.AckFloor.Consumer != ackFloor ||
				info.NumAckPending != ackPending || info.NumPending != uint64(pending) ||
				info.NumRedelivered != 0 || info.NumWaiting != 0 {
				t.Fatalf("%s: delivered %+v ack_floor %+v ack_pending %d pending %d redelivered %d waiting %d;\n"+
					"want delivered %d, ack_floor %d, ack_pending %d, pending %d, redelivered 0, waiting 0",
					when, info.Delivered, info.AckFloor, info.NumAckPending, info.NumPending, info.NumRedelivered,
					info.NumWaiting, delivered, ackFloor, ackPending, pending)
			}
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check("3 delivered, 1 acked", info, 3, 1, 2, 2)
		for _, m := range msgs[1:] {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if info, err = c.Info(ctx); err != nil {
			t.Fatal(err)
		}
		check("3 delivered, 3 acked", info, 3, 3, 0, 2)
		nc.Close()

		tg.Restart(t)
		_, js = connectJS(t, tg)
		ctx = testCtx(t)
		var c2 jetstream.Consumer
		// The consumer is back once the server has recovered it.
		testutil.Eventually(t, "the consumer after restart", 10*time.Second, func() bool {
			c2, err = js.Consumer(ctx, ordersStream, "c")
			return err == nil
		})
		check("after restart", c2.CachedInfo(), 3, 3, 0, 2)
		msgs = fetch(t, c2, 5, jetstream.FetchMaxWait(shortWait))
		if s := seqs(t, msgs); !slices.Equal(s, []uint64{4, 5}) {
			t.Fatalf("after restart, fetched seqs %v, want [4 5]", s)
		}
		for i, m := range msgs {
			if md := meta(t, m); md.Sequence.Consumer != uint64(4+i) || md.NumDelivered != 1 {
				t.Fatalf("after restart, message %d: %+v", i, md)
			}
		}
	})
}
