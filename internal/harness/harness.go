package harness

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// Sentinel errors; errors from the harness and from a Remote wrap them.
var (
	// ErrNoNetwork: cutting a link needs a mesh whose regions run in
	// network namespaces (Config.Links).
	ErrNoNetwork = errors.New("harness: this mesh runs on one network (loopback): cutting a link between two regions needs its regions in network namespaces")
	// ErrUnknownNode: no node or region of that name.
	ErrUnknownNode = errors.New("harness: no such node")
	// ErrNotRunning: the node's process has exited (freeze and thaw need
	// a live process).
	ErrNotRunning = errors.New("harness: node is not running")
	// ErrClosed: the harness is closing or closed.
	ErrClosed = errors.New("harness: closed")
	// ErrDuplicate: a node of that region and id is already running.
	ErrDuplicate = errors.New("harness: node already running")
)

// Links cuts and heals the link between two regions, both ways, leaving
// their links to other regions up. Network-namespace meshes provide it.
type Links interface {
	Cut(a, b string) error
	Heal(a, b string) error
}

// Config configures a Harness. The zero value works (defaults below).
type Config struct {
	// StartTimeout bounds each node's start: process start to its ready
	// report. Default 60 s; a node that misses it is killed.
	StartTimeout time.Duration
	// StopGrace is how long a node gets after SIGTERM (Close, Stop)
	// before SIGKILL. Default 15 s.
	StopGrace time.Duration
	// Env is added to every node's environment before its spec's Env
	// (e.g. GOMAXPROCS=1 when many nodes share few cores).
	Env []string
	// Logger receives the harness's own logs; nil discards.
	Logger *slog.Logger
	// OnExit, if set, is called once per process when it exits, with its
	// exit error (nil for status 0). n.Intended() tells an exit the
	// harness caused from a crash. It runs on the node's exit watcher:
	// keep it short; it must not call Restart or Close.
	OnExit func(n *Node, err error)
	// OnReady, if set, is called after a process of n has printed its
	// ready report (Start, StartParallel, Restart), before they return.
	// Same rules as OnExit.
	OnReady func(n *Node)
	// Links cuts links between regions; nil: Cut and Heal return
	// ErrNoNetwork.
	Links Links
}

// Harness runs node processes. See the package doc for its rules.
type Harness struct {
	cfg Config
	log *slog.Logger
	sp  *spawner

	mu       sync.Mutex
	nodes    map[string]*Node // by "region/id"
	order    []string         // names in first-start order
	closed   bool
	watchers sync.WaitGroup
	closing  sync.Once
}

// New returns a harness with no nodes.
func New(cfg Config) *Harness {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 15 * time.Second
	}
	h := &Harness{cfg: cfg, log: cfg.Logger, sp: newSpawner(), nodes: map[string]*Node{}}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Start starts one node and waits for its ready report. A node of the
// same region and id that has exited is replaced (its *Node then stands
// for the new process); one still running is ErrDuplicate.
func (h *Harness) Start(s NodeSpec) (*Node, error) {
	if s.Region == "" || s.ID == "" || s.Exe == "" {
		return nil, fmt.Errorf("harness: NodeSpec needs Region, ID and Exe (got region %q, id %q, exe %q)", s.Region, s.ID, s.Exe)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	n, ok := h.nodes[s.Name()]
	if !ok {
		n = &Node{spec: s, h: h}
		h.nodes[s.Name()] = n
		h.order = append(h.order, s.Name())
	}
	h.mu.Unlock()
	n.op.Lock()
	defer n.op.Unlock()
	if p := n.cur(); p != nil {
		select {
		case <-p.exited:
		default:
			return nil, fmt.Errorf("%w: %s (pid %d)", ErrDuplicate, s.Name(), p.cmd.Process.Pid)
		}
	}
	n.mu.Lock()
	n.spec = s
	n.mu.Unlock()
	if err := h.run(n); err != nil {
		if n.cur() == nil { // never ran: forget it
			h.mu.Lock()
			delete(h.nodes, s.Name())
			h.order = removeName(h.order, s.Name())
			h.mu.Unlock()
		}
		return nil, err
	}
	return n, nil
}

func removeName(names []string, name string) []string {
	out := names[:0]
	for _, x := range names {
		if x != name {
			out = append(out, x)
		}
	}
	return out
}

// run launches n's spec, installs the process and its exit watcher.
// The caller holds n.op.
func (h *Harness) run(n *Node) error {
	spec := n.Spec()
	h.log.Info("starting node", "region", spec.Region, "node", spec.ID, "role", spec.Role)
	p, err := h.launch(spec)
	if err != nil {
		return err
	}
	h.mu.Lock()
	if h.closed { // Close began while the node started: it is ours to stop
		h.mu.Unlock()
		_ = p.cmd.Process.Kill()
		<-p.exited
		return ErrClosed
	}
	h.watchers.Add(1)
	h.mu.Unlock()
	n.mu.Lock()
	n.p = p
	if n.spec.Role == "" {
		n.spec.Role = p.report.Role
	}
	n.mu.Unlock()
	go h.watch(n, p)
	if h.cfg.OnReady != nil {
		h.cfg.OnReady(n)
	}
	return nil
}

func (h *Harness) watch(n *Node, p *proc) {
	defer h.watchers.Done()
	<-p.exited
	n.mu.Lock()
	intended := p.intended
	n.mu.Unlock()
	h.log.Info("node exited", "region", n.Spec().Region, "node", n.Spec().ID, "how", describeExit(p.exitErr), "intended", intended)
	if h.cfg.OnExit != nil {
		h.cfg.OnExit(n, p.exitErr)
	}
}

// StartParallel starts every spec at once and waits for all. The nodes
// are in spec order (nil where a start failed); the error joins every
// failure.
func (h *Harness) StartParallel(specs []NodeSpec) ([]*Node, error) {
	nodes := make([]*Node, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = h.Start(s)
		}()
	}
	wg.Wait()
	return nodes, errors.Join(errs...)
}

