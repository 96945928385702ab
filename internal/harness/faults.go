package harness

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
)

// Faults is what drills, benchmarks and e2e tests do to a running mesh.
// A *Harness (in this process, through h.Faults()) and *Remote (a `strata up` elsewhere, over
// its fault socket) implement it. Region and node names are the
// topology's; unknown ones are ErrUnknownNode.
type Faults interface {
	// Kill sends SIGKILL and returns when the process has exited (nil
	// if it had already exited).
	Kill(region, id string) error
	// Freeze sends SIGSTOP and returns once the kernel shows the process
	// stopped: it holds its sockets and locks but runs nothing.
	// ErrNotRunning if it has exited.
	Freeze(region, id string) error
	// Thaw sends SIGCONT. ErrNotRunning if it has exited.
	Thaw(region, id string) error
	// Restart starts the node again with the same spec (same data, same
	// seeds) and waits for its ready report; a live (or frozen) node is
	// killed first.
	Restart(region, id string) error
	// The region forms act on every node of the region, in parallel;
	// RestartRegion kills them all, then starts meta nodes, then
	// bookies, then brokers (each role in parallel).
	KillRegion(region string) error
	FreezeRegion(region string) error
	ThawRegion(region string) error
	RestartRegion(region string) error
	// Cut cuts the link between regions a and b only (both ways); Heal
	// restores it. They delegate to Config.Links: ErrNoNetwork without.
	Cut(a, b string) error
	Heal(a, b string) error
	// Nodes lists every node with its state.
	Nodes() ([]NodeInfo, error)
}

// NodeInfo is one node as Faults.Nodes lists it.
type NodeInfo struct {
	Region string `json:"region"`
	ID     string `json:"id"`
	Role   string `json:"role"`
	PID    int    `json:"pid"`
	// State is running, frozen or exited.
	State  string `json:"state"`
	Report Report `json:"report"`
	// Exit says how the process ended ("signal: killed"); "" while it
	// runs. Intended is true when the harness ended it (a fault command,
	// a restart or a stop), false for a crash.
	Exit     string `json:"exit,omitempty"`
	Intended bool   `json:"intended,omitempty"`
}

// Faults returns h as a Faults. (*Harness has every Faults method but
// Nodes, whose name it uses for its []*Node; the Faults form of Nodes is
// NodeInfos.)
func (h *Harness) Faults() Faults { return localFaults{h} }

type localFaults struct{ *Harness }

func (l localFaults) Nodes() ([]NodeInfo, error) { return l.NodeInfos(), nil }

var _ Faults = localFaults{}

// Kill sends SIGKILL to region/id and waits for it to exit.
func (h *Harness) Kill(region, id string) error {
	n, err := h.node(region, id)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	n.kill()
	return nil
}

// Freeze sends SIGSTOP to region/id.
func (h *Harness) Freeze(region, id string) error {
	return h.signalNode(region, id, syscall.SIGSTOP)
}

// Thaw sends SIGCONT to region/id.
func (h *Harness) Thaw(region, id string) error {
	return h.signalNode(region, id, syscall.SIGCONT)
}

func (h *Harness) signalNode(region, id string, sig syscall.Signal) error {
	n, err := h.node(region, id)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	return n.signal(sig)
}

// Restart kills region/id if it runs, starts it again with its spec and
// waits for the ready report.
func (h *Harness) Restart(region, id string) error {
	n, err := h.node(region, id)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	return h.restart(n)
}

// restart is Restart with n.op held.
func (h *Harness) restart(n *Node) error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return ErrClosed
	}
	n.kill()
	return h.run(n)
}

// KillRegion kills every node of region, in parallel.
func (h *Harness) KillRegion(region string) error {
	return h.eachInRegion(region, func(n *Node) error { n.kill(); return nil })
}

// FreezeRegion sends SIGSTOP to every node of region. Nodes that have
// exited are skipped; ErrNotRunning only if none runs.
func (h *Harness) FreezeRegion(region string) error {
	return h.signalRegion(region, syscall.SIGSTOP)
}

// ThawRegion sends SIGCONT to every node of region, like FreezeRegion.
func (h *Harness) ThawRegion(region string) error {
	return h.signalRegion(region, syscall.SIGCONT)
}

func (h *Harness) signalRegion(region string, sig syscall.Signal) error {
	var mu sync.Mutex
	live := 0
	err := h.eachInRegion(region, func(n *Node) error {
		err := n.signal(sig)
		if errors.Is(err, ErrNotRunning) {
			return nil
		}
		if err == nil {
			mu.Lock()
			live++
			mu.Unlock()
		}
		return err
	})
	if err == nil && live == 0 {
		return fmt.Errorf("%w: no node of region %s runs", ErrNotRunning, region)
	}
	return err
}

// RestartRegion kills every node of region, then starts meta nodes,
// bookies and brokers in that order, each role in parallel, and waits for
// their ready reports. It stops at the first role that fails to start.
func (h *Harness) RestartRegion(region string) error {
	nodes, err := h.region(region)
	if err != nil {
		return err
	}
	for _, n := range nodes { // in a fixed order, so two region operations cannot deadlock
		n.op.Lock()
	}
	defer func() {
		for _, n := range nodes {
			n.op.Unlock()
		}
	}()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.kill() }()
	}
	wg.Wait()
	for _, group := range byRole(nodes) {
		errs := make([]error, len(group))
		for i, n := range group {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = h.restart(n) }()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// eachInRegion runs f on every node of region in parallel (each under its
// op lock) and joins the errors.
func (h *Harness) eachInRegion(region string, f func(*Node) error) error {
	nodes, err := h.region(region)
	if err != nil {
		return err
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.op.Lock()
			defer n.op.Unlock()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Cut cuts the link between regions a and b through Config.Links.
func (h *Harness) Cut(a, b string) error {
	if h.cfg.Links == nil {
		return ErrNoNetwork
	}
	return h.cfg.Links.Cut(a, b)
}

// Heal restores the link between a and b through Config.Links.
func (h *Harness) Heal(a, b string) error {
	if h.cfg.Links == nil {
		return ErrNoNetwork
	}
	return h.cfg.Links.Heal(a, b)
}

// NodeInfos lists every node with its state, in first-start order.
func (h *Harness) NodeInfos() []NodeInfo {
	var out []NodeInfo
	for _, n := range h.Nodes() {
		out = append(out, n.Info())
	}
	return out
}
