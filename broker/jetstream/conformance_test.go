package jetstream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream conformance, shared/specs/nats-wire.md §5 items 15–38, with
// nats.go's jetstream package used as an application would. Each test
// runs on every target (forEachTarget); item N is TestJS<N>…. Where a
// status or header is not visible through the client API, the test also
// sends the same request with core nats.go (rawPull) and checks the wire.
// Items 24–38 are in conformance_consume_test.go.

const (
	ordersStream = "ORDERS"
	shortWait    = time.Second // ack_wait and fetch waits of the timing items
)

// ordersConfig is the stream most tests use: subjects ord.>, file storage.
func ordersConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: ordersStream, Subjects: []string{"ord.>"}, Storage: jetstream.FileStorage}
}

// wantAPIError fails unless err carries a JetStream API error with code.
func wantAPIError(t *testing.T, err error, code jetstream.ErrorCode) {
	t.Helper()
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("got %v, want an API error with err_code %d", err, code)
	}
	if apiErr.ErrorCode != code {
		t.Fatalf("got err_code %d (%v), want %d", apiErr.ErrorCode, err, code)
	}
}

// rawAPI sends body to $JS.API.<op> with core nats.go (for requests
// nats.go never makes) and returns the reply's API error, nil if none.
func rawAPI(t *testing.T, nc *nats.Conn, op, body string) *jetstream.APIError {
	t.Helper()
	m, err := nc.Request("$JS.API."+op, []byte(body), 5*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", op, err)
	}
	var resp struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil || resp.Type == "" {
		t.Fatalf("%s: reply %q is not a JetStream API response (%v)", op, m.Data, err)
	}
	return resp.Error
}

// Item 15: js.AccountInfo decodes; with JetStream off it is
// ErrJetStreamNotEnabled.
func TestJS15AccountInfo(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		forEachTarget(t, func(t *testing.T, tg *target) {
			_, js := connectJS(t, tg)
			ctx := testCtx(t)
			info, err := js.AccountInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Streams != 0 || info.Consumers != 0 {
				t.Fatalf("fresh account: %d streams, %d consumers", info.Streams, info.Consumers)
			}
			lim := info.Limits
			for name, v := range map[string]int64{"max_memory": lim.MaxMemory, "max_storage": lim.MaxStore,
				"max_streams": int64(lim.MaxStreams), "max_consumers": int64(lim.MaxConsumers)} {
				if v == 0 || v < -1 {
					t.Errorf("limits.%s = %d: want -1 (unlimited) or a positive limit", name, v)
				}
			}
			createStream(t, js, ordersConfig())
			createConsumer(t, js, ordersStream, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
			if info, err = js.AccountInfo(ctx); err != nil {
				t.Fatal(err)
			}
			if info.Streams != 1 || info.Consumers != 1 {
				t.Fatalf("after one stream and one consumer: %d streams, %d consumers", info.Streams, info.Consumers)
			}
			if info.API.Total == 0 {
				t.Errorf("api.total = 0 after several API calls")
			}
		})
	})
	t.Run("off", func(t *testing.T) {
		forEachTarget(t, func(t *testing.T, tg *target) {
			_, js := connectJS(t, tg)
			_, err := js.AccountInfo(testCtx(t))
			if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
				t.Fatalf("AccountInfo with JetStream off: %v, want ErrJetStreamNotEnabled", err)
			}
		}, withoutJetStream())
	})
}

// Item 16: a missing stream is ErrStreamNotFound (10059).
func TestJS16StreamNotFound(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		_, err := js.Stream(testCtx(t), "NOPE")
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("js.Stream(NOPE): %v, want ErrStreamNotFound", err)
		}
		wantAPIError(t, err, jetstream.JSErrCodeStreamNotFound)
	})
}

