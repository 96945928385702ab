package ledger

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestEnsembleReplacedByNewInstances: while the writer pauses, every
// bookie of its ensemble is replaced by an empty one at the same id and
// address (a new instance). The new instances refuse adds naming the old
// ones (WRONG_INSTANCE: a bookie failure for the writer), so the writer's
// next append is never confirmed by a copy that is then lost:
//
//   - usually it fails: two bookies of its write set fail in one ensemble
//     change and there are not enough other bookies (a bookie of the
//     ensemble can never replace another) — ErrNotEnoughBookies after
//     ReplaceTimeout, the ledger left OPEN;
//   - or the failures land in consecutive changes and a later one places
//     a wiped bookie's new instance (an empty, healthy bookie outside the
//     ensemble by then): the append is confirmed on bookies recorded under
//     their current instances and reads back, while the wiped entries
//     read as unavailable, never as empty.
//
// Either way no new instance holds data of the ledger unless a segment
// names that instance.
func TestEnsembleReplacedByNewInstances(t *testing.T) {
	e := newEnv(t, 4)
	ctx := testCtx(t)
	c := e.client(func(c *Config) { c.ReplaceTimeout = 2 * time.Second })
	w, err := c.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(10) {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	ensemble := w.Metadata().Segments[0]
	for i, b := range ensemble.Ensemble {
		e.stop(string(b))
		e.restart(string(b), true)
		if inst := e.bookie(string(b)).b.Instance(); inst == ensemble.Instance(i) {
			t.Fatalf("bookie %s restarted on an empty disk kept instance %s", b, inst)
		}
	}
	for _, b := range ensemble.Ensemble {
		testutil.Eventually(t, "new instance registered", 10*time.Second, func() bool {
			r, _, err := meta.GetJSON[bookie.Registration](ctx, e.store, bookie.RegistrationKey(string(b)))
			return err == nil && r.Instance == e.bookie(string(b)).b.Instance()
		})
	}
	id, err := w.Append(ctx, payload(10))
	md := w.Metadata()
	if err == nil {
		if id != 10 {
			t.Fatalf("append confirmed as entry %d", id)
		}
		closed, err := w.Close(ctx)
		if err != nil || closed.LastEntryID != 10 {
			t.Fatalf("Close = %+v, %v", closed, err)
		}
		md = closed
		seg := md.SegmentFor(10)
		for _, i := range core.WriteSet(10, 3, 2) {
			if slices.Contains(ensemble.Instances, seg.Instance(i)) {
				t.Fatalf("entry 10's write set names %s's wiped instance: %+v", seg.Ensemble[i], seg)
			}
		}
		r, err := c.OpenReader(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		checkRead(t, r, 10, 10)
		if es, err := r.Read(ctx, 0, 0); !errors.Is(err, ErrEntryUnavailable) {
			t.Fatalf("wiped entry 0 read as %v, %v; want ErrEntryUnavailable", es, err)
		}
		t.Logf("append confirmed after consecutive changes; segments %+v", md.Segments)
	} else {
		if !errors.Is(err, ErrNotEnoughBookies) && !isTakeoverErr(err) {
			t.Fatalf("append failed with %v; want not enough bookies (or fenced/closed)", err)
		}
		t.Logf("append failed: %v", err)
		if lac := w.LAC(); lac != 9 {
			t.Fatalf("writer LAC %d after the failed append", lac)
		}
		if _, err := w.Append(ctx, payload(11)); err == nil {
			t.Fatal("the writer went on after it ended")
		}
		if closed, err := w.Close(ctx); err == nil || closed.State == core.StateClosed {
			t.Fatalf("Close of the ended writer = %+v, %v", closed, err)
		}
		if got, err := c.Get(ctx, w.ID()); err != nil || got.State != core.StateOpen {
			t.Fatalf("ledger after the writer ended: %+v, %v; want OPEN, left for recovery", got, err)
		}
	}
	for _, b := range ensemble.Ensemble {
		info, err := e.direct(b).Info(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(info.Ledgers, func(l storageLedger) bool { return l.LedgerID == w.ID() })
		named := slices.ContainsFunc(md.Segments, func(s core.Segment) bool {
			j := slices.Index(s.Ensemble, b)
			return j >= 0 && s.Instance(j) == info.Instance
		})
		if i >= 0 && !named {
			t.Fatalf("new instance %s of %s holds %+v of ledger %d, but no segment names it: %+v",
				info.Instance, b, info.Ledgers[i], w.ID(), md.Segments)
		}
	}
}
