package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/stratamesh/strata/internal/vfs"
)

// model is what the engine must hold: per ledger, the entries acknowledged
// (payload and piggybacked LAC), the max LAC and the fenced bit.
type model map[int64]*modelLedger

type modelLedger struct {
	fenced  bool
	lac     int64
	entries map[int64]modelEntry
}

type modelEntry struct {
	lac     int64
	payload []byte
}

func (m model) ledger(l int64) *modelLedger {
	if m[l] == nil {
		m[l] = &modelLedger{lac: NoEntry, entries: map[int64]modelEntry{}}
	}
	return m[l]
}

func (ml *modelLedger) add(id, lac int64, p []byte) {
	ml.entries[id] = modelEntry{lac: lac, payload: p}
	ml.lac = max(ml.lac, lac)
}

func (ml *modelLedger) info(l int64) LedgerInfo {
	info := LedgerInfo{LedgerID: l, LAC: ml.lac, LastEntry: NoEntry, Fenced: ml.fenced}
	for id, e := range ml.entries {
		info.Entries++
		info.Bytes += int64(len(e.payload))
		info.LastEntry = max(info.LastEntry, id)
	}
	return info
}

// check compares the engine with the model, entry by entry.
func (m model) check(t *rapid.T, e *Engine, when string) {
	var ids []int64
	for l := range m {
		ids = append(ids, l)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	infos := e.Ledgers()
	if len(infos) != len(ids) {
		t.Fatalf("%s: engine has ledgers %+v, model %v", when, infos, ids)
	}
	for i, l := range ids {
		ml := m[l]
		if want := ml.info(l); infos[i] != want {
			t.Fatalf("%s: ledger %d is %+v, model %+v", when, l, infos[i], want)
		}
		for id, me := range ml.entries {
			got, err := e.Read(l, id)
			if err != nil || got.LAC != me.lac || !bytes.Equal(got.Payload, me.payload) {
				t.Fatalf("%s: read %d/%d: %+v %v, model lac %d payload %d bytes", when, l, id, got, err, me.lac, len(me.payload))
			}
		}
	}
	for l := int64(1); l <= 3; l++ {
		if m[l] == nil {
			if _, err := e.Read(l, 0); !errors.Is(err, ErrNoLedger) {
				t.Fatalf("%s: ledger %d not in the model: read gives %v", when, l, err)
			}
		}
	}
}

func propConfig(fs vfs.FS) Config {
	cfg := testConfig(fs)
	cfg.WriteCacheBytes = 2 << 10 // flushes kicked by adds, concurrently
	cfg.EntryLogMaxSize = 2 << 10
	cfg.JournalMaxFileSize = 4 << 10
	cfg.JournalGroupWindow = 0
	cfg.CompactThreshold = 0.7
	return cfg
}

// TestPropertyRandomOpsAndCrashes runs random sequences of adds (new,
// rewritten, with gaps, recovery, wrong key), fences, deletes, flushes,
// compactions and crashes (clean, and with adds in flight and torn
// journal tails) against a model: after every crash and at the end the
// engine holds exactly the acknowledged state, plus, for adds in flight
// at a crash, each either wholly present or absent.
func TestPropertyRandomOpsAndCrashes(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mem := vfs.NewMem()
		// Entry logs written with direct I/O, or through the page cache
		// (a file system without O_DIRECT).
		mem.SetDirectIO(rapid.Bool().Draw(rt, "direct"))
		cfg := propConfig(mem)
		cfg.EntryLogDirectIO = rapid.Bool().Draw(rt, "directOption")
		e, err := Open(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { e.Close() }()
		m := model{}
		reopen := func(c *vfs.MemFS) {
			e.Close()
			mem = c
			cfg.FS = mem
			if e, err = Open(cfg); err != nil {
				rt.Fatalf("reopen after crash: %v", err)
			}
		}
		pickLedger := rapid.Int64Range(1, 3)
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			switch op := rapid.SampledFrom([]string{"add", "add", "add", "add", "wrongkey", "fence", "delete",
				"flush", "compact", "crash", "inflight-crash"}).Draw(rt, "op"); op {
			case "add":
				l := pickLedger.Draw(rt, "ledger")
				ml := m[l]
				last := int64(NoEntry)
				if ml != nil {
					last = ml.info(l).LastEntry
				}
				id := rapid.Int64Range(max(0, last-2), last+2).Draw(rt, "entry")
				lac := rapid.Int64Range(NoEntry, id).Draw(rt, "lac")
				p := rapid.SliceOfN(rapid.Byte(), 0, 400).Draw(rt, "payload")
				rec := rapid.Bool().Draw(rt, "recovery")
				err := add(t, e, AddRequest{LedgerID: l, EntryID: id, LAC: lac, MasterKey: key(l), Payload: p, Recovery: rec})
				if ml != nil && ml.fenced && !rec {
					if !errors.Is(err, ErrFenced) {
						rt.Fatalf("add to fenced ledger %d: %v", l, err)
					}
					continue
				}
				if err != nil {
					rt.Fatalf("add %d/%d: %v", l, id, err)
				}
				m.ledger(l).add(id, lac, p)
			case "wrongkey":
				l := pickLedger.Draw(rt, "ledger")
				if m[l] == nil {
					continue
				}
				err := add(t, e, AddRequest{LedgerID: l, EntryID: 0, LAC: NoEntry, MasterKey: []byte("wrong"), Recovery: true})
				if !errors.Is(err, ErrMasterKey) {
					rt.Fatalf("add with wrong key: %v", err)
				}
			case "fence":
				l := pickLedger.Draw(rt, "ledger")
				lac, err := e.Fence(context.Background(), l, key(l))
				if err != nil {
					rt.Fatalf("fence %d: %v", l, err)
				}
				ml := m.ledger(l)
				ml.fenced = true
				if lac != ml.lac {
					rt.Fatalf("fence %d returned LAC %d, model %d", l, lac, ml.lac)
				}
			case "delete":
				l := pickLedger.Draw(rt, "ledger")
				err := e.DeleteLedger(l)
				if m[l] == nil {
					if !errors.Is(err, ErrNoLedger) {
						rt.Fatalf("delete of unknown ledger: %v", err)
					}
				} else if err != nil {
					rt.Fatalf("delete %d: %v", l, err)
				}
				delete(m, l)
			case "flush":
				if err := e.Flush(context.Background()); err != nil {
					rt.Fatalf("flush: %v", err)
				}
			case "compact":
				if _, err := e.Compact(context.Background()); err != nil {
					rt.Fatalf("compact: %v", err)
				}
			case "crash":
				reopen(mem.CrashClone())
				m.check(rt, e, fmt.Sprintf("after crash at step %d", step))
			case "inflight-crash":
				inflightCrash(rt, t, &e, &mem, m, reopen)
			}
		}
		m.check(rt, e, "at the end")
		reopen(mem.CrashClone())
		m.check(rt, e, "after the final crash")
	})
}