// Item 17: CreateOrUpdateStream (UPDATE gets 10059, then CREATE), repeated;
// a different CREATE gets 10058, overlapping subjects 10065.
func TestJS17CreateOrUpdateStream(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		ctx := testCtx(t)
		cfg := ordersConfig()
		// The UPDATE that CreateOrUpdateStream sends first must get 10059.
		_, err := js.UpdateStream(ctx, cfg)
		wantAPIError(t, err, jetstream.JSErrCodeStreamNotFound)
		s, err := js.CreateOrUpdateStream(ctx, cfg)
		if err != nil {
			t.Fatalf("CreateOrUpdateStream on a missing stream: %v", err)
		}
		if got := s.CachedInfo().Config; got.Name != ordersStream || !slices.Equal(got.Subjects, cfg.Subjects) {
			t.Fatalf("created config %+v", got)
		}
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			t.Fatalf("CreateOrUpdateStream again: %v", err)
		}
		// CREATE with the same config is idempotent (nats bench --create).
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("CreateStream with the same config: %v", err)
		}
		diff := cfg
		diff.MaxMsgs = 10
		_, err = js.CreateStream(ctx, diff)
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			t.Fatalf("CreateStream with another config: %v, want ErrStreamNameAlreadyInUse", err)
		}
		wantAPIError(t, err, jetstream.JSErrCodeStreamNameInUse)
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"ord.a"}})
		wantAPIError(t, err, 10065)
		// The update path really updates.
		diff.MaxMsgs = 100
		s, err = js.CreateOrUpdateStream(ctx, diff)
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().Config.MaxMsgs != 100 {
			t.Fatalf("max_msgs after update: %d", s.CachedInfo().Config.MaxMsgs)
		}
		// Errors nats.go cannot produce, sent as raw requests.
		e := rawAPI(t, nc, "STREAM.CREATE.X", `{"name":"Y","subjects":["y"]}`)
		if e == nil || e.ErrorCode != 10056 {
			t.Errorf("name mismatch: %+v, want 10056", e)
		}
		e = rawAPI(t, nc, "STREAM.CREATE.Z", `{"name":`)
		if e == nil || e.ErrorCode != 10025 {
			t.Errorf("bad JSON: %+v, want 10025", e)
		}
	})
}

// Item 18: js.Publish gives seq 1, 2, 3… with no gaps across a restart
// (and, for Strata, across ledger rollover and ownership moves: the
// target's configuration makes ledgers small).
func TestJS18PublishSeqNoGaps(t *testing.T) {
	const perPhase = 300
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		createStream(t, js, ordersConfig())
		publishN(t, js, "ord.a", perPhase, 1)
		nc.Close()

		start := time.Now()
		tg.Restart(t)
		t.Logf("%s restarted in %v", tg.Name, time.Since(start).Round(time.Millisecond))

		_, js = connectJS(t, tg)
		ctx := testCtx(t)
		s, err := js.Stream(ctx, ordersStream)
		if err != nil {
			t.Fatal(err)
		}
		if st := s.CachedInfo().State; st.Msgs != perPhase || st.LastSeq != perPhase || st.FirstSeq != 1 {
			t.Fatalf("after restart: state %+v, want %d messages, seqs 1…%d", st, perPhase, perPhase)
		}
		publishN(t, js, "ord.b", perPhase, perPhase+1)

		// Every sequence is there, in order, once.
		c := createConsumer(t, js, ordersStream, jetstream.ConsumerConfig{Durable: "check", AckPolicy: jetstream.AckNonePolicy})
		var next uint64 = 1
		for next <= 2*perPhase {
			batch, err := c.Fetch(100, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				md := meta(t, m)
				if md.Sequence.Stream != next {
					t.Fatalf("read seq %d, want %d", md.Sequence.Stream, next)
				}
				next++
				n++
			}
			if err := batch.Error(); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatalf("fetch returned nothing at seq %d", next)
			}
		}
	})
}

// Item 19: a Nats-Msg-Id repeat gets the original seq with duplicate:true
// and stores nothing.
func TestJS19MsgIDDedup(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		ctx := testCtx(t)
		s := createStream(t, js, ordersConfig())
		pub := func(id string, wantSeq uint64, wantDup bool) {
			t.Helper()
			ack, err := js.Publish(ctx, "ord.a", []byte(id), jetstream.WithMsgID(id))
			if err != nil {
				t.Fatalf("publish %s: %v", id, err)
			}
			if ack.Sequence != wantSeq || ack.Duplicate != wantDup || ack.Stream != ordersStream {
				t.Fatalf("publish %s: %+v, want seq %d duplicate %v", id, ack, wantSeq, wantDup)
			}
		}
		pub("id-1", 1, false)
		pub("id-2", 2, false)
		pub("id-1", 1, true)
		pub("id-2", 2, true)
		pub("id-3", 3, false)
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 3 || info.State.LastSeq != 3 {
			t.Fatalf("state %+v, want 3 messages", info.State)
		}
	})
}