// Node returns the node region/id.
func (h *Harness) Node(region, id string) (*Node, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.nodes[region+"/"+id]
	return n, ok && n.cur() != nil
}

// Nodes returns every node, in the order they were first started.
func (h *Harness) Nodes() []*Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*Node, 0, len(h.order))
	for _, name := range h.order {
		if n := h.nodes[name]; n.cur() != nil {
			out = append(out, n)
		}
	}
	return out
}

func (h *Harness) node(region, id string) (*Node, error) {
	n, ok := h.Node(region, id)
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s", ErrUnknownNode, region, id)
	}
	return n, nil
}

// region returns region's nodes, ErrUnknownNode when it has none.
func (h *Harness) region(region string) ([]*Node, error) {
	var out []*Node
	for _, n := range h.Nodes() {
		if n.Spec().Region == region {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no nodes in region %q", ErrUnknownNode, region)
	}
	return out, nil
}

// Stop stops one node: SIGTERM, SIGKILL after StopGrace. It reports
// whether the node stopped within the grace period.
func (h *Harness) Stop(region, id string) (bool, error) {
	n, err := h.node(region, id)
	if err != nil {
		return false, err
	}
	n.op.Lock()
	defer n.op.Unlock()
	return n.terminate(h.cfg.StopGrace), nil
}

// Close stops every node, brokers and bookies first (in parallel), then
// meta nodes (so nodes can deregister from etcd while they stop), and
// waits for every process and watcher. Idempotent. Nodes that needed
// SIGKILL are logged.
func (h *Harness) Close() { h.CloseReport(nil) }

// CloseReport is Close, calling slow (if set) for each node that did not
// stop within StopGrace and was killed.
func (h *Harness) CloseReport(slow func(*Node)) {
	h.closing.Do(func() {
		h.mu.Lock()
		h.closed = true
		nodes := make([]*Node, 0, len(h.order))
		for _, name := range h.order { // also nodes still starting: their Start holds n.op
			nodes = append(nodes, h.nodes[name])
		}
		h.mu.Unlock()
		for _, metaPhase := range []bool{false, true} {
			var wg sync.WaitGroup
			for _, n := range nodes {
				if (n.Spec().Role == RoleMeta) != metaPhase {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					n.op.Lock()
					defer n.op.Unlock()
					if n.cur() == nil {
						return
					}
					if !n.terminate(h.cfg.StopGrace) {
						h.log.Warn("node did not stop in time; killed", "region", n.Spec().Region, "node", n.Spec().ID, "grace", h.cfg.StopGrace)
						if slow != nil {
							slow(n)
						}
					}
				}()
			}
			wg.Wait()
		}
		h.watchers.Wait()
		h.sp.close()
	})
}

// Roles, in the order RestartRegion starts them.
const (
	RoleMeta   = "meta"
	RoleBookie = "bookie"
	RoleBroker = "broker"
)

func roleRank(role string) int {
	switch role {
	case RoleMeta:
		return 0
	case RoleBookie:
		return 1
	case RoleBroker:
		return 2
	}
	return 3
}

// byRole groups nodes by role rank, in start order.
func byRole(nodes []*Node) [][]*Node {
	groups := map[int][]*Node{}
	for _, n := range nodes {
		r := roleRank(n.Spec().Role)
		groups[r] = append(groups[r], n)
	}
	ranks := make([]int, 0, len(groups))
	for r := range groups {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	out := make([][]*Node, 0, len(ranks))
	for _, r := range ranks {
		out = append(out, groups[r])
	}
	return out
}
