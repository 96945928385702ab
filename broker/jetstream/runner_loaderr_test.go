package jetstream

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/consumer"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/tenancy"
)

// failingSource holds messages 1..n whose Load fails with err (nil:
// succeeds).
type failingSource struct {
	n   uint64
	err error
}

func (s *failingSource) FirstSeq() uint64 { return 1 }
func (s *failingSource) LastSeq() uint64  { return s.n }
func (s *failingSource) Load(seq uint64) (consumer.Msg, error) {
	if s.err != nil {
		return consumer.Msg{}, s.err
	}
	return consumer.Msg{Seq: seq, Subject: "orders.new", Data: []byte("x")}, nil
}
func (s *failingSource) SeqAtTime(time.Time) (uint64, error) { return 1, nil }
func (s *failingSource) LastForSubject(string) uint64        { return 0 }

// TestConsumerStallOnReadsIsLogged: a consumer whose reads of the stream
// fail (no bookie of an entry's write set answers) says so at once, again
// every loadErrLogEvery while it lasts, and when it reads again — a
// newcomer's consumer stalled with only client timeouts to show for it.
func TestConsumerStallOnReadsIsLogged(t *testing.T) {
	var logs bytes.Buffer
	s := &Service{cfg: Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	tp := &topic{s: s, name: tenancy.Name{Tenant: "demo", Namespace: "streams", Topic: "ORDERS"}}
	src := &failingSource{n: 3, err: errors.New("bookies unavailable: wrong instance")}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c, err := consumer.New(jsapi.ConsumerConfig{Durable: "proc", AckPolicy: jsapi.AckExplicit, AckWait: time.Minute}, nil, t0, src, consumer.StreamName("ORDERS"))
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{t: tp, name: "proc", c: c}
	_, gen, _ := c.Snapshot() // the driver persists the reserve first
	c.Persisted(gen)
	c.Pull(t0, "inbox", jsapi.PullRequest{Batch: 1, Expires: time.Minute})
	if c.LoadErr() == nil {
		t.Fatal("the pull did not meet the failing read")
	}
	count := func(s string) int { return strings.Count(logs.String(), s) }
	if d := r.loadRetryIn(t0); d != loadRetry {
		t.Fatalf("first retry in %v, want %v", d, loadRetry)
	}
	r.noteLoadErr(t0)
	r.noteLoadErr(t0.Add(time.Second)) // within loadErrLogEvery: quiet
	for _, c := range []struct{ after, want time.Duration }{{time.Second, 100 * time.Millisecond}, {time.Hour, loadRetryMax}} {
		if d := r.loadRetryIn(t0.Add(c.after)); d != c.want {
			t.Fatalf("retry after %v of failing reads in %v, want %v", c.after, d, c.want)
		}
	}
	if n := count("consumer stalled"); n != 1 || !strings.Contains(logs.String(), "wrong instance") || !strings.Contains(logs.String(), "demo/streams/ORDERS") {
		t.Fatalf("%d stall lines, want 1 naming the topic and the error:\n%s", n, logs.String())
	}
	r.noteLoadErr(t0.Add(loadErrLogEvery + time.Second))
	if n := count("consumer stalled"); n != 2 || !strings.Contains(logs.String(), "stalled_for=31s") {
		t.Fatalf("%d stall lines after %v, want 2 with how long:\n%s", n, loadErrLogEvery, logs.String())
	}
	// The pull expires: a round with no pull waiting reads nothing, so
	// LoadErr is nil, yet nothing shows the reads work again.
	c.Dispatch(t0.Add(2 * time.Minute))
	if c.LoadErr() != nil {
		t.Fatalf("LoadErr after a round that read nothing: %v", c.LoadErr())
	}
	r.noteLoadErr(t0.Add(2 * time.Minute))
	if n := count("reads its stream again"); n != 0 {
		t.Fatalf("recovery logged after a round that read nothing:\n%s", logs.String())
	}
	if d := r.loadRetryIn(t0.Add(2 * time.Minute)); d != loadRetryMax {
		t.Fatalf("retry back-off reset to %v by a round that read nothing", d)
	}
	src.err = nil
	now := t0.Add(3 * time.Minute)
	for _, o := range c.Pull(now, "inbox", jsapi.PullRequest{Batch: 1, Expires: time.Minute}) {
		if o.Kind == consumer.Deliver {
			r.delivered = max(r.delivered, o.Ack.StreamSeq) // as emit does
		}
	}
	if c.LoadErr() != nil || r.delivered != 1 {
		t.Fatalf("after the reads came back: LoadErr %v, delivered %d", c.LoadErr(), r.delivered)
	}
	r.noteLoadErr(now)
	r.noteLoadErr(now.Add(time.Second))
	if n := count("consumer reads its stream again"); n != 1 || count("consumer stalled") != 2 {
		t.Fatalf("recovery logged %d times (want 1):\n%s", n, logs.String())
	}
}