// Item 20: expected-last-sequence, expected-stream, expected-last-msg-id
// and expected-last-subject-sequence are enforced (10071/10060/10070).
func TestJS20ExpectedHeaders(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		ctx := testCtx(t)
		s := createStream(t, js, ordersConfig())
		ok := func(subj string, wantSeq uint64, opts ...jetstream.PublishOpt) {
			t.Helper()
			ack, err := js.Publish(ctx, subj, []byte("x"), opts...)
			if err != nil {
				t.Fatalf("publish with a met expectation: %v", err)
			}
			if ack.Sequence != wantSeq {
				t.Fatalf("seq %d, want %d", ack.Sequence, wantSeq)
			}
		}
		fail := func(code jetstream.ErrorCode, opts ...jetstream.PublishOpt) {
			t.Helper()
			_, err := js.Publish(ctx, "ord.a", []byte("x"), opts...)
			wantAPIError(t, err, code)
		}
		ok("ord.a", 1, jetstream.WithMsgID("m1")) // seq 1, ord.a
		ok("ord.b", 2)                            // seq 2, ord.b
		fail(jetstream.JSErrCodeStreamWrongLastSequence, jetstream.WithExpectLastSequence(99))
		ok("ord.a", 3, jetstream.WithExpectLastSequence(2)) // seq 3, ord.a
		fail(10060, jetstream.WithExpectStream("OTHER"))
		ok("ord.b", 4, jetstream.WithExpectStream(ordersStream)) // seq 4
		ok("ord.c", 5, jetstream.WithMsgID("m5"))                // seq 5
		fail(10070, jetstream.WithExpectLastMsgID("m1"))
		ok("ord.c", 6, jetstream.WithExpectLastMsgID("m5")) // seq 6
		fail(jetstream.JSErrCodeStreamWrongLastSequence, jetstream.WithExpectLastSequencePerSubject(1))
		ok("ord.a", 7, jetstream.WithExpectLastSequencePerSubject(3)) // ord.a was at 3
		ok("ord.new", 8, jetstream.WithExpectLastSequencePerSubject(0))
		// …-Subject-Sequence-Subject checks another subject (ord.b, at 4).
		fail(jetstream.JSErrCodeStreamWrongLastSequence, jetstream.WithExpectLastSequenceForSubject(2, "ord.b"))
		ok("ord.x", 9, jetstream.WithExpectLastSequenceForSubject(4, "ord.b"))
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 9 {
			t.Fatalf("%d messages stored, want 9: a failed expectation stored something", info.State.Msgs)
		}
	})
}

// Item 21: a publish no stream captures is ErrNoStreamResponse;
// PublishAsync of 10k messages resolves every future.
func TestJS21PublishNoStreamAndAsync(t *testing.T) {
	const n = 10000
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		ctx := testCtx(t)
		createStream(t, js, ordersConfig())
		if _, err := js.Publish(ctx, "nobody.home", []byte("x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("publish to an uncaptured subject: %v, want ErrNoStreamResponse", err)
		}

		futures := make([]jetstream.PubAckFuture, 0, n)
		start := time.Now()
		for i := range n {
			f, err := js.PublishAsync("ord.async", strconv.AppendInt(nil, int64(i), 10))
			// A full window (4000 unanswered) waits 200 ms for room, then
			// fails; a loaded machine can take longer: wait, as a client would.
			for errors.Is(err, jetstream.ErrTooManyStalledMsgs) && time.Since(start) < 30*time.Second {
				f, err = js.PublishAsync("ord.async", strconv.AppendInt(nil, int64(i), 10))
			}
			if err != nil {
				t.Fatalf("PublishAsync %d: %v", i, err)
			}
			futures = append(futures, f)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(60 * time.Second):
			t.Fatalf("PublishAsyncComplete: %d acks still pending after 60 s", js.PublishAsyncPending())
		}
		t.Logf("%s: %d async publishes acked in %v", tg.Name, n, time.Since(start).Round(time.Millisecond))
		seen := make([]bool, n+1)
		for i, f := range futures {
			select {
			case ack := <-f.Ok():
				if ack.Sequence == 0 || ack.Sequence > n || seen[ack.Sequence] {
					t.Fatalf("future %d: seq %d (duplicate or out of 1…%d)", i, ack.Sequence, n)
				}
				seen[ack.Sequence] = true
			case err := <-f.Err():
				t.Fatalf("future %d: %v", i, err)
			default:
				t.Fatalf("future %d unresolved after PublishAsyncComplete", i)
			}
		}
	})
}

