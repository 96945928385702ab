package mledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// remote is an origin stream of region eu-west replicated into testTopic.
func remote(inc string) replicator.Stream {
	return replicator.Stream{Topic: testTopic, Region: "eu-west", Incarnation: inc}
}

// originOf is the origin of message seq of stream s.
func originOf(s replicator.Stream, seq uint64) *Origin {
	return &Origin{Region: s.Region, Incarnation: s.Incarnation, Seq: seq, Time: t0.Add(time.Duration(seq) * time.Millisecond)}
}

// replicate publishes the message seq of stream s (as a replicator
// driver would, with the client's header) and waits for the answer.
func replicate(t testing.TB, ml *ML, s replicator.Stream, seq uint64) (PubResult, error) {
	t.Helper()
	ch := make(chan pubAnswer, 1)
	ml.Publish("r."+s.Incarnation, msgHeader(fmt.Sprintf("%s-%d", s.Incarnation, seq)), fmt.Appendf(nil, "%s/%d", s.Incarnation, seq),
		PublishOptions{Origin: originOf(s, seq)}, func(r PubResult, err error) { ch <- pubAnswer{r, err} })
	select {
	case a := <-ch:
		return a.res, a.err
	case <-time.After(60 * time.Second):
		t.Fatalf("replicate %s %d: no answer", s, seq)
		return PubResult{}, nil
	}
}

func mustReplicate(t testing.TB, ml *ML, s replicator.Stream, seq uint64) uint64 {
	t.Helper()
	r, err := replicate(t, ml, s, seq)
	if err != nil || r.Duplicate {
		t.Fatalf("replicate %s %d: %+v, %v", s, seq, r, err)
	}
	return r.Seq
}

// originScan is what a scan of every live message found.
type originScan struct {
	local  []uint64                     // local[n-1]: the topic seq of local origin n
	remote map[replicator.Stream]uint64 // per stream, its last origin seq
}

// scanOrigins reads every message of ml and checks its origin: local
// messages carry this region, the incarnation, local origin sequences
// 1, 2, … in order (gap-free from the first live one, from firstLocal)
// and their publish time; replicated ones carry their stream's
// sequences in order, gap-free from 1 (from the first live one after a
// trim), and the origin they were sent with. It then checks ReadLocal for every local origin and that
// NextLocal walks exactly the local messages.
func scanOrigins(t *testing.T, ml *ML, firstLocal uint64) originScan {
	t.Helper()
	ctx := testCtx(t)
	st := ml.State()
	sc := originScan{remote: map[replicator.Stream]uint64{}}
	for s := st.FirstSeq; s <= st.LastSeq; s++ {
		m, err := ml.Read(ctx, s)
		if err != nil {
			t.Fatalf("read %d: %v", s, err)
		}
		o := m.Origin
		switch {
		case o.Region == testRegion:
			want := Origin{Region: testRegion, Incarnation: ml.Incarnation(), Seq: firstLocal + uint64(len(sc.local)), Time: m.Time}
			if !sameOrigin(o, want) {
				t.Fatalf("seq %d: local origin %+v, want %+v", s, o, want)
			}
			sc.local = append(sc.local, s)
		case m.HasOrigin():
			str := o.Stream(testTopic)
			next, seen := sc.remote[str]+1, sc.remote[str] > 0
			if !seen && st.FirstSeq > 1 { // trimmed: from the first live one
				next = o.Seq
			}
			if want := originOf(str, next); !sameOrigin(o, *want) || string(m.Data) != fmt.Sprintf("%s/%d", o.Incarnation, o.Seq) {
				t.Fatalf("seq %d: replicated origin %+v %q, want %+v", s, o, m.Data, want)
			}
			sc.remote[str] = o.Seq
		default:
			t.Fatalf("seq %d has no origin", s)
		}
	}
	if last := firstLocal + uint64(len(sc.local)) - 1; st.LastOriginSeq != last || ml.LastOriginSeq() != last {
		t.Fatalf("LastOriginSeq %d, scan ends at %d", st.LastOriginSeq, last)
	}
	for i, seq := range sc.local {
		n := firstLocal + uint64(i)
		if m, err := ml.ReadLocal(ctx, n); err != nil || m.Seq != seq || m.Origin.Seq != n {
			t.Fatalf("ReadLocal(%d): seq %d origin %d, %v; want seq %d", n, m.Seq, m.Origin.Seq, err, seq)
		}
	}
	if _, err := ml.ReadLocal(ctx, st.LastOriginSeq+1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadLocal past the last: %v", err)
	}
	var walked []uint64
	for from := uint64(0); ; {
		m, err := ml.NextLocal(ctx, from)
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("NextLocal(%d): %v", from, err)
		}
		walked = append(walked, m.Seq)
		from = m.Seq + 1
	}
	if fmt.Sprint(walked) != fmt.Sprint(sc.local) {
		t.Fatalf("NextLocal walked %v, local messages at %v", walked, sc.local)
	}
	return sc
}