// inflightCrash starts adds of new entries on an unfenced ledger, crashes
// while they are in flight (keeping a random part of unsynced bytes), and
// reconciles: every add acked before the crash must be there; the others
// may be, whole.
func inflightCrash(rt *rapid.T, t *testing.T, ep **Engine, memp **vfs.MemFS, m model, reopen func(*vfs.MemFS)) {
	e := *ep
	l := rapid.Int64Range(1, 3).Draw(rt, "ledger")
	if ml := m[l]; ml != nil && ml.fenced {
		return
	}
	first := int64(0)
	if ml := m[l]; ml != nil {
		first = ml.info(l).LastEntry + 1
	}
	n := rapid.IntRange(1, 30).Draw(rt, "inflight")
	keepFrac := rapid.Float64Range(0, 1).Draw(rt, "keep")
	type sent struct {
		lac     int64
		payload []byte
	}
	reqs := map[int64]sent{}
	var mu sync.Mutex
	acked := map[int64]bool{}
	var wg sync.WaitGroup
	for i := int64(0); i < int64(n); i++ {
		id := first + i
		p := bytes.Repeat([]byte{byte(id)}, 50+int(id%200))
		reqs[id] = sent{lac: id - 1, payload: p}
		wg.Add(1)
		e.Add(AddRequest{LedgerID: l, EntryID: id, LAC: id - 1, MasterKey: key(l), Payload: p}, func(err error) {
			if err == nil {
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
			wg.Done()
		})
	}
	mu.Lock()
	before := map[int64]bool{}
	for id := range acked {
		before[id] = true
	}
	mu.Unlock()
	crashed := (*memp).CrashCloneWith(vfs.CrashOptions{KeepUnsynced: func(_ string, synced, cur int) int {
		return int(keepFrac * float64(cur-synced))
	}})
	wg.Wait()
	reopen(crashed)
	e = *ep
	ml := m.ledger(l)
	for id, s := range reqs {
		got, err := e.Read(l, id)
		switch {
		case err == nil:
			if got.LAC != s.lac || !bytes.Equal(got.Payload, s.payload) {
				rt.Fatalf("in-flight add %d/%d came back altered", l, id)
			}
			ml.add(id, s.lac, s.payload)
		case errors.Is(err, ErrNoEntry) || errors.Is(err, ErrNoLedger):
			if before[id] {
				rt.Fatalf("add %d/%d acked before the crash is lost", l, id)
			}
		default:
			rt.Fatalf("read %d/%d after crash: %v", l, id, err)
		}
	}
	if len(ml.entries) == 0 && !ml.fenced && !e.hasLedger(l) {
		delete(m, l)
	}
	m.check(rt, e, "after in-flight crash")
}
