package replicator

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

var usStream = Stream{Topic: testTopic, Region: "us", Incarnation: "us.1"}

// newLog returns an origin log of n messages of size bytes each, published
// one second apart from t0.
func newLog(n, size int) *originLog {
	o := &originLog{stream: usStream}
	for range n {
		o.append(size)
	}
	return o
}

func (o *originLog) append(size int) {
	seq := uint64(len(o.msgs)) + 1
	o.msgs = append(o.msgs, Msg{
		Origin: Origin{Region: o.stream.Region, Incarnation: o.stream.Incarnation, Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second)},
		Size:   size,
	})
}

func testConfig() Config {
	c := DefaultConfig()
	c.MaxBatchMsgs, c.MaxInFlight, c.MaxBatchBytes = 3, 6, 1000
	c.AckTimeout, c.BackoffInitial, c.BackoffMax, c.StallAfter = 5*time.Second, time.Second, 8*time.Second, 30*time.Second
	return c
}

func newTestSender(t *testing.T, cfg Config, src Source, st SenderState) *Sender {
	t.Helper()
	s, err := NewSender(cfg, usStream, "eu", st, src, t0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSend(t *testing.T, s *Sender, now time.Time) []Batch {
	t.Helper()
	bs, err := s.Send(now)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func describe(bs []Batch) string {
	var parts []string
	for i := range bs {
		parts = append(parts, bs[i].String())
	}
	return strings.Join(parts, " ")
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := Config{BackoffInitial: time.Second, BackoffMax: time.Millisecond, BackoffJitter: 1}
	err := bad.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	for _, want := range []string{"max_in_flight", "max_batch_msgs", "max_batch_bytes", "ack_timeout", "backoff_max", "backoff_jitter", "stall_after"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := testConfig()
	b := newBackoff(c)
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, b.wait(n))
	}
	if want := "[1s 2s 4s 8s 8s 8s]"; fmt.Sprint(got) != want {
		t.Errorf("waits %v, want %s", got, want)
	}
	// A huge cap does not overflow.
	c.BackoffMax = time.Duration(1<<63 - 1)
	b = newBackoff(c)
	if d := b.wait(200); d != c.BackoffMax {
		t.Errorf("wait(200) = %v, want the cap", d)
	}
	// Jitter shortens by up to the fraction, the same for the same seed.
	c = testConfig()
	c.BackoffJitter, c.Seed = 0.5, 42
	b1, b2 := newBackoff(c), newBackoff(c)
	for n := 1; n <= 20; n++ {
		d1, d2 := b1.wait(n), b2.wait(n)
		full := newBackoff(testConfig())
		if d1 != d2 || d1 > full.wait(n) || d1 < full.wait(n)/2 {
			t.Fatalf("wait(%d) = %v and %v, full %v", n, d1, d2, full.wait(n))
		}
	}
}

func TestNewSenderErrors(t *testing.T) {
	src := newLog(3, 10)
	for _, tc := range []struct {
		name   string
		stream Stream
		remote string
		st     SenderState
		want   error
	}{
		{"remote is origin", usStream, "us", SenderState{}, ErrInvalid},
		{"no remote", usStream, "", SenderState{}, ErrInvalid},
		{"bad topic", Stream{Topic: tenancy.Name{Tenant: "a", Namespace: "b.c", Topic: "d"}, Region: "us", Incarnation: "x"}, "eu", SenderState{}, ErrInvalid},
		{"no incarnation", Stream{Topic: testTopic, Region: "us"}, "eu", SenderState{}, ErrInvalid},
		{"old incarnation", usStream, "eu", SenderState{Incarnation: "us.0", Position: 2}, ErrBadState},
		{"position without incarnation", usStream, "eu", SenderState{Position: 2}, ErrBadState},
		{"above the source", usStream, "eu", SenderState{Incarnation: "us.1", Position: 4}, ErrBadState},
	} {
		if _, err := NewSender(testConfig(), tc.stream, tc.remote, tc.st, src, t0); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := NewSender(Config{}, usStream, "eu", SenderState{}, src, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero config: err = %v", err)
	}
}

// TestSenderWindow: batches respect MaxBatchMsgs, MaxBatchBytes (a
// larger message goes alone) and MaxInFlight; answers free the window.
func TestSenderWindow(t *testing.T) {
	src := newLog(0, 0)
	for _, size := range []int{300, 300, 300, 300, 2000, 100, 100, 100, 100, 100} {
		src.append(size)
	}
	s := newTestSender(t, testConfig(), src, SenderState{})
	bs := mustSend(t, s, t0)
	if got, want := describe(bs), "#1 msgs 1-3 #2 msgs 4 #3 msgs 5 #4 msgs 6"; got != want {
		t.Fatalf("batches %q, want %q", got, want)
	}
	if bs[0].Bytes != 900 || bs[2].Bytes != 2000 || bs[0].Stream != usStream {
		t.Errorf("batch fields: %+v", bs[0])
	}
	if more := mustSend(t, s, t0); len(more) != 0 {
		t.Fatalf("window full, yet sent %s", describe(more))
	}
	// Cumulative: the answer to #2 covers #1 too.
	if err := s.Answer(t0, Answer{Batch: 2, Kind: Stored, HWM: 4}); err != nil {
		t.Fatal(err)
	}
	if s.Position() != 4 {
		t.Fatalf("position %d", s.Position())
	}
	if got := describe(mustSend(t, s, t0)); got != "#5 msgs 7-9 #6 msgs 10" {
		t.Fatalf("after the ack: %q", got)
	}
	if err := s.Answer(t0, Answer{Batch: 1, Kind: Stored, HWM: 3}); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(t0); st.Stats.StaleAnswers != 1 || st.Position != 4 || st.InFlight != 6 {
		t.Fatalf("status %+v", st)
	}
}

// TestSenderAnswerErrors: answers that contradict their batch are
// refused and not applied.
func TestSenderAnswerErrors(t *testing.T) {
	s := newTestSender(t, testConfig(), newLog(3, 10), SenderState{})
	mustSend(t, s, t0)
	for _, a := range []Answer{
		{Batch: 1, Kind: Stored, HWM: 2},
		{Batch: 1, Kind: GapRefused, HWM: 0},
		{Batch: 1, Kind: 0},
	} {
		if err := s.Answer(t0, a); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: err = %v, want ErrInvalid", a, err)
		}
	}
	if err := s.Answer(t0, Answer{Batch: 1, Kind: Duplicate, HWM: 9}); !errors.Is(err, ErrAheadOfSource) {
		t.Errorf("ahead: err = %v", err)
	}
	if s.Position() != 0 || s.Status(t0).InFlight != 3 {
		t.Errorf("a refused answer was applied: %+v", s.Status(t0))
	}
}

// TestSenderGapRefusal: the first refusal rewinds at once; a second one
// at the same sequence without progress backs off.
func TestSenderGapRefusal(t *testing.T) {
	s := newTestSender(t, testConfig(), newLog(6, 10), SenderState{})
	mustSend(t, s, t0)
	if err := s.Answer(t0, Answer{Batch: 2, Kind: GapRefused, HWM: 2}); err != nil {
		t.Fatal(err)
	}
	if s.Position() != 2 {
		t.Fatalf("the refusal's HWM is an acknowledgement: position %d", s.Position())
	}
	if got := describe(mustSend(t, s, t0)); got != "#3 msgs 3-5 #4 msgs 6" {
		t.Fatalf("rewind: %q", got)
	}
	if err := s.Answer(t0, Answer{Batch: 3, Kind: GapRefused, HWM: 1}); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(t0); st.Position != 1 || st.Stats.Regressions != 1 {
		t.Fatalf("regression: %+v", st)
	}
	if got := describe(mustSend(t, s, t0)); got != "#5 msgs 2-4 #6 msgs 5-6" {
		t.Fatalf("after the regression: %q", got)
	}
	if err := s.Answer(t0, Answer{Batch: 6, Kind: GapRefused, HWM: 1}); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(t0); h != BackingOff {
		t.Fatalf("second refusal at 2: %s", h)
	}
	if bs := mustSend(t, s, t0.Add(999*time.Millisecond)); len(bs) != 0 {
		t.Fatalf("sent while backing off: %s", describe(bs))
	}
	if got := describe(mustSend(t, s, t0.Add(time.Second))); got != "#7 msgs 2-4 #8 msgs 5-6" {
		t.Fatalf("after the backoff: %q", got)
	}
}

// TestSenderTimeoutAndStall: an unanswered batch times out at
// AckTimeout; the health goes backing-off, then stalled after StallAfter
// without progress, and back to replicating on progress. NextDeadline
// names each moment.
func TestSenderTimeoutAndStall(t *testing.T) {
	src := newLog(2, 10)
	s := newTestSender(t, testConfig(), src, SenderState{})
	mustSend(t, s, t0)
	if d := s.NextDeadline(); !d.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("deadline %v, want the ack timeout", d)
	}
	now := t0
	for i := 0; i < 10 && s.Health(now) != Stalled; i++ {
		now = s.NextDeadline()
		s.Tick(now)
		mustSend(t, s, now)
	}
	if s.Health(now) != Stalled || now.Sub(t0) != 30*time.Second {
		t.Fatalf("at +%v: %s", now.Sub(t0), s.Health(now))
	}
	st := s.Status(now)
	if st.Lag.Msgs != 2 || st.Lag.Bytes != 20 || st.Lag.Age != 29*time.Second || st.LastError == nil || st.Stats.Timeouts == 0 {
		t.Fatalf("status %+v", st)
	}
	// Still retrying: the next deadline brings a resend.
	now = s.NextDeadline()
	s.Tick(now)
	for _, b := range mustSend(t, s, now) {
		if err := s.Answer(now, Answer{Batch: b.ID, Kind: Stored, HWM: b.Last}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Status(now); st.Health != Replicating || st.Lag != (Lag{}) || st.LastError != nil || !st.LastSuccess.Equal(now) {
		t.Fatalf("after progress: %+v", st)
	}
	if d := s.NextDeadline(); !d.IsZero() {
		t.Fatalf("idle deadline %v", d)
	}
}

// TestSenderGapRecord: trimmed, unacknowledged sequences are covered by
// a gap record, never skipped; lag counts them, and its age falls back
// to the stretch without progress when nothing stored remains.
func TestSenderGapRecord(t *testing.T) {
	src := newLog(5, 10)
	s := newTestSender(t, testConfig(), src, SenderState{})
	src.first = 6 // everything trimmed
	now := t0.Add(10 * time.Second)
	if l := s.Lag(now); l.Msgs != 5 || l.Bytes != 0 || l.Age != 10*time.Second {
		t.Fatalf("lag %+v", l)
	}
	src.append(10)
	bs := mustSend(t, s, now)
	if got := describe(bs); got != "#1 gap 1-5 #2 msgs 6" {
		t.Fatalf("batches %q", got)
	}
	if st := s.Status(now); st.InFlight != 2 || st.Stats.GapRecords != 1 {
		t.Fatalf("a gap record counts 1 in flight: %+v", st)
	}
}

// errSource fails loads of one sequence with a transient error.
type errSource struct {
	*originLog
	bad uint64
}

func (e errSource) Load(seq uint64) (Msg, error) {
	if seq == e.bad {
		return Msg{}, errors.New("bookie unavailable")
	}
	return e.originLog.Load(seq)
}

// TestSenderSourceError: a transient load error sends what was built,
// returns the error and backs off.
func TestSenderSourceError(t *testing.T) {
	src := errSource{newLog(5, 10), 5}
	s := newTestSender(t, testConfig(), src, SenderState{})
	bs, err := s.Send(t0)
	if err == nil || describe(bs) != "#1 msgs 1-3 #2 msgs 4" || s.Health(t0) != BackingOff {
		t.Fatalf("send: %q, %v, %s", describe(bs), err, s.Health(t0))
	}
	// A Source that says a sequence at or above FirstSeq is trimmed is
	// not spun on.
	src2 := &trimLiar{newLog(2, 10)}
	s2 := newTestSender(t, testConfig(), src2, SenderState{})
	if _, err := s2.Send(t0); !errors.Is(err, ErrTrimmed) || s2.Health(t0) != BackingOff {
		t.Fatalf("liar: %v, %s", err, s2.Health(t0))
	}
}

type trimLiar struct{ *originLog }

func (trimLiar) Load(seq uint64) (Msg, error) { return Msg{}, ErrTrimmed }

// TestSenderRestore: a restored sender starts at its persisted position;
// a duplicate answer above it skips ahead to what the remote holds.
func TestSenderRestore(t *testing.T) {
	src := newLog(9, 10)
	s := newTestSender(t, testConfig(), src, SenderState{Incarnation: "us.1", Position: 2})
	bs := mustSend(t, s, t0)
	if got := describe(bs); got != "#1 msgs 3-5 #2 msgs 6-8" {
		t.Fatalf("batches %q", got)
	}
	if err := s.Answer(t0, Answer{Batch: 1, Kind: Duplicate, HWM: 8}); err != nil {
		t.Fatal(err)
	}
	if st := s.State(); st != (SenderState{Incarnation: "us.1", Position: 8}) {
		t.Fatalf("state %+v", st)
	}
	if got := describe(mustSend(t, s, t0)); got != "#3 msgs 9" {
		t.Fatalf("after the skip: %q", got)
	}
}

// TestSenderPartialBatch: a remote HWM inside an in-flight batch (the
// remote holds part of it from an earlier send) leaves that batch in
// flight; if it then fails, the resend starts above the position.
func TestSenderPartialBatch(t *testing.T) {
	s := newTestSender(t, testConfig(), newLog(6, 10), SenderState{})
	if got := describe(mustSend(t, s, t0)); got != "#1 msgs 1-3 #2 msgs 4-6" {
		t.Fatalf("batches %q", got)
	}
	if err := s.Answer(t0, Answer{Batch: 1, Kind: Duplicate, HWM: 5}); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(t0); st.Position != 5 || st.InFlight != 3 || st.Next != 7 {
		t.Fatalf("after the duplicate: %+v", st)
	}
	if err := s.Answer(t0, Answer{Batch: 2, Kind: Failed}); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(t0); st.Position != 5 || st.Next != 6 || st.InFlight != 0 {
		t.Fatalf("after the failure: %+v", st)
	}
	if got := describe(mustSend(t, s, t0.Add(time.Second))); got != "#3 msgs 6" {
		t.Fatalf("resend %q", got)
	}
}