// TestOriginsTakeoverMidBatch: local and replicated publishes from two
// origin streams, interleaved, with many in flight in batches and
// rollovers under way, until the owner crashes (Drop). The next owner
// finds local origin sequences gap-free (every acknowledged one among
// them) and each stream's sequences gap-free up to its high-water mark,
// rebuilt from the snapshot and the recovered tail; both go on where they
// stopped: the next local publish takes the next origin sequence, the
// stream's last message is a duplicate (with its topic sequence), one
// beyond HWM+1 a gap, HWM+1 is stored.
func TestOriginsTakeoverMidBatch(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	mod := []func(*Config){batching(3, 7), func(c *Config) { c.Limits.RolloverEntries = 150 }}
	ml := e.open(testTopic, e.config(testTopic, nil, mod...))
	streams := []replicator.Stream{remote("E1"), remote("E2")}
	var p asyncPublisher
	window := make(chan struct{}, 500)
	enough := make(chan struct{})
	var oks atomic.Int64
	stopped := make(chan struct{})
	next := map[replicator.Stream]uint64{}
	go func() {
		defer close(stopped)
		for i := 0; i < 100000; i++ {
			select {
			case window <- struct{}{}:
			case <-ml.Done():
				return
			}
			then := func(_ PubResult, err error) {
				if err == nil && oks.Add(1) == 1200 {
					close(enough)
				}
				<-window
			}
			if i%5 < 2 { // replicated, alternating streams
				s := streams[i%5]
				next[s]++
				p.pending.Add(1)
				seq := next[s]
				ml.Publish("r."+s.Incarnation, nil, fmt.Appendf(nil, "%s/%d", s.Incarnation, seq), PublishOptions{Origin: originOf(s, seq)},
					func(r PubResult, err error) {
						if err != nil && !errors.Is(err, ErrNotOwner) || r.Duplicate {
							t.Errorf("replicated %s %d: %+v, %v", s, seq, r, err)
						}
						then(r, err)
						p.pending.Done()
					})
				continue
			}
			p.publishThen(ml, "l", fmt.Sprint(i), PublishOptions{MsgID: fmt.Sprintf("id-%d", i)}, then)
		}
	}()
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
	ml.mu.Lock()
	inflight, queued := ml.batch.inflight, ml.batch.queued()
	ml.mu.Unlock()
	ml.Drop()
	<-stopped
	ackedLocal := 0
	for _, a := range p.wait(t) {
		if a.err == nil {
			ackedLocal++
		}
	}
	t.Logf("at the crash: %d entries in flight, %d queued; %d local publishes acknowledged", inflight, queued, ackedLocal)

	ml2 := e.open(testTopic, e.config(testTopic, nil, mod...))
	sc := scanOrigins(t, ml2, 1)
	if len(sc.local) < ackedLocal {
		t.Fatalf("%d local messages recovered, %d acknowledged", len(sc.local), ackedLocal)
	}
	for _, s := range streams {
		hwm := sc.remote[s]
		if got := ml2.OriginHWM(s); got != hwm || hwm == 0 {
			t.Fatalf("%s: HWM %d after takeover, last stored %d", s, got, hwm)
		}
		last, err := replicate(t, ml2, s, hwm)
		if err != nil || !last.Duplicate || last.Seq == 0 {
			t.Fatalf("%s: resending the last, %d: %+v, %v", s, hwm, last, err)
		}
		if m, _ := ml2.Read(testCtx(t), last.Seq); m.Origin.Seq != hwm || m.Origin.Incarnation != s.Incarnation {
			t.Fatalf("%s: duplicate answered with seq %d holding %+v", s, last.Seq, m.Origin)
		}
		var gap *OriginGapError
		if _, err := replicate(t, ml2, s, hwm+2); !errors.As(err, &gap) || gap.Expected != hwm+1 {
			t.Fatalf("%s: %d after HWM %d: %v", s, hwm+2, hwm, err)
		}
		mustReplicate(t, ml2, s, hwm+1)
	}
	seq := mustPublish(t, ml2, "l", "after", PublishOptions{})
	if m, _ := ml2.Read(testCtx(t), seq); m.Origin.Seq != uint64(len(sc.local))+1 {
		t.Fatalf("local publish after takeover: origin %+v, %d local before", m.Origin, len(sc.local))
	}
	if st := ml2.State(); st.OriginsLost != 0 || len(ml2.Origins()) != 2 {
		t.Fatalf("state %+v, origins %+v", st, ml2.Origins())
	}
	// Once more, gracefully: the marks come from the snapshot alone.
	if err := ml2.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ml3 := e.open(testTopic, e.config(testTopic, nil, mod...))
	sc3 := scanOrigins(t, ml3, 1)
	for _, s := range streams {
		if ml3.OriginHWM(s) != sc3.remote[s] || sc3.remote[s] != sc.remote[s]+1 {
			t.Fatalf("%s after Close: HWM %d, stored up to %d", s, ml3.OriginHWM(s), sc3.remote[s])
		}
		if r, err := replicate(t, ml3, s, 1); err != nil || !r.Duplicate {
			t.Fatalf("%s: old message after Close: %+v, %v", s, r, err)
		}
	}
}

