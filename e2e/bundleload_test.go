package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// timedAck is one acknowledged publish: when its successful attempt was
// sent and when its PubAck came back.
type timedAck struct{ sent, got time.Time }

// topicRun is what the clients of one demo/bun topic saw over a run.
type topicRun struct {
	topic, stream, subject string

	mu sync.Mutex
	// acked maps each message id to the sequence its PubAck named.
	acked map[string]uint64
	// published is the number of "m-<i>" messages acknowledged (ids
	// m-0 … m-<published-1>); done is closed once the publisher stops.
	published int
	done      chan struct{}
	acks      []timedAck
	pubErrs   map[string]int // failed attempts by error, all retried
	apiErrs   []string       // PubAcks carrying a JetStream API error
	// persisted holds the sequences whose AckSync returned: they must
	// never be delivered again; redelivered lists those that were.
	persisted   map[uint64]bool
	consumed    map[string]int // deliveries per message id
	redelivered []uint64
	consErrs    map[string]int
}

func newTopicRuns() []*topicRun {
	var out []*topicRun
	for _, tp := range bunTopicNames() {
		out = append(out, &topicRun{topic: tp, stream: bunNamespace + ":" + tp, subject: "demo." + bunNamespace + "." + tp,
			acked: map[string]uint64{}, done: make(chan struct{}), pubErrs: map[string]int{},
			persisted: map[uint64]bool{}, consumed: map[string]int{}, consErrs: map[string]int{}})
	}
	return out
}

// workload runs the sequential publishers and durable consumers of the
// twenty topics, and stops them at cleanup.
type workload struct {
	t    *testing.T
	runs []*topicRun
	// event is when the last fault was injected (unix nanoseconds, 0 =
	// none yet): publishers go on past their count until a publish sent
	// after it was acknowledged, so every topic is seen served again.
	event    atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
	deadline time.Time
}

func newWorkload(t *testing.T, deadline time.Duration) *workload {
	w := &workload{t: t, runs: newTopicRuns(), stop: make(chan struct{}), deadline: time.Now().Add(deadline)}
	t.Cleanup(func() { close(w.stop); w.wg.Wait() })
	return w
}

func (w *workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// errorf reports a failure unless the workload is being torn down.
func (w *workload) errorf(format string, args ...any) {
	if !w.stopped() {
		w.t.Errorf(format, args...)
	}
}

func (w *workload) mark(at time.Time) { w.event.Store(at.UnixNano()) }

// servedSince reports when a publish sent after at was first
// acknowledged.
func (r *topicRun) servedSince(at time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.acks {
		if a.sent.After(at) {
			return a.got, true
		}
	}
	return time.Time{}, false
}

// allServedSince reports whether every topic acknowledged a publish sent
// after at, and when the last of them first did.
func (w *workload) allServedSince(at time.Time) (time.Duration, bool) {
	var last time.Time
	for _, r := range w.runs {
		got, ok := r.servedSince(at)
		if !ok {
			return 0, false
		}
		if got.After(last) {
			last = got
		}
	}
	return last.Sub(at), true
}

// longestStall is the longest time a topic's publisher waited between
// two acknowledgements received after at (the first gap spans at), and
// that topic.
func (w *workload) longestStall(at time.Time) (time.Duration, string) {
	var worst time.Duration
	var which string
	for _, r := range w.runs {
		r.mu.Lock()
		for i := 1; i < len(r.acks); i++ {
			if r.acks[i].got.Before(at) {
				continue
			}
			if gap := r.acks[i].got.Sub(r.acks[i-1].got); gap > worst {
				worst, which = gap, r.topic
			}
		}
		r.mu.Unlock()
	}
	return worst, which
}

func (w *workload) minPublished() int {
	n := -1
	for _, r := range w.runs {
		r.mu.Lock()
		if n < 0 || r.published < n {
			n = r.published
		}
		r.mu.Unlock()
	}
	return n
}

// publish starts one sequential publisher per topic through js: messages
// m-0, m-1, … each with Nats-Msg-Id and retried (2 s per attempt) until
// acknowledged, so a message is sent only once the previous one is
// stored; each publishes at least n, and goes on until it was served
// after the last event.
func (w *workload) publish(js jetstream.JetStream, n int) {
	for _, r := range w.runs {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer close(r.done)
			for i := 0; ; i++ {
				if i >= n {
					ev := w.event.Load()
					if ev != 0 {
						if _, ok := r.servedSince(time.Unix(0, ev)); ok {
							return
						}
					}
				}
				if !w.publishOne(js, r, fmt.Sprintf("m-%d", i), body(i)) {
					return
				}
				r.mu.Lock()
				r.published = i + 1
				r.mu.Unlock()
			}
		}()
	}
}

