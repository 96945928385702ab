package replicator

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy"
	"pgregory.net/rapid"
)

// TestPropertyMesh runs random schedules over three regions: publishes,
// partitions and heals, store failures, crashes, retention trims,
// re-created topics, single deliveries on random links, sends and ticks.
// After every step (mesh.checkStep): no message is stored twice at a
// receiver; each origin's stored order is origin-sequence order with
// holes only where a gap record was accepted (and counted); no sender's
// position, in memory or persisted, exceeds the highest HWM its remote
// answered. At the end, with every link healed and failures cleared, the
// mesh drains (ticks and stabilize) and every region holds exactly the
// union of the current incarnations, minus the counted gaps, with lag 0
// (mesh.checkFinal).
func TestPropertyMesh(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.MaxBatchMsgs = rapid.IntRange(1, 4).Draw(rt, "batch")
		cfg.MaxInFlight = rapid.IntRange(1, 10).Draw(rt, "inflight")
		cfg.MaxBatchBytes = rapid.IntRange(50, 1000).Draw(rt, "bytes")
		cfg.AckTimeout = 5 * time.Second
		cfg.BackoffInitial = time.Second
		cfg.BackoffMax = 8 * time.Second
		cfg.StallAfter = 30 * time.Second
		cfg.BackoffJitter = rapid.SampledFrom([]float64{0, 0.5}).Draw(rt, "jitter")
		cfg.Seed = rapid.Uint64().Draw(rt, "seed")
		names := []string{"us", "eu", "ap"}
		m := newMesh(cfg, names...)
		region := rapid.SampledFrom(names)
		pair := func(t *rapid.T) (string, string) {
			a := region.Draw(t, "from")
			b := rapid.SampledFrom(m.remotes(a)).Draw(t, "to")
			return a, b
		}
		step := func(f func(t *rapid.T)) func(t *rapid.T) {
			return func(t *rapid.T) {
				m.out.Reset()
				f(t)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"publish": step(func(t *rapid.T) {
				m.size = rapid.IntRange(1, 300).Draw(t, "size")
				m.publish(region.Draw(t, "region"), rapid.IntRange(1, 5).Draw(t, "n"))
				m.pump()
			}),
			"partition": step(func(t *rapid.T) { a, b := pair(t); m.partition(a, b, true) }),
			"heal":      step(func(t *rapid.T) { a, b := pair(t); m.partition(a, b, false) }),
			"fail":      step(func(t *rapid.T) { a, b := pair(t); m.regions[b].fail[a]++ }),
			"crash":     step(func(t *rapid.T) { m.crash(region.Draw(t, "region")) }),
			"trim": step(func(t *rapid.T) {
				if rapid.IntRange(0, 2).Draw(t, "rare") == 0 {
					r := m.regions[region.Draw(t, "region")]
					m.trim(r.name, r.origin.FirstSeq()-1+rapid.Uint64Range(1, 4).Draw(t, "n"))
				}
			}),
			"recreate": step(func(t *rapid.T) {
				if rapid.IntRange(0, 4).Draw(t, "rare") == 0 {
					m.recreate(region.Draw(t, "region"))
				}
			}),
			"deliver": step(func(t *rapid.T) {
				a, b := pair(t)
				for range rapid.IntRange(1, 3).Draw(t, "n") {
					m.deliver(a, b)
				}
			}),
			"send": step(func(t *rapid.T) { m.pump() }),
			"tick": step(func(t *rapid.T) {
				m.tick(time.Duration(rapid.IntRange(1, 10).Draw(t, "secs")) * time.Second)
			}),
			"": func(t *rapid.T) {
				m.checkStep()
				if len(m.violations) > 0 {
					t.Fatalf("%s\ntrace:\n%s", strings.Join(m.violations, "\n"), m.out.String())
				}
			},
		})

		// Heal, stop failing, drain.
		for _, a := range names {
			for _, b := range m.remotes(a) {
				m.partition(a, b, false)
				m.regions[b].fail[a] = 0
			}
		}
		for i := 0; ; i++ {
			if err := m.stabilize(); err != nil {
				rt.Fatal(err)
			}
			if len(m.checkFinal()) == 0 || i == 20 {
				break
			}
			m.tick(cfg.BackoffMax + cfg.AckTimeout)
		}
		m.checkStep()
		if bad := append(m.violations, m.checkFinal()...); len(bad) > 0 {
			rt.Fatalf("after draining:\n%s\nstate:\n%s", strings.Join(bad, "\n"), m.formatState())
		}
	})
}

// TestPropertyReceiver checks the receiver against a naive model (a set
// of stored sequences per stream), with restores from its JSON state at
// random points giving the same answers.
func TestPropertyReceiver(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		streams := []Stream{
			{Topic: testTopic, Region: "us", Incarnation: "us.1"},
			{Topic: testTopic, Region: "us", Incarnation: "us.2"},
			{Topic: tenancy.Name{Tenant: "acme", Namespace: "orders", Topic: "other"}, Region: "eu", Incarnation: "eu.1"},
		}
		r, err := NewReceiver(ReceiverState{})
		if err != nil {
			rt.Fatal(err)
		}
		type model struct {
			covered uint64 // every seq <= covered is stored or lost
			lost    uint64
		}
		mod := map[Stream]*model{}
		for _, s := range streams {
			mod[s] = &model{}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"offer": func(t *rapid.T) {
				s := rapid.SampledFrom(streams).Draw(t, "stream")
				md := mod[s]
				seq := rapid.Uint64Range(1, md.covered+3).Draw(t, "seq")
				v, hwm := r.Offer(s.Topic, Origin{Region: s.Region, Incarnation: s.Incarnation, Seq: seq})
				want := VerdictGap
				switch {
				case seq <= md.covered:
					want = VerdictDuplicate
				case seq == md.covered+1:
					want = VerdictStore
					md.covered = seq
				}
				if v != want || hwm != md.covered {
					t.Fatalf("offer %s/%d: %s hwm=%d, want %s hwm=%d", s, seq, v, hwm, want, md.covered)
				}
			},
			"gap": func(t *rapid.T) {
				s := rapid.SampledFrom(streams).Draw(t, "stream")
				md := mod[s]
				first := rapid.Uint64Range(1, md.covered+3).Draw(t, "first")
				last := rapid.Uint64Range(first, first+4).Draw(t, "last")
				v, hwm, lost := r.OfferGap(s, first, last)
				want, wantLost := VerdictGap, uint64(0)
				switch {
				case last <= md.covered:
					want = VerdictDuplicate
				case first <= md.covered+1:
					want, wantLost = VerdictStore, last-md.covered
					md.lost += wantLost
					md.covered = last
				}
				if v != want || hwm != md.covered || lost != wantLost {
					t.Fatalf("gap %s/%d-%d: %s hwm=%d lost=%d, want %s hwm=%d lost=%d", s, first, last, v, hwm, lost, want, md.covered, wantLost)
				}
			},
			"restore": func(t *rapid.T) {
				b, err := json.Marshal(r.State())
				if err != nil {
					t.Fatal(err)
				}
				var st ReceiverState
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatal(err)
				}
				if r, err = NewReceiver(st); err != nil {
					t.Fatal(err)
				}
			},
			"": func(t *rapid.T) {
				for s, md := range mod {
					if r.HWM(s) != md.covered || r.Lost(s) != md.lost {
						t.Fatalf("%s: hwm %d lost %d, want %d and %d", s, r.HWM(s), r.Lost(s), md.covered, md.lost)
					}
				}
			},
		})
	})
}
