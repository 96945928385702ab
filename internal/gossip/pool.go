package gossip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"
)

// Member states as reported by Members, following memberlist/Serf.
const (
	StateAlive   = "alive"
	StateSuspect = "suspect" // alive in Serf, but memberlist suspects it
	StateFailed  = "failed"
	StateLeft    = "left" // left gracefully (or is leaving)
)

// Member is one member of a pool as this node sees it.
type Member struct {
	Name  string            `json:"name"`
	Addr  string            `json:"addr"` // host:port of its Serf listener
	State string            `json:"state"`
	Tags  map[string]string `json:"tags,omitempty"`
}

// Pool is a running Serf membership for one node.
type Pool struct {
	cfg     Config
	serf    *serf.Serf
	events  chan serf.Event
	changed chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// ErrNoSeedAnswered is returned by Join when none of the seeds could be
// contacted.
var ErrNoSeedAnswered = errors.New("gossip: no seed answered")

// Start creates the pool and binds its listener. It returns once the node is
// a (single-member) pool; call Join to meet others.
func Start(cfg Config) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1"
	}
	p := &Pool{
		cfg:     cfg,
		events:  make(chan serf.Event, 256),
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	sc := serf.DefaultConfig()
	sc.NodeName = cfg.NodeName
	sc.Tags = cfg.Tags
	sc.EventCh = p.events
	sc.LogOutput = nil
	sc.Logger = serfLogger(cfg.Logger)
	sc.MemberlistConfig = memberlistConfig(cfg.Profile)
	sc.MemberlistConfig.Name = cfg.NodeName
	sc.MemberlistConfig.BindAddr = cfg.BindAddr
	sc.MemberlistConfig.BindPort = cfg.BindPort
	sc.MemberlistConfig.AdvertiseAddr = cfg.AdvertiseAddr
	sc.MemberlistConfig.AdvertisePort = cfg.BindPort
	sc.MemberlistConfig.Logger = sc.Logger
	sc.MemberlistConfig.LogOutput = nil
	// memberlist makes its keyring from SecretKey and then encrypts and
	// verifies every message (GossipVerifyIncoming/Outgoing default on).
	sc.MemberlistConfig.SecretKey = cfg.SecretKey
	// A node restarted on new ports (its data dir rebuilt) comes back
	// under its old name while the others still list the old address.
	// Serf's name-conflict vote would make the new node quit (the dead
	// one cannot answer); instead the name is reclaimed once the old
	// address is found dead. Two live nodes never share a name: a node's
	// registration in etcd refuses a duplicate.
	sc.EnableNameConflictResolution = false
	sc.MemberlistConfig.DeadNodeReclaimTime = reclaimTime(cfg.Profile)
	if cfg.SnapshotPath != "" {
		sc.SnapshotPath = cfg.SnapshotPath
		sc.RejoinAfterLeave = true
	}
	if cfg.Profile == ProfileLoopback {
		sc.LeavePropagateDelay = 100 * time.Millisecond
		sc.ReapInterval = time.Second
		sc.ReconnectInterval = time.Second // rejoin failed members quickly
	}
	if err := probePort(cfg.BindAddr, cfg.BindPort); err != nil {
		return nil, fmt.Errorf("gossip: start %s: %w", cfg.NodeName, err)
	}
	s, err := serf.Create(sc)
	if err != nil {
		return nil, fmt.Errorf("gossip: start %s on %s:%d: %w", cfg.NodeName, cfg.BindAddr, cfg.BindPort, err)
	}
	p.serf = s
	p.wg.Add(1)
	go p.drain()
	return p, nil
}

// probePort checks that a fixed port can be bound for TCP and UDP before
// Serf is created: serf.Create leaks a goroutine when memberlist then fails
// to bind, so a busy port is refused here first.
func probePort(host string, port int) error {
	if port == 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	l.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	return pc.Close()
}

// drain empties Serf's event channel so Serf never blocks on it, and
// coalesces changes into one pending signal on p.changed.
func (p *Pool) drain() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		case ev := <-p.events:
			if _, ok := ev.(serf.MemberEvent); !ok {
				continue
			}
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}
}