// publishOne publishes one message to r with id, retrying until it is
// acknowledged; false when the run stops or its deadline passes first.
func (w *workload) publishOne(js jetstream.JetStream, r *topicRun, id string, data []byte) bool {
	for {
		if w.stopped() {
			return false
		}
		if time.Now().After(w.deadline) {
			w.errorf("%s: message %s not acknowledged before the deadline", r.topic, id)
			return false
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ack, err := js.Publish(ctx, r.subject, data, jetstream.WithMsgID(id))
		cancel()
		if err != nil {
			var apiErr *jetstream.APIError
			r.mu.Lock()
			r.pubErrs[errKind(err)]++
			if errors.As(err, &apiErr) {
				r.apiErrs = append(r.apiErrs, fmt.Sprintf("%s: %v", id, err))
			}
			r.mu.Unlock()
			time.Sleep(50 * time.Millisecond) // pacing between retries, not synchronisation
			continue
		}
		w.recordAck(r, id, ack.Stream, ack.Sequence)
		r.mu.Lock()
		r.acks = append(r.acks, timedAck{sent: sent, got: time.Now()})
		r.mu.Unlock()
		return true
	}
}

// recordAck notes that message id of r was acknowledged at seq.
func (w *workload) recordAck(r *topicRun, id, stream string, seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if stream != r.stream {
		w.errorf("%s: message %s acknowledged for stream %q", r.topic, id, stream)
	}
	if prev, ok := r.acked[id]; ok && prev != seq {
		w.errorf("%s: message %s acknowledged as seq %d and as seq %d", r.topic, id, prev, seq)
	}
	r.acked[id] = seq
}

// errKind names an error for the retry tallies.
func errKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "timeout"
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return "no responders"
	case errors.Is(err, jetstream.ErrConsumerLeadershipChanged):
		return "leadership change"
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrConnectionDraining):
		return "connection"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// consume starts one consumer per topic through js: it creates durable
// pull consumer "proc" (explicit ack) and fetches until every message
// the topic's publisher got acknowledged was delivered, acking each
// message with a plain ack and every third with AckSync.
func (w *workload) consume(js jetstream.JetStream) {
	for _, r := range w.runs {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.consumeTopic(js, r)
		}()
	}
}

func (w *workload) consumeTopic(js jetstream.JetStream, r *topicRun) {
	var cons jetstream.Consumer
	k := 0
	for {
		if w.stopped() || time.Now().After(w.deadline) {
			return
		}
		select {
		case <-r.done:
			r.mu.Lock()
			all := len(r.consumed) >= len(r.acked)
			r.mu.Unlock()
			if all {
				return
			}
		default:
		}
		if cons == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := js.CreateOrUpdateConsumer(ctx, r.stream, jetstream.ConsumerConfig{
				Durable: "proc", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second,
			})
			cancel()
			if err != nil { // the stream is not created yet, or its owner moves
				r.mu.Lock()
				r.consErrs["create: "+errKind(err)]++
				r.mu.Unlock()
				time.Sleep(100 * time.Millisecond) // pacing, not synchronisation
				continue
			}
			cons = c
		}
		batch, err := cons.Fetch(50, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			r.mu.Lock()
			r.consErrs["fetch: "+errKind(err)]++
			r.mu.Unlock()
			time.Sleep(100 * time.Millisecond) // pacing while the owner moves
			continue
		}
		for msg := range batch.Messages() {
			md, err := msg.Metadata()
			if err != nil {
				w.errorf("%s: metadata: %v", r.topic, err)
				continue
			}
			id := msg.Headers().Get(jetstream.MsgIDHeader)
			if id == "" {
				w.errorf("%s: seq %d has no message id", r.topic, md.Sequence.Stream)
				continue
			}
			r.mu.Lock()
			if r.persisted[md.Sequence.Stream] {
				r.redelivered = append(r.redelivered, md.Sequence.Stream)
			}
			r.consumed[id]++
			r.mu.Unlock()
			k++
			if k%3 != 0 {
				_ = msg.Ack()
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = msg.DoubleAck(ctx)
			cancel()
			if err == nil {
				r.mu.Lock()
				r.persisted[md.Sequence.Stream] = true
				r.mu.Unlock()
			}
		}
		if err := batch.Error(); err != nil {
			r.mu.Lock()
			r.consErrs["batch: "+errKind(err)]++
			r.mu.Unlock()
		}
	}
}

// waitDone waits for every publisher and consumer to finish (they stop
// at the run's deadline at the latest).
func (w *workload) waitDone(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(w.deadline) + 10*time.Second):
		t.Fatal("the publishers and consumers did not stop after their deadline")
	}
}

// summary logs the clients' retries and redeliveries.
func (w *workload) summary(t *testing.T) {
	t.Helper()
	pub, cons := map[string]int{}, map[string]int{}
	total, dups := 0, 0
	var apiErrs []string
	for _, r := range w.runs {
		r.mu.Lock()
		apiErrs = append(apiErrs, r.apiErrs...)
		for k, v := range r.pubErrs {
			pub[k] += v
		}
		for k, v := range r.consErrs {
			cons[k] += v
		}
		for _, n := range r.consumed {
			dups += n - 1
		}
		total += len(r.acked)
		r.mu.Unlock()
	}
	t.Logf("%d messages acknowledged over %d topics; retried publish attempts %v; consumer retries %v; %d redeliveries",
		total, len(w.runs), pub, cons, dups)
	if len(apiErrs) > 0 {
		t.Logf("%d publish attempts answered with a JetStream API error, e.g. %s", len(apiErrs), apiErrs[0])
	}
}

