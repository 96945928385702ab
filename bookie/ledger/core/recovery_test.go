package core

import (
	"errors"
	"strings"
	"testing"
)

func newTestRecovery(t *testing.T) *Recovery {
	t.Helper()
	md := validMetadata() // E=3 Qw=2 Qa=2, last segment [5: k1 k4 k3]
	md.State = StateInRecovery
	r, err := NewRecovery(md, RecoveryConfig{ReadAhead: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func drainRecovery(r *Recovery) RecoveryReady {
	rd := r.Ready()
	r.Advance(rd)
	return rd
}

// TestRecoveryIgnoresStrangersAndDuplicates: answers from bookies outside
// the segment or write set, and second answers, change nothing.
func TestRecoveryIgnoresStrangersAndDuplicates(t *testing.T) {
	r := newTestRecovery(t)
	rd := drainRecovery(r)
	if len(rd.Fences) != 3 || rd.Fences[1].Bookie != "k4" || rd.Fences[1].Instance != "u4" {
		t.Fatalf("fences %+v", rd.Fences)
	}
	r.Fenced("k2", 40) // of the first segment only
	r.Fenced("k1", 6)
	r.Fenced("k1", 30) // duplicate
	r.FenceFailed("k1")
	if r.phase != phaseFencing {
		t.Fatalf("phase %s after one fence", r.phase)
	}
	r.Fenced("k4", 5)
	rd = drainRecovery(r)
	// base 6; its write set in [5: k1 k4 k3] is indexes 0,1.
	if r.base != 6 || len(rd.Reads) != 4 || rd.Reads[0].Entry != 6 || rd.Reads[2].Entry != 7 || !rd.Reads[0].Fence {
		t.Fatalf("base %d reads %+v", r.base, rd.Reads)
	}
	r.ReadResult("k1", 6, Found([]byte("x"), 60))
	r.ReadResult("k3", 7, Absent()) // write set of 7 is k4, k3
	r.ReadResult("k3", 7, Found([]byte("y"), 70))
	r.ReadResult("k1", 7, Absent()) // not of its write set
	r.ReadResult("k4", 7, Absent())
	rd = drainRecovery(r)
	if rd.Close == nil || rd.Close.LastEntryID != 6 || rd.Close.Length != 60 || rd.Close.State != StateClosed {
		t.Fatalf("Ready %+v", rd)
	}
	if _, ok := r.Result(); !ok || r.HasReady() {
		t.Fatalf("done, but Result/HasReady disagree")
	}
	r.ReadResult("k4", 8, Found(nil, 0))
	if r.HasReady() {
		t.Fatalf("answers after the end produce work")
	}
}

// TestRecoveryKnownEntryLost: the entry at the base is complete, so a
// write set answering it absent everywhere is data loss: retry, never a
// guess at the length.
func TestRecoveryKnownEntryLost(t *testing.T) {
	r := newTestRecovery(t)
	drainRecovery(r)
	r.Fenced("k1", 6)
	r.Fenced("k4", 6)
	drainRecovery(r)
	r.ReadResult("k1", 6, Absent())
	r.ReadResult("k4", 6, Unknown())
	rd := drainRecovery(r)
	if !errors.Is(rd.Err, ErrRetry) || !strings.Contains(rd.Err.Error(), "entry 6 (known complete)") || r.Err() == nil {
		t.Fatalf("Ready %+v", rd)
	}
}
