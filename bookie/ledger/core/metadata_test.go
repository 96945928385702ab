package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func validMetadata() Metadata {
	return Metadata{
		LedgerID: 3, EnsembleSize: 3, WriteQuorum: 2, AckQuorum: 2, State: StateOpen, LastEntryID: NoEntry,
		DigestType: "crc32c", MasterKey: []byte("secret"), Version: 12,
		Segments: []Segment{
			{FirstEntry: 0, Ensemble: []BookieID{"k1", "k2", "k3"}, Instances: []string{"u1", "u2", "u3"}},
			{FirstEntry: 5, Ensemble: []BookieID{"k1", "k4", "k3"}, Instances: []string{"u1", "u4", "u3"}},
		},
	}
}

func TestWriteSet(t *testing.T) {
	for _, c := range []struct {
		entry     int64
		e, qw     int
		want      []int
		wantValid bool
	}{
		{0, 3, 2, []int{0, 1}, true},
		{1, 3, 2, []int{1, 2}, true},
		{2, 3, 2, []int{2, 0}, true},
		{7, 5, 5, []int{2, 3, 4, 0, 1}, true},
		{4, 1, 1, []int{0}, true},
		{-1, 3, 2, nil, false},
		{0, 2, 3, nil, false},
		{0, 3, 0, nil, false},
	} {
		if got := WriteSet(c.entry, c.e, c.qw); !slices.Equal(got, c.want) {
			t.Errorf("WriteSet(%d, %d, %d) = %v, want %v", c.entry, c.e, c.qw, got, c.want)
		}
	}
}

func TestSegmentFor(t *testing.T) {
	md := validMetadata()
	md.Segments = append(md.Segments, Segment{FirstEntry: 9, Ensemble: []BookieID{"k5", "k4", "k3"}})
	for entry, want := range map[int64]int64{-1: 0, 0: 0, 4: 0, 5: 5, 8: 5, 9: 9, 100: 9} {
		if got := md.SegmentFor(entry).FirstEntry; got != want {
			t.Errorf("SegmentFor(%d) starts at %d, want %d", entry, got, want)
		}
	}
	if got := (&Metadata{}).SegmentFor(3); got.Ensemble != nil {
		t.Errorf("SegmentFor without segments: %+v", got)
	}
}

func TestValidate(t *testing.T) {
	md := validMetadata()
	if err := md.Validate(); err != nil {
		t.Fatalf("valid metadata: %v", err)
	}
	closed := md.Clone()
	closed.State, closed.LastEntryID, closed.Length = StateClosed, 8, 100
	if err := closed.Validate(); err != nil {
		t.Fatalf("closed metadata: %v", err)
	}
	for name, c := range map[string]struct {
		mut  func(*Metadata)
		want []string
	}{
		"quorums":       {func(m *Metadata) { m.AckQuorum = 3 }, []string{"E ≥ Qw ≥ Qa ≥ 1"}},
		"state":         {func(m *Metadata) { m.State = 0 }, []string{"unknown state"}},
		"open with end": {func(m *Metadata) { m.LastEntryID = 4 }, []string{"only a closed ledger"}},
		"no key":        {func(m *Metadata) { m.MasterKey = nil }, []string{"empty master key"}},
		"no segments":   {func(m *Metadata) { m.Segments = nil }, []string{"no segments"}},
		"first not 0":   {func(m *Metadata) { m.Segments[0].FirstEntry = 1 }, []string{"first segment starts at entry 1"}},
		"not increasing": {func(m *Metadata) { m.Segments[1].FirstEntry = 0 },
			[]string{"segment 1 starts at entry 0, not after 0"}},
		"size":      {func(m *Metadata) { m.Segments[1].Ensemble = m.Segments[1].Ensemble[:2] }, []string{"segment 1 has 2 bookies, want 3", "2 bookies"}},
		"duplicate": {func(m *Metadata) { m.Segments[0].Ensemble[2] = "k1" }, []string{"names bookie k1 twice"}},
		"instances": {func(m *Metadata) { m.Segments[0].Instances = []string{"u1"} }, []string{"1 instances for 3 bookies"}},
		"fenced segment while open": {func(m *Metadata) { m.FencedSegment = &Segment{Ensemble: []BookieID{"k1", "k2", "k3"}} },
			[]string{"OPEN ledger with a fenced segment"}},
		"fenced segment": {func(m *Metadata) {
			m.State = StateInRecovery
			m.FencedSegment = &Segment{FirstEntry: 6, Ensemble: []BookieID{"k1", "k1"}}
		}, []string{"fenced segment starts at entry 6", "fenced segment has 2 bookies", "fenced segment names bookie k1 twice"}},
		"several": {func(m *Metadata) { m.LedgerID, m.Length = -1, -2 },
			[]string{"ledger id -1 is negative", "length -2 is negative"}},
	} {
		m := md.Clone()
		c.mut(&m)
		err := m.Validate()
		if !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("%s: %v, want ErrInvalidMetadata", name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", name, err, w)
			}
		}
	}
}