// checkConsumed checks that each topic's consumer got every acknowledged
// message and that no message whose AckSync had returned came again.
func (w *workload) checkConsumed(t *testing.T) {
	t.Helper()
	for _, r := range w.runs {
		r.mu.Lock()
		for id := range r.acked {
			if r.consumed[id] == 0 {
				t.Errorf("%s: message %s was acknowledged but never delivered to the consumer", r.topic, id)
				break
			}
		}
		if len(r.redelivered) > 0 {
			t.Errorf("%s: %d deliveries of messages whose AckSync had returned, e.g. seq %d", r.topic, len(r.redelivered), r.redelivered[0])
		}
		r.mu.Unlock()
	}
}

// readStream reads topic r's stream from seq 1 through ordered consumers
// and checks it: the stream state holds want messages at seqs 1..want,
// every seq is there once (no gap), every message id once, each payload
// as published, and every PubAck any client got names the seq its
// message is stored at. It returns the message ids in seq order.
func readStream(t *testing.T, js jetstream.JetStream, r *topicRun, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var st jetstream.Stream
	var info *jetstream.StreamInfo
	for try := 0; ; try++ { // the bundle may just be moving
		var err error
		if st, err = js.Stream(ctx, r.stream); err == nil {
			if info, err = st.Info(ctx); err == nil {
				break
			}
		}
		if try == 20 {
			t.Fatalf("%s: stream info: %v", r.topic, err)
		}
		time.Sleep(250 * time.Millisecond) // pacing between retries
	}
	if s := info.State; s.Msgs != uint64(want) || s.FirstSeq != 1 || s.LastSeq != uint64(want) {
		t.Errorf("%s: stream holds %d messages at seqs %d..%d; want %d at 1..%d", r.topic, s.Msgs, s.FirstSeq, s.LastSeq, want, want)
	}
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("%s: ordered consumer: %v", r.topic, err)
	}
	ids := make([]string, 0, want)
	at := map[string]uint64{}
	for empty, errs := 0, 0; len(ids) < want; {
		got := 0
		batch, err := oc.Fetch(min(want-len(ids), 500), jetstream.FetchMaxWait(5*time.Second))
		if err == nil {
			for msg := range batch.Messages() {
				got++
				md, _ := msg.Metadata()
				seq := md.Sequence.Stream
				if seq != uint64(len(ids)+1) {
					t.Fatalf("%s: gap: read seq %d after seq %d", r.topic, seq, len(ids))
				}
				id := msg.Headers().Get(jetstream.MsgIDHeader)
				if prev, dup := at[id]; dup {
					t.Fatalf("%s: message %q stored twice, at seqs %d and %d", r.topic, id, prev, seq)
				}
				if !payloadMatches(id, msg.Data()) {
					t.Fatalf("%s: seq %d (message %q): payload differs", r.topic, seq, id)
				}
				at[id] = seq
				ids = append(ids, id)
			}
			err = batch.Error()
		}
		if err != nil && !errors.Is(err, nats.ErrTimeout) {
			if errs++; errs > 10 {
				t.Fatalf("%s: reading from seq %d: %v", r.topic, len(ids)+1, err)
			}
		}
		if got == 0 {
			if empty++; empty > 3 {
				t.Errorf("%s: the stream ends at seq %d; want %d messages", r.topic, len(ids), want)
				break
			}
		} else {
			empty = 0
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, seq := range r.acked {
		if at[id] != seq {
			t.Errorf("%s: message %s was acknowledged as seq %d but is stored at seq %d", r.topic, id, seq, at[id])
		}
	}
	return ids
}

// payloadMatches checks a stored payload against what was published with
// message id ("m-<i>": body(i); "f-<j>": frozenBody(j)).
func payloadMatches(id string, data []byte) bool {
	var i int
	switch {
	case strings.HasPrefix(id, "m-"):
		if _, err := fmt.Sscanf(id, "m-%d", &i); err != nil {
			return false
		}
		return string(data) == string(body(i))
	case strings.HasPrefix(id, "f-"):
		if _, err := fmt.Sscanf(id, "f-%d", &i); err != nil {
			return false
		}
		return string(data) == string(frozenBody(i))
	}
	return false
}

func frozenBody(j int) []byte { return body(100000 + j) }

// checkSequential checks that a topic whose only publisher was the
// sequential one holds m-0 … m-<n-1> at seqs 1..n.
func checkSequential(t *testing.T, js jetstream.JetStream, r *topicRun) {
	t.Helper()
	r.mu.Lock()
	n := r.published
	r.mu.Unlock()
	ids := readStream(t, js, r, n)
	for i, id := range ids {
		if id != fmt.Sprintf("m-%d", i) {
			t.Fatalf("%s: seq %d holds %s; want m-%d (publish order)", r.topic, i+1, id, i)
		}
	}
}