// Item 22: CreateOrUpdateConsumer returns name and a defaulted config; the
// filter-suffix subject is accepted; 10148, 10149 and 10131.
func TestJS22CreateOrUpdateConsumer(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		nc, js := connectJS(t, tg)
		ctx := testCtx(t)
		createStream(t, js, ordersConfig())
		// A single filter_subject: nats.go uses CONSUMER.CREATE.<s>.<c>.<filter>.
		cfg := jetstream.ConsumerConfig{Durable: "proc", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "ord.>"}
		c, err := js.CreateOrUpdateConsumer(ctx, ordersStream, cfg)
		if err != nil {
			t.Fatal(err)
		}
		info := c.CachedInfo()
		if info.Name != "proc" || info.Stream != ordersStream {
			t.Fatalf("name %q stream %q", info.Name, info.Stream)
		}
		got := info.Config
		want := jetstream.ConsumerConfig{Name: "proc", Durable: "proc", AckPolicy: jetstream.AckExplicitPolicy,
			FilterSubject: "ord.>", DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: 30 * time.Second,
			MaxDeliver: -1, MaxWaiting: 512, MaxAckPending: 1000, ReplayPolicy: jetstream.ReplayInstantPolicy}
		if got.Name != want.Name || got.Durable != want.Durable || got.AckPolicy != want.AckPolicy ||
			got.FilterSubject != want.FilterSubject || got.DeliverPolicy != want.DeliverPolicy ||
			got.AckWait != want.AckWait || got.MaxDeliver != want.MaxDeliver || got.MaxWaiting != want.MaxWaiting ||
			got.MaxAckPending != want.MaxAckPending || got.ReplayPolicy != want.ReplayPolicy {
			t.Fatalf("defaulted config:\n got %+v\nwant %+v", got, want)
		}
		// The same config again, with either action, succeeds.
		if _, err := js.CreateOrUpdateConsumer(ctx, ordersStream, cfg); err != nil {
			t.Fatalf("CreateOrUpdateConsumer again: %v", err)
		}
		if _, err := js.CreateConsumer(ctx, ordersStream, cfg); err != nil {
			t.Fatalf("CreateConsumer with the same config: %v", err)
		}
		other := cfg
		other.MaxDeliver = 5
		_, err = js.CreateConsumer(ctx, ordersStream, other)
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			t.Fatalf("CreateConsumer with another config: %v, want ErrConsumerExists", err)
		}
		wantAPIError(t, err, jetstream.JSErrCodeConsumerExists)
		_, err = js.UpdateConsumer(ctx, ordersStream, jetstream.ConsumerConfig{Durable: "ghost", AckPolicy: jetstream.AckExplicitPolicy})
		if !errors.Is(err, jetstream.ErrConsumerDoesNotExist) {
			t.Fatalf("UpdateConsumer of a missing consumer: %v, want ErrConsumerDoesNotExist", err)
		}
		wantAPIError(t, err, jetstream.JSErrCodeConsumerDoesNotExist)
		if c, err = js.UpdateConsumer(ctx, ordersStream, other); err != nil {
			t.Fatalf("UpdateConsumer: %v", err)
		} else if c.CachedInfo().Config.MaxDeliver != 5 {
			t.Fatalf("max_deliver after update: %d", c.CachedInfo().Config.MaxDeliver)
		}
		// Several filters are echoed as filter_subjects.
		multi, err := js.CreateOrUpdateConsumer(ctx, ordersStream, jetstream.ConsumerConfig{Durable: "multi",
			AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: []string{"ord.a", "ord.b"}})
		if err != nil {
			t.Fatal(err)
		}
		if fs := multi.CachedInfo().Config.FilterSubjects; !slices.Equal(fs, []string{"ord.a", "ord.b"}) {
			t.Fatalf("filter_subjects %v", fs)
		}
		// A filter suffix that does not match the config: 10131.
		e := rawAPI(t, nc, "CONSUMER.CREATE.ORDERS.c2.ord.b",
			`{"stream_name":"ORDERS","config":{"durable_name":"c2","ack_policy":"explicit","filter_subject":"ord.a"},"action":""}`)
		if e == nil || e.ErrorCode != 10131 {
			t.Fatalf("filter suffix mismatch: %+v, want 10131", e)
		}
	})
}