// Changed receives a value after membership changed (joins, failures,
// leaves, tag updates). Changes that happen while a value is pending are
// coalesced into it.
func (p *Pool) Changed() <-chan struct{} { return p.changed }

// Addr is this node's Serf address as host:port (the real port when
// BindPort was 0).
func (p *Pool) Addr() string {
	m := p.serf.LocalMember()
	return net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
}

// Name is this node's name in the pool.
func (p *Pool) Name() string { return p.cfg.NodeName }

// Join contacts the seeds (host:port) and merges their view. It returns the
// number of seeds reached; ErrNoSeedAnswered when none was (wrapping Serf's
// error).
func (p *Pool) Join(seeds []string) (int, error) {
	if len(seeds) == 0 {
		return 0, nil
	}
	n, err := p.serf.Join(seeds, true)
	if n == 0 {
		return 0, fmt.Errorf("%w: %v: %v", ErrNoSeedAnswered, seeds, err)
	}
	return n, nil
}

// Members returns every member this node knows, itself included, sorted by
// name. Failed and left members stay listed until Serf reaps them.
func (p *Pool) Members() []Member {
	suspect := map[string]bool{}
	for _, n := range p.serf.Memberlist().Members() {
		if n.State == memberlist.StateSuspect {
			suspect[n.Name] = true
		}
	}
	ms := p.serf.Members()
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{
			Name:  m.Name,
			Addr:  net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port))),
			State: stateOf(m.Status, suspect[m.Name]),
			Tags:  m.Tags,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func stateOf(s serf.MemberStatus, suspect bool) string {
	switch s {
	case serf.StatusAlive:
		if suspect {
			return StateSuspect
		}
		return StateAlive
	case serf.StatusFailed:
		return StateFailed
	case serf.StatusLeaving, serf.StatusLeft:
		return StateLeft
	default:
		return StateSuspect
	}
}

// ShutdownCh is closed when the pool has shut down: after Close, or by
// Serf itself (for example when it lost a name conflict to another node
// using the same name). A node should treat the latter as fatal.
func (p *Pool) ShutdownCh() <-chan struct{} { return p.serf.ShutdownCh() }

// Leave announces a graceful leave so others mark this node left rather
// than failed. It blocks up to Serf's broadcast timeout. Close still has to
// be called.
func (p *Pool) Leave() error {
	if err := p.serf.Leave(); err != nil {
		return fmt.Errorf("gossip: leave %s: %w", p.cfg.NodeName, err)
	}
	return nil
}

// Close shuts the pool down without a leave (others will mark the node
// failed unless Leave ran first). Idempotent; waits for the pool's
// goroutines.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		p.closeErr = p.serf.Shutdown()
		close(p.done)
		p.wg.Wait()
	})
	return p.closeErr
}

// serfLogger adapts Serf's and memberlist's "[LEVEL] text" log lines to
// slog; nil discards.
func serfLogger(l *slog.Logger) *log.Logger {
	if l == nil {
		return log.New(discard{}, "", 0)
	}
	return log.New(levelWriter{l}, "", 0)
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

type levelWriter struct{ l *slog.Logger }

func (w levelWriter) Write(b []byte) (int, error) {
	msg := strings.TrimRight(string(b), "\r\n")
	level := slog.LevelDebug
	switch {
	case strings.HasPrefix(msg, "[ERR]"):
		level = slog.LevelError
	case strings.HasPrefix(msg, "[WARN]"):
		level = slog.LevelWarn
	}
	w.l.Log(context.Background(), level, msg)
	return len(b), nil
}

// SetTag sets (or, with value "", removes) one of this node's tags and
// gossips the change to the pool. It does nothing when the tag already
// has that value. Tags are small and should change rarely: every change
// is a broadcast.
func (p *Pool) SetTag(key, value string) error {
	cur := p.serf.LocalMember().Tags
	if cur[key] == value {
		return nil
	}
	tags := make(map[string]string, len(cur)+1)
	for k, v := range cur {
		tags[k] = v
	}
	if value == "" {
		delete(tags, key)
	} else {
		tags[key] = value
	}
	return p.serf.SetTags(tags)
}
