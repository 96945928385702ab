package failback

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Defaults of Config.
const (
	// DefaultSwitchBackDelay is how long a returned region must stay
	// reachable and caught up before its clients are sent home.
	DefaultSwitchBackDelay = 30 * time.Second
	// DefaultCaughtUpLag is the largest replication lag toward a region,
	// in seconds of its oldest unreplicated message, that still counts as
	// caught up (a busy topic is rarely at lag 0).
	DefaultCaughtUpLag = 2 * time.Second
	// MinSwitchBackDelay is the shortest SwitchBackDelay Validate accepts.
	MinSwitchBackDelay = 100 * time.Millisecond
)

// ErrConfig: a Config field is out of range (wrapped with the field's
// name and value).
var ErrConfig = errors.New("failback: bad config")

// Config configures a Tracker.
type Config struct {
	// SwitchBackDelay is how long a region must have been reachable and
	// caught up, without interruption, before its guests are sent home.
	// Trade-off: shorter brings clients home sooner, longer protects them
	// from a region that comes and goes. Default 30 s; at least 100 ms.
	SwitchBackDelay time.Duration
	// CaughtUpLag is the replication lag (age of the oldest message not
	// yet acknowledged by the region, in the replication toward it from
	// here) at or under which the region counts as caught up. Default 2 s;
	// not negative.
	CaughtUpLag time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{SwitchBackDelay: DefaultSwitchBackDelay, CaughtUpLag: DefaultCaughtUpLag}
}

func (c Config) withDefaults() Config {
	if c.SwitchBackDelay == 0 {
		c.SwitchBackDelay = DefaultSwitchBackDelay
	}
	if c.CaughtUpLag == 0 {
		c.CaughtUpLag = DefaultCaughtUpLag
	}
	return c
}

// Validate returns every problem with c (zero fields take defaults).
func (c Config) Validate() error {
	var errs []error
	if c.SwitchBackDelay != 0 && c.SwitchBackDelay < MinSwitchBackDelay {
		errs = append(errs, fmt.Errorf("%w: SwitchBackDelay %v is under %v", ErrConfig, c.SwitchBackDelay, MinSwitchBackDelay))
	}
	if c.CaughtUpLag < 0 {
		errs = append(errs, fmt.Errorf("%w: CaughtUpLag %v is negative", ErrConfig, c.CaughtUpLag))
	}
	return errors.Join(errs...)
}

// Phase is where a remote region is on its way back.
type Phase int

const (
	// Away: unreachable from here (or not seen yet). Its clients may be
	// guests here.
	Away Phase = iota
	// Returned: reachable again, replication toward it not caught up (or
	// stalled).
	Returned
	// Settling: reachable and caught up since Status.Since; its guests go
	// home at Status.SwitchBackAt unless it is lost or falls behind first.
	Settling
	// Home: its clients belong at home; guests of it are closed and new
	// ones refused. A home region leaves Home only when it becomes
	// unreachable (lag alone, under load, is not an outage).
	Home
)

var phaseNames = [...]string{"away", "returned", "settling", "home"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// Observation is what a driver saw of a remote region at one moment.
type Observation struct {
	// Reachable: the region has a live broker in the Serf WAN pool and the
	// replication link toward it, if there is one, is connected.
	Reachable bool
	// LagSeconds is the largest replication lag toward the region, from
	// here, in seconds (age of the oldest message it has not
	// acknowledged); 0 when there is nothing to send.
	LagSeconds float64
	// Stalled: a replicator cursor toward it reports stalled.
	Stalled bool
	// PeersBehind: another broker of this region reports its cursors
	// toward the region behind (stalled or over CaughtUpLag).
	PeersBehind bool
}

// Status is a remote region's switch-back state.
type Status struct {
	Region string
	Phase  Phase
	// Since is when the current phase began (zero for a region not seen
	// reachable since the Tracker started).
	Since time.Time
	// SwitchBackAt is, while Settling, when its guests go home.
	SwitchBackAt time.Time
	// Rounds counts switch-backs (entries into Home after an outage).
	Rounds int
}

// Tracker keeps the switch-back state of every remote region.
type Tracker struct {
	cfg     Config
	regions map[string]*Status
}

// New returns a Tracker; every region starts Away (it must be seen
// caught up for a full delay before it counts as home). Errors: Validate's.
func New(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tracker{cfg: cfg.withDefaults(), regions: map[string]*Status{}}, nil
}

// Config returns the Tracker's configuration with defaults filled in.
func (t *Tracker) Config() Config { return t.cfg }

// Observe feeds what was seen of region at now and returns its status
// after it, and whether this observation switched it back (stepped into
// Home): the moment its guests must be sent home. Observations must come
// in time order per region.
func (t *Tracker) Observe(now time.Time, region string, o Observation) (Status, bool) {
	st := t.regions[region]
	if st == nil {
		st = &Status{Region: region, Phase: Away}
		t.regions[region] = st
	}
	caughtUp := !o.Stalled && !o.PeersBehind && o.LagSeconds <= t.cfg.CaughtUpLag.Seconds()
	to := st.Phase
	switch {
	case !o.Reachable:
		to = Away
	case st.Phase == Home:
		// stays home while reachable
	case !caughtUp:
		to = Returned
	case st.Phase == Settling:
		if !now.Before(st.SwitchBackAt) {
			to = Home
		}
	default: // Away or Returned, now caught up
		to = Settling
	}
	if to == st.Phase {
		return *st, false
	}
	st.Phase, st.Since, st.SwitchBackAt = to, now, time.Time{}
	if to == Settling {
		st.SwitchBackAt = now.Add(t.cfg.SwitchBackDelay)
	}
	if st.Phase == Home {
		st.Rounds++
		return *st, true
	}
	return *st, false
}

// Status returns region's status (Away for a region never observed).
func (t *Tracker) Status(region string) Status {
	if st := t.regions[region]; st != nil {
		return *st
	}
	return Status{Region: region, Phase: Away}
}

// AdmitsGuests reports whether a guest whose home is region may connect
// here: whenever the region is not Home.
func (t *Tracker) AdmitsGuests(region string) bool { return t.Status(region).Phase != Home }

// All returns every observed region's status, sorted by name.
func (t *Tracker) All() []Status {
	out := make([]Status, 0, len(t.regions))
	for _, st := range t.regions {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b Status) int {
		if a.Region < b.Region {
			return -1
		}
		if a.Region > b.Region {
			return 1
		}
		return 0
	})
	return out
}
