package failback

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	up   = Observation{Reachable: true}
	down = Observation{}
	lag  = Observation{Reachable: true, LagSeconds: 10}
)

// step is one observation at t0+at and what must follow.
type step struct {
	at       time.Duration
	o        Observation
	phase    Phase
	switched bool
}

func run(t *testing.T, tr *Tracker, steps []step) {
	t.Helper()
	for i, s := range steps {
		st, sw := tr.Observe(t0.Add(s.at), "us-east", s.o)
		if st.Phase != s.phase || sw != s.switched {
			t.Fatalf("step %d (at %v, %+v): phase %v switched %v, want %v %v", i, s.at, s.o, st.Phase, sw, s.phase, s.switched)
		}
		if got := tr.AdmitsGuests("us-east"); got != (s.phase != Home) {
			t.Fatalf("step %d: AdmitsGuests %v in phase %v", i, got, st.Phase)
		}
	}
}

func newTracker(t *testing.T, delay time.Duration) *Tracker {
	t.Helper()
	tr, err := New(Config{SwitchBackDelay: delay, CaughtUpLag: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTwoRoundsEachServeTheFullDelay: the region is lost and returns twice;
// each time its guests go home only a full delay after it is caught up,
// never earlier on the second round.
func TestTwoRoundsEachServeTheFullDelay(t *testing.T) {
	tr := newTracker(t, 5*time.Second)
	s := time.Second
	run(t, tr, []step{
		{0, up, Settling, false}, // start: never seen → must settle first
		{4 * s, up, Settling, false},
		{5 * s, up, Home, true},
		{6 * s, up, Home, false},
		// round 1
		{10 * s, down, Away, false},
		{12 * s, lag, Returned, false},
		{13 * s, up, Settling, false},
		{17 * s, up, Settling, false},
		{17*s + 999*time.Millisecond, up, Settling, false},
		{18 * s, up, Home, true},
		// round 2, right after: the delay again in full
		{19 * s, down, Away, false},
		{20 * s, up, Settling, false},
		{24 * s, up, Settling, false},
		{25 * s, up, Home, true},
		{26 * s, up, Home, false},
	})
	if st := tr.Status("us-east"); st.Rounds != 3 || st.Since != t0.Add(25*s) {
		t.Fatalf("status %+v, want 3 rounds, since +25s", st)
	}
}

// TestLossWhileSettlingStartsOver: a blip of unreachability just before
// the switch-back restarts the delay from the next caught-up moment.
func TestLossWhileSettlingStartsOver(t *testing.T) {
	tr := newTracker(t, 5*time.Second)
	s := time.Second
	run(t, tr, []step{
		{0, down, Away, false},
		{1 * s, up, Settling, false},
		{5 * s, down, Away, false}, // 4 s into the delay
		{6 * s, up, Settling, false},
		{10 * s, up, Settling, false}, // 9 s after the first catch-up: not yet
		{11 * s, up, Home, true},
	})
}

// TestFallingBehindWhileSettling goes back to returned; lag once home does
// not leave home.
func TestFallingBehindWhileSettling(t *testing.T) {
	tr := newTracker(t, 5*time.Second)
	s := time.Second
	stalled := Observation{Reachable: true, Stalled: true}
	run(t, tr, []step{
		{0, lag, Returned, false},
		{1 * s, up, Settling, false},
		{3 * s, lag, Returned, false},
		{4 * s, stalled, Returned, false},
		{4*s + 500*time.Millisecond, Observation{Reachable: true, PeersBehind: true}, Returned, false},
		{5 * s, Observation{Reachable: true, LagSeconds: 1}, Settling, false}, // at the bound: caught up
		{9 * s, up, Settling, false},
		{10 * s, up, Home, true},
		{11 * s, lag, Home, false},
		{12 * s, stalled, Home, false},
		{13 * s, down, Away, false},
	})
	if st := tr.Status("us-east"); st.Since != t0.Add(13*s) || !st.SwitchBackAt.IsZero() {
		t.Fatalf("status %+v", st)
	}
}

// TestRegionsAreIndependent: one region's loss does not touch another's.
func TestRegionsAreIndependent(t *testing.T) {
	tr := newTracker(t, time.Second)
	tr.Observe(t0, "a", up)
	tr.Observe(t0, "b", up)
	if _, sw := tr.Observe(t0.Add(time.Second), "a", up); !sw {
		t.Fatal("a did not switch back")
	}
	tr.Observe(t0.Add(time.Second), "b", down)
	all := tr.All()
	if len(all) != 2 || all[0].Region != "a" || all[0].Phase != Home || all[1].Phase != Away {
		t.Fatalf("All: %+v", all)
	}
	if st := tr.Status("never"); st.Phase != Away || !tr.AdmitsGuests("never") {
		t.Fatalf("unseen region: %+v", st)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{SwitchBackDelay: time.Millisecond}); !errors.Is(err, ErrConfig) {
		t.Fatalf("1ms delay: %v", err)
	}
	if _, err := New(Config{CaughtUpLag: -time.Second}); !errors.Is(err, ErrConfig) {
		t.Fatalf("negative lag: %v", err)
	}
	tr, err := New(Config{})
	if err != nil || tr.Config() != DefaultConfig() {
		t.Fatalf("defaults: %+v %v", tr.Config(), err)
	}
	if Phase(9).String() != "phase(9)" || Home.String() != "home" {
		t.Fatal("Phase.String")
	}
}