// TestReplicatedPublish: the receiver rule at the ML, its persistence in
// the snapshot (Close) and its rebuilding from the recovered tail (crash),
// and what does not apply to replicated messages.
func TestReplicatedPublish(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	// max_msg_size 32: local publishes fit, replicated ones (35 bytes)
	// would not, were it applied to them.
	ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Limits.MaxMsgSize = 32 }))
	e1, e2 := remote("E1"), remote("E2")
	mustPublish(t, ml, "l", "x", PublishOptions{MsgID: "E1-2"})
	if seq := mustReplicate(t, ml, e1, 1); seq != 2 {
		t.Fatalf("replicated at seq %d", seq)
	}
	m, err := ml.Read(testCtx(t), 2)
	if err != nil || !sameOrigin(m.Origin, *originOf(e1, 1)) || m.Origin.Time.Location() != time.UTC {
		t.Fatalf("replicated message %+v, %v", m, err)
	}
	if r, err := replicate(t, ml, e1, 1); err != nil || !r.Duplicate || r.Seq != 2 {
		t.Fatalf("duplicate: %+v, %v", r, err)
	}
	var gap *OriginGapError
	if _, err := replicate(t, ml, e1, 3); !errors.As(err, &gap) || gap.Expected != 2 {
		t.Fatalf("gap: %v", err)
	}
	// Nats-Msg-Id is not checked for replicated messages (E1-2 is a
	// local publish's id) nor remembered from them (E1-1).
	if seq := mustReplicate(t, ml, e1, 2); seq != 3 {
		t.Fatalf("replicated at seq %d", seq)
	}
	if r, err := publish(t, ml, "l", "y", PublishOptions{MsgID: "E1-2"}); err != nil || !r.Duplicate || r.Seq != 1 {
		t.Fatalf("local publish repeating a local msg id: %+v, %v", r, err)
	}
	if r, err := publish(t, ml, "l", "y", PublishOptions{MsgID: "E1-1"}); err != nil || r.Duplicate || r.Seq != 4 {
		t.Fatalf("local publish with a replicated message's msg id: %+v, %v", r, err)
	}
	// The last message's id is its header's, for Nats-Expected-Last-Msg-Id.
	mustReplicate(t, ml, e1, 3)
	if _, err := publish(t, ml, "l", "z", PublishOptions{ExpectedLastMsgID: str("E1-3")}); err != nil {
		t.Fatalf("expected last msg id of a replicated message: %v", err)
	}
	mustReplicate(t, ml, e2, 1) // a new incarnation starts at 1
	for name, o := range map[string]Origin{
		"own region": {Region: testRegion, Incarnation: "X", Seq: 1, Time: t0},
		"seq 0":      {Region: "eu-west", Incarnation: "X", Time: t0},
		"no inc":     {Region: "eu-west", Seq: 1, Time: t0},
	} {
		if _, err := publish(t, ml, "r", "x", PublishOptions{Origin: &o}); !errors.Is(err, ErrBadOrigin) {
			t.Errorf("%s: %v", name, err)
		}
	}
	want := []replicator.StreamState{{Stream: e1, HWM: 3}, {Stream: e2, HWM: 1}}
	if got := ml.Origins(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("origins %+v, want %+v", got, want)
	}
	if st := ml.State(); st.LastOriginSeq != 3 || st.LastSeq != 7 {
		t.Fatalf("state %+v", st)
	}

	// Close: the snapshot has the marks (a duplicate's seq is not known).
	if err := ml.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	tm, _, _ := Load(testCtx(t), e.st, testTopic)
	if fmt.Sprint(tm.Snapshot.Origins) != fmt.Sprint(want) || tm.Snapshot.LastOriginSeq != 3 {
		t.Fatalf("snapshot origins %+v, last origin %d", tm.Snapshot.Origins, tm.Snapshot.LastOriginSeq)
	}
	ml2 := e.open(testTopic, e.config(testTopic, nil))
	if r, err := replicate(t, ml2, e1, 3); err != nil || !r.Duplicate {
		t.Fatalf("duplicate after Close: %+v, %v", r, err)
	}
	seq4 := mustReplicate(t, ml2, e1, 4)
	mustPublish(t, ml2, "l", "w", PublishOptions{})
	// Crash: the marks come from the snapshot plus the recovered tail.
	ml2.Drop()
	ml3 := e.open(testTopic, e.config(testTopic, nil))
	if r, err := replicate(t, ml3, e1, 4); err != nil || !r.Duplicate || r.Seq != seq4 {
		t.Fatalf("duplicate after crash: %+v, %v (stored at %d)", r, err, seq4)
	}
	if _, err := replicate(t, ml3, e1, 6); !errors.As(err, &gap) || gap.Expected != 5 {
		t.Fatalf("gap after crash: %v", err)
	}
	if ml3.OriginHWM(e1) != 4 || ml3.OriginHWM(e2) != 1 || ml3.LastOriginSeq() != 4 {
		t.Fatalf("after crash: HWMs %d %d, last origin %d", ml3.OriginHWM(e1), ml3.OriginHWM(e2), ml3.LastOriginSeq())
	}
	scanOrigins(t, ml3, 1)
}

