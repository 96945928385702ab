package mledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tiered"
	"github.com/stratamesh/strata/tiered/blob/memblob"
)

// TestOffloadMetamorphic runs one seeded publish / consume / seek / trim
// / reopen log twice, with tiering off and with an aggressive offload
// (100-entry ledgers, threshold 0, deletion lag 0, reads settled onto the
// tier before each read step), and demands identical results
// (CONVENTIONS: metamorphic tests, as pebble's).
func TestOffloadMetamorphic(t *testing.T) {
	e := newEnv(t)
	store := memblob.New()
	plain := tenancy.Name{Tenant: "acme", Namespace: "prod", Topic: "plain"}
	offl := tenancy.Name{Tenant: "acme", Namespace: "prod", Topic: "tiered"}
	e.create(plain, `{}`)
	e.create(offl, `{}`)
	const seed = 20261130
	withTier := func(c *Config) {
		c.Tier = NewTier(store, tiered.NewBlockCache(1<<20), tiered.Config{BlockSize: 64 << 10})
		c.Offload = &OffloadPolicy{Threshold: 0, DeletionLag: 0}
	}
	a := runLog(t, e, plain, seed, nil)
	b := runLog(t, e, offl, seed, withTier)
	if len(a) != len(b) {
		t.Fatalf("%d results without tiering, %d with", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs:\n  without tiering: %s\n  with tiering:    %s", i, a[i], b[i])
		}
	}
	if store.Calls(memblob.OpRead) == 0 {
		t.Fatal("the tiered run never read from the tier")
	}
	objs, err := store.List(testCtx(t), "")
	if err != nil || len(objs) == 0 {
		t.Fatalf("tier holds %d objects (%v)", len(objs), err)
	}
	t.Logf("%d steps identical; tier: %d objects, %d range reads", len(a), len(objs), store.Calls(memblob.OpRead))
}

// runLog runs the seeded log against topic n (mod configures the ML) and
// returns one line per observable result.
func runLog(t *testing.T, e *env, n tenancy.Name, seed uint64, mod func(*Config)) []string {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	cfg := func() Config {
		return e.config(n, nil, func(c *Config) {
			c.Limits.RolloverEntries = 100
			c.CacheBytes = 64 << 10 // small: reads of closed ledgers leave the cache
			if mod != nil {
				mod(c)
			}
		})
	}
	ml := e.open(n, cfg())
	var out []string
	published := 0
	settle := func() {
		if mod == nil {
			return
		}
		testutil.Eventually(t, "closed ledgers on the tier only", 60*time.Second, func() bool {
			for _, l := range ml.OffloadStatus().Ledgers {
				if l.Where != "tier" && l.Where != "open" && l.Msgs > 0 {
					return false
				}
			}
			return true
		})
		dropCaches(ml)
	}
	read := func(seq uint64) string {
		m, err := ml.Read(testCtx(t), seq)
		switch {
		case errors.Is(err, ErrGone):
			return fmt.Sprintf("%d:gone", seq)
		case errors.Is(err, ErrNotFound):
			return fmt.Sprintf("%d:none", seq)
		case err != nil:
			t.Fatalf("read %d: %v", seq, err)
		}
		return fmt.Sprintf("%d:%s:%s", m.Seq, m.Subject, m.Data)
	}
	for step := range 60 {
		switch op := rng.IntN(10); {
		case op < 4: // publish a run
			k := 1 + rng.IntN(80)
			for range k {
				published++
				subj := fmt.Sprintf("acme.prod.s%d", rng.IntN(5))
				seq := mustPublish(t, ml, subj, fmt.Sprintf("m-%d-%d", published, rng.IntN(1000)), PublishOptions{})
				out = append(out, fmt.Sprintf("pub %d", seq))
			}
		case op < 6: // consume everything from the earliest position
			settle()
			st := ml.State()
			line := fmt.Sprintf("consume %d..%d:", st.FirstSeq, st.LastSeq)
			for s := st.FirstSeq; s <= st.LastSeq; s++ {
				line += " " + read(s)
			}
			out = append(out, line)
		case op < 8: // seek: read a short run from a random position
			settle()
			st := ml.State()
			from := uint64(1 + rng.IntN(int(st.LastSeq)+10))
			line := fmt.Sprintf("seek %d:", from)
			for s := from; s < from+uint64(1+rng.IntN(30)); s++ {
				line += " " + read(s)
			}
			out = append(out, line)
		case op < 9: // retention: trim to a random sequence
			st := ml.State()
			if st.LastSeq < 2 {
				continue
			}
			to := st.FirstSeq + uint64(rng.IntN(int(st.LastSeq-st.FirstSeq)/3+1))
			if err := ml.TrimTo(testCtx(t), to); err != nil {
				t.Fatalf("step %d: trim to %d: %v", step, to, err)
			}
			st = ml.State() // (subject counts follow trims lazily: not compared)
			out = append(out, fmt.Sprintf("trim %d: first %d last %d msgs %d", to, st.FirstSeq, st.LastSeq, st.Msgs))
		default: // a new owner
			if err := ml.Close(testCtx(t)); err != nil {
				t.Fatalf("step %d: close: %v", step, err)
			}
			ml = e.open(n, cfg())
			st := ml.State()
			out = append(out, fmt.Sprintf("reopen: first %d last %d msgs %d", st.FirstSeq, st.LastSeq, st.Msgs))
		}
	}
	settle()
	st := ml.State()
	line := fmt.Sprintf("final %d..%d:", st.FirstSeq, st.LastSeq)
	for s := st.FirstSeq; s <= st.LastSeq; s++ {
		line += " " + read(s)
	}
	return append(out, line)
}