// Item 23: a missing consumer is ErrConsumerNotFound (10014).
func TestJS23ConsumerNotFound(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		_, js := connectJS(t, tg)
		ctx := testCtx(t)
		s := createStream(t, js, ordersConfig())
		_, err := js.Consumer(ctx, ordersStream, "nope")
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("js.Consumer(nope): %v, want ErrConsumerNotFound", err)
		}
		wantAPIError(t, err, jetstream.JSErrCodeConsumerNotFound)
		if _, err := s.Consumer(ctx, "nope"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("stream.Consumer(nope): %v", err)
		}
	})
}

// meta is m.Metadata(), failing the test on error.
func meta(t *testing.T, m jetstream.Msg) *jetstream.MsgMetadata {
	t.Helper()
	md, err := m.Metadata()
	if err != nil {
		t.Fatalf("metadata of %q (reply %q): %v", m.Subject(), m.Reply(), err)
	}
	return md
}

// fetch runs c.Fetch and returns the messages, failing on an error.
func fetch(t *testing.T, c jetstream.Consumer, n int, opts ...jetstream.FetchOpt) []jetstream.Msg {
	t.Helper()
	b, err := c.Fetch(n, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return drain(t, b)
}

func drain(t *testing.T, b jetstream.MessageBatch) []jetstream.Msg {
	t.Helper()
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	if err := b.Error(); err != nil {
		t.Fatalf("batch error after %d messages: %v", len(msgs), err)
	}
	return msgs
}

// seqs lists the stream sequences of msgs.
func seqs(t *testing.T, msgs []jetstream.Msg) []uint64 {
	t.Helper()
	var out []uint64
	for _, m := range msgs {
		out = append(out, meta(t, m).Sequence.Stream)
	}
	return out
}

// rawPull sends a pull request with core nats.go and collects what comes
// to its inbox: at most max messages (user messages and statuses), until
// a terminal status (anything but 100) or until d passes.
func rawPull(t *testing.T, nc *nats.Conn, stream, consumer, body string, max int, d time.Duration) []*nats.Msg {
	t.Helper()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	subj := fmt.Sprintf("$JS.API.CONSUMER.MSG.NEXT.%s.%s", stream, consumer)
	if err := nc.PublishRequest(subj, inbox, []byte(body)); err != nil {
		t.Fatal(err)
	}
	var out []*nats.Msg
	deadline := time.Now().Add(d)
	for len(out) < max {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		out = append(out, m)
		if s := status(m); s != "" && s != "100" {
			break
		}
	}
	return out
}

// status is the status code of a header-only status message, or "".
func status(m *nats.Msg) string {
	if len(m.Data) > 0 || m.Header == nil {
		return ""
	}
	return m.Header.Get("Status")
}

// wantStatus fails unless m is a status message with code (and, when
// set, description).
func wantStatus(t *testing.T, m *nats.Msg, code, descr string) {
	t.Helper()
	if status(m) != code || (descr != "" && m.Header.Get("Description") != descr) {
		t.Fatalf("got %q %v %q, want status %s %s", m.Subject, m.Header, m.Data, code, descr)
	}
}

// collector gathers messages a Consume callback sees, safely.
type collector struct {
	mu   sync.Mutex
	msgs []jetstream.Msg
	at   []time.Time
	ch   chan struct{}
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 1<<16)} }

func (c *collector) add(m jetstream.Msg) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	c.ch <- struct{}{}
}

// wait blocks until the collector has n messages or d passes.
func (c *collector) wait(t *testing.T, n int, d time.Duration) []jetstream.Msg {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if len(c.msgs) >= n {
			out := slices.Clone(c.msgs)
			c.mu.Unlock()
			return out
		}
		have := len(c.msgs)
		c.mu.Unlock()
		select {
		case <-c.ch:
		case <-deadline.C:
			t.Fatalf("got %d of %d messages within %v", have, n, d)
		}
	}
}