// TestSkipOrigin: gap records move the high-water mark past trimmed
// sequences and count them, persisted before SkipOrigin returns; one
// arriving with publishes of its stream in flight waits for them.
func TestSkipOrigin(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	mod := []func(*Config){batching(2, 5), func(c *Config) { c.Limits.RolloverEntries = 40 }}
	ml := e.open(testTopic, e.config(testTopic, nil, mod...))
	ctx := testCtx(t)
	e1, e2 := remote("E1"), remote("E2")
	if r, err := ml.SkipOrigin(ctx, e1, 1, 5); err != nil || r != (SkipResult{HWM: 5, Lost: 5}) {
		t.Fatalf("skip 1-5: %+v, %v", r, err)
	}
	tm, _, _ := Load(ctx, e.st, testTopic) // persisted before the answer
	if o := tm.Snapshot.Origins; len(o) != 1 || o[0].HWM != 5 || o[0].Lost != 5 || o[0].GapRecords != 1 {
		t.Fatalf("persisted origins %+v", o)
	}
	if r, err := ml.SkipOrigin(ctx, e1, 3, 5); err != nil || r != (SkipResult{Duplicate: true, HWM: 5}) {
		t.Fatalf("skip 3-5 again: %+v, %v", r, err)
	}
	var gap *OriginGapError
	if _, err := ml.SkipOrigin(ctx, e1, 7, 9); !errors.As(err, &gap) || gap.Expected != 6 {
		t.Fatalf("skip 7-9: %v", err)
	}
	if r, err := ml.SkipOrigin(ctx, e1, 4, 8); err != nil || r != (SkipResult{HWM: 8, Lost: 3}) {
		t.Fatalf("skip 4-8: %+v, %v", r, err)
	}
	if r, err := replicate(t, ml, e1, 8); err != nil || !r.Duplicate || r.Seq != 0 {
		t.Fatalf("skipped sequence resent: %+v, %v", r, err)
	}
	mustReplicate(t, ml, e1, 9)
	for name, c := range map[string]struct {
		s           replicator.Stream
		first, last uint64
	}{
		"own region":  {replicator.Stream{Topic: testTopic, Region: testRegion, Incarnation: ml.Incarnation()}, 1, 2},
		"first 0":     {e1, 0, 2},
		"backwards":   {e1, 12, 11},
		"other topic": {replicator.Stream{Topic: tenancy.Name{Tenant: "a", Namespace: "b", Topic: "c"}, Region: "eu-west", Incarnation: "E1"}, 1, 2},
	} {
		if _, err := ml.SkipOrigin(ctx, c.s, c.first, c.last); !errors.Is(err, ErrBadOrigin) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// With E2's messages in flight: the gap record follows them.
	var p asyncPublisher
	const n = 300
	var stored atomic.Int64
	for seq := uint64(1); seq <= n; seq++ {
		p.pending.Add(1)
		ml.Publish("r", nil, fmt.Appendf(nil, "E2/%d", seq), PublishOptions{Origin: originOf(e2, seq)}, func(r PubResult, err error) {
			if err != nil || r.Duplicate {
				t.Errorf("E2 %d: %+v, %v", seq, r, err)
			}
			stored.Add(1)
			p.pending.Done()
		})
		p.publish(ml, "l", fmt.Sprint(seq), PublishOptions{})
	}
	if stored.Load() == n {
		t.Log("every E2 message was stored before the gap record")
	}
	if r, err := ml.SkipOrigin(ctx, e2, n+1, n+10); err != nil || r != (SkipResult{HWM: n + 10, Lost: 10}) || stored.Load() != n {
		t.Fatalf("skip after publishes in flight: %+v, %v; %d stored", r, err, stored.Load())
	}
	p.wait(t)
	if st := ml.State(); st.OriginsLost != 18 {
		t.Fatalf("lost %d", st.OriginsLost)
	}
	want := []replicator.StreamState{{Stream: e1, HWM: 9, Lost: 8, GapRecords: 2}, {Stream: e2, HWM: n + 10, Lost: 10, GapRecords: 1}}
	if got := ml.Origins(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("origins %+v, want %+v", got, want)
	}
	mustReplicate(t, ml, e2, n+11)
	ml.Drop()
	ml2 := e.open(testTopic, e.config(testTopic, nil, mod...))
	want[1].HWM++
	if got := ml2.Origins(); fmt.Sprint(got) != fmt.Sprint(want) || ml2.State().OriginsLost != 18 {
		t.Fatalf("origins after crash %+v, want %+v", got, want)
	}
	if _, err := ml2.SkipOrigin(ctx, e1, 1, 9); err != nil {
		t.Fatalf("duplicate skip after crash: %v", err)
	}
	if err := ml2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ml2.SkipOrigin(ctx, e1, 10, 11); !errors.Is(err, ErrClosed) {
		t.Fatalf("skip after Close: %v", err)
	}
}

// TestIncarnation: Create makes a UUID; a topic created before
// incarnations gets one at its next Open, kept afterwards; a topic
// deleted and re-created gets another. Messages stored without origins
// (no Config.Region) stay so; local origins start at 1 once the region is
// set, and the region is recorded then (TopicMeta.Region), and not for a
// re-created topic.
func TestIncarnation(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.create(testTopic, `{}`)
	tm, rev, err := Load(ctx, e.st, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(tm.Incarnation); err != nil {
		t.Fatalf("incarnation %q: %v", tm.Incarnation, err)
	}
	// As written before incarnations.
	tm.Incarnation = ""
	b, _ := json.Marshal(tm)
	if _, err := e.st.Put(ctx, TopicKey(testTopic), b); err != nil || rev == 0 {
		t.Fatal(err)
	}
	noRegion := func(c *Config) { c.Region = "" }
	ml := e.open(testTopic, e.config(testTopic, nil, noRegion))
	inc := ml.Incarnation()
	if _, err := uuid.Parse(inc); err != nil || ml.State().Incarnation != inc || ml.LocalStream().Incarnation != inc {
		t.Fatalf("incarnation at open %q: %v", inc, err)
	}
	if tm, _, _ := Load(ctx, e.st, testTopic); tm.Incarnation != inc || tm.Region != "" {
		t.Fatalf("persisted incarnation %q, ML's %q; region %q", tm.Incarnation, inc, tm.Region)
	}
	for i := range 3 {
		mustPublish(t, ml, "l", fmt.Sprint(i), PublishOptions{})
	}
	if m, _ := ml.Read(ctx, 1); m.HasOrigin() || ml.LastOriginSeq() != 0 {
		t.Fatalf("without a region: %+v, last origin %d", m.Origin, ml.LastOriginSeq())
	}
	if _, err := ml.NextLocal(ctx, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NextLocal without local origins: %v", err)
	}
	ml.Drop()
	ml2 := e.open(testTopic, e.config(testTopic, nil))
	if ml2.Incarnation() != inc {
		t.Fatalf("incarnation changed at reopen: %q, was %q", ml2.Incarnation(), inc)
	}
	if tm, _, _ := Load(ctx, e.st, testTopic); tm.Region != testRegion {
		t.Fatalf("region %q recorded by the first Open with one", tm.Region)
	}
	seq := mustPublish(t, ml2, "l", "3", PublishOptions{})
	if m, err := ml2.ReadLocal(ctx, 1); err != nil || m.Seq != seq || m.Seq != 4 {
		t.Fatalf("first local origin: %+v, %v", m, err)
	}
	if m, err := ml2.NextLocal(ctx, 0); err != nil || m.Seq != 4 {
		t.Fatalf("NextLocal: %+v, %v", m, err)
	}
	if err := ml2.DeleteTopic(ctx); err != nil {
		t.Fatal(err)
	}
	e.create(testTopic, `{}`)
	if tm, _, _ := Load(ctx, e.st, testTopic); tm.Incarnation == inc || tm.Incarnation == "" || tm.Region != "" {
		t.Fatalf("re-created topic's incarnation %q, old %q; region %q", tm.Incarnation, inc, tm.Region)
	}
}

// TestReadLocal: local origin sequences are found in ledgers of local
// messages only, mixed ledgers and after ledgers without any, by a new
// owner reading from the bookies; trimmed ones are gone.
func TestReadLocal(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	mod := []func(*Config){batching(2, 4), func(c *Config) { c.Limits.RolloverEntries = 10 }}
	ml := e.open(testTopic, e.config(testTopic, nil, mod...))
	e1 := remote("E1")
	var r uint64
	pub := func(local bool) {
		if local {
			mustPublish(t, ml, "l", "x", PublishOptions{})
		} else {
			r++
			mustReplicate(t, ml, e1, r)
		}
	}
	for i := range 95 {
		switch {
		case i < 25, i >= 75: // local only
			pub(true)
		case i < 50: // mixed
			pub(i%3 == 0)
		default: // replicated only
			pub(false)
		}
	}
	sc := scanOrigins(t, ml, 1)
	if err := ml.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ml2 := e.open(testTopic, e.config(testTopic, nil, mod...))
	if sc2 := scanOrigins(t, ml2, 1); fmt.Sprint(sc2) != fmt.Sprint(sc) {
		t.Fatalf("after reopen %v, before %v", sc2, sc)
	}
	// Trim into the mixed part: the local origins below are gone.
	trim := sc.local[30]
	if err := ml2.TrimTo(testCtx(t), trim); err != nil {
		t.Fatal(err)
	}
	for n := uint64(1); n <= 30; n++ {
		if _, err := ml2.ReadLocal(testCtx(t), n); !errors.Is(err, ErrGone) {
			t.Fatalf("ReadLocal(%d) of a trimmed message: %v", n, err)
		}
	}
	// Again once the ledgers below are removed from the list.
	testutil.Eventually(t, "trimmed ledgers removed", 30*time.Second, func() bool {
		ml2.mu.Lock()
		defer ml2.mu.Unlock()
		return ml2.core.ledgers[0].FirstSeq > 1
	})
	for n := uint64(1); n <= 30; n++ {
		if _, err := ml2.ReadLocal(testCtx(t), n); !errors.Is(err, ErrGone) {
			t.Fatalf("ReadLocal(%d) of a removed ledger's message: %v", n, err)
		}
	}
	if m, err := ml2.NextLocal(testCtx(t), 0); err != nil || m.Seq != trim || m.Origin.Seq != 31 {
		t.Fatalf("NextLocal from the start after a trim: %+v, %v", m, err)
	}
	scanOrigins(t, ml2, 31)
	// Purge: every local origin is gone; the next one is found.
	if _, err := ml2.Purge(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	last := ml2.LastOriginSeq()
	if _, err := ml2.ReadLocal(testCtx(t), last); !errors.Is(err, ErrGone) {
		t.Fatalf("ReadLocal of a purged message: %v", err)
	}
	if _, err := ml2.NextLocal(testCtx(t), 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("NextLocal after the purge: %v", err)
	}
	seq := mustPublish(t, ml2, "l", "after", PublishOptions{})
	if m, err := ml2.ReadLocal(testCtx(t), last+1); err != nil || m.Seq != seq {
		t.Fatalf("ReadLocal after the purge: %+v, %v", m, err)
	}
	if m, err := ml2.NextLocal(testCtx(t), 0); err != nil || m.Seq != seq {
		t.Fatalf("NextLocal after the purge: %+v, %v", m, err)
	}
}

func TestConfigRegion(t *testing.T) {
	for _, r := range []string{"us east", "eu.west", "ap/south"} {
		if err := (Config{Region: r}).Validate(); err == nil || !strings.Contains(err.Error(), "Config.Region") {
			t.Errorf("region %q: %v", r, err)
		}
	}
	if err := (Config{Region: "us-east_1"}).Validate(); err != nil && strings.Contains(err.Error(), "Region") {
		t.Errorf("valid region refused: %v", err)
	}
}