func TestMetadataJSON(t *testing.T) {
	md := validMetadata()
	b, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ledger_id":3`, `"ensemble_size":3`, `"write_quorum":2`, `"ack_quorum":2`,
		`"state":"OPEN"`, `"last_entry_id":-1`, `"digest_type":"crc32c"`, `"master_key":"c2VjcmV0"`,
		`"first_entry":5`, `"instances":["u1","u4","u3"]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), "ersion") || strings.Contains(string(b), "fenced_segment") {
		t.Errorf("the version or an unset fenced segment is stored in the value: %s", b)
	}
	var back Metadata
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.sameRecord(&md) || back.Version != 0 {
		t.Errorf("round trip: %+v, want %+v", back, md)
	}
	// A recovery's ensemble change records the fenced segment.
	md.State, md.FencedSegment = StateInRecovery, &Segment{FirstEntry: 5, Ensemble: []BookieID{"k1", "k4", "k3"}}
	if b, err = json.Marshal(md); err != nil || !strings.Contains(string(b), `"fenced_segment":{"first_entry":5,"ensemble":["k1","k4","k3"]}`) {
		t.Errorf("%s, %v", b, err)
	}
	back = Metadata{}
	if err := json.Unmarshal(b, &back); err != nil || !back.sameRecord(&md) || back.Validate() != nil {
		t.Errorf("round trip: %+v, want %+v (%v)", back, md, err)
	}
	if c := md.Clone(); c.FencedSegment == md.FencedSegment || !c.sameRecord(&md) {
		t.Error("Clone shares the fenced segment")
	}
	for _, s := range []State{StateOpen, StateInRecovery, StateClosed} {
		var got State
		if txt, err := s.MarshalText(); err != nil || got.UnmarshalText(txt) != nil || got != s {
			t.Errorf("state %v: %q %v → %v", s, txt, err, got)
		}
	}
	if err := json.Unmarshal([]byte(`{"state":"DELETED"}`), &back); !errors.Is(err, ErrInvalidMetadata) {
		t.Errorf("unknown state: %v", err)
	}
}

func TestBeginRecovery(t *testing.T) {
	md := validMetadata()
	got, err := BeginRecovery(md)
	if err != nil || got.State != StateInRecovery || got.Version != md.Version {
		t.Fatalf("from OPEN: %v %v", got.State, err)
	}
	again, err := BeginRecovery(got)
	if err != nil || !again.sameRecord(&got) {
		t.Fatalf("from IN_RECOVERY: %+v %v", again, err)
	}
	closed := md.Clone()
	closed.State = StateClosed
	if _, err := BeginRecovery(closed); !errors.Is(err, ErrLedgerClosed) {
		t.Fatalf("from CLOSED: %v", err)
	}
	if _, err := NewRecovery(md, RecoveryConfig{}); !errors.Is(err, ErrInvalidMetadata) {
		t.Fatalf("NewRecovery of an OPEN ledger: %v", err)
	}
	if _, err := NewWriter(got); !errors.Is(err, ErrInvalidMetadata) {
		t.Fatalf("NewWriter of an IN_RECOVERY ledger: %v", err)
	}
	if _, err := NewWriter(md); !errors.Is(err, ErrInvalidMetadata) {
		t.Fatalf("NewWriter of a ledger with two segments: %v", err)
	}
}

// TestFenceCoverage checks fenceCovered against the naive rule (no Qa
// bookies of any write set all unfenced) for every configuration with
// E ≤ 6 and every set of fenced bookies.
func TestFenceCoverage(t *testing.T) {
	for e := 1; e <= 6; e++ {
		var seg Segment
		for i := range e {
			seg.Ensemble = append(seg.Ensemble, BookieID(fmt.Sprint(i)))
		}
		for qw := 1; qw <= e; qw++ {
			for qa := 1; qa <= qw; qa++ {
				minFenced := e + 1
				for mask := 0; mask < 1<<e; mask++ {
					fenced := map[BookieID]bool{}
					for i, b := range seg.Ensemble {
						fenced[b] = mask&(1<<i) != 0
					}
					got := fenceCovered(seg, qw, qa, fenced)
					if want := !writerCanComplete(seg, qw, qa, fenced); got != want {
						t.Fatalf("E=%d Qw=%d Qa=%d fenced %v: covered %t, want %t", e, qw, qa, fenced, got, want)
					}
					if got {
						minFenced = min(minFenced, len(slices.DeleteFunc(slices.Clone(seg.Ensemble), func(b BookieID) bool { return !fenced[b] })))
					}
				}
				// Never more than E−Qa+1 fences are needed.
				if minFenced > e-qa+1 {
					t.Errorf("E=%d Qw=%d Qa=%d needs %d fences", e, qw, qa, minFenced)
				}
			}
		}
	}
}

// TestConfirmedFloor: what the metadata alone proves confirmed.
func TestConfirmedFloor(t *testing.T) {
	seg := func(first int64, ens ...BookieID) Segment { return Segment{FirstEntry: first, Ensemble: ens} }
	fenced := seg(3, "k1", "k2", "k3")
	for _, c := range []struct {
		name string
		md   Metadata
		want int64
	}{
		{"closed", Metadata{State: StateClosed, LastEntryID: 7, Segments: []Segment{seg(0, "k1", "k2", "k3")}}, 7},
		{"open, one segment", Metadata{State: StateOpen, LastEntryID: NoEntry, Segments: []Segment{seg(0, "k1", "k2", "k3")}}, NoEntry},
		{"open, writer's change at 5", Metadata{State: StateOpen, LastEntryID: NoEntry,
			Segments: []Segment{seg(0, "k1", "k2", "k3"), seg(5, "k1", "k4", "k3")}}, 4},
		{"in recovery, no recovery change", Metadata{State: StateInRecovery, LastEntryID: NoEntry,
			Segments: []Segment{seg(0, "k1", "k2", "k3"), seg(5, "k1", "k4", "k3")}}, 4},
		// Recovery kept the fenced segment and added its own from 6 and 8:
		// entries from 6 on may have been moved off the fenced write sets.
		{"in recovery, recovery's segments after the fenced one", Metadata{State: StateInRecovery, LastEntryID: NoEntry, FencedSegment: &fenced,
			Segments: []Segment{seg(0, "k5", "k6", "k7"), fenced, seg(6, "k1", "k4", "k3"), seg(8, "k1", "k4", "k9")}}, 5},
		// Recovery replaced the fenced segment in place (from its first entry).
		{"in recovery, fenced segment replaced in place", Metadata{State: StateInRecovery, LastEntryID: NoEntry, FencedSegment: &fenced,
			Segments: []Segment{seg(0, "k5", "k6", "k7"), seg(3, "k1", "k4", "k3")}}, 2},
	} {
		if got := c.md.ConfirmedFloor(); got != c.want {
			t.Errorf("%s: ConfirmedFloor = %d, want %d", c.name, got, c.want)
		}
	}
}
