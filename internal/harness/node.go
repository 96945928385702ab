package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NodeSpec says how to start one node: `Exe node Args...`.
type NodeSpec struct {
	// Region and ID name the node; (Region, ID) is unique in a harness.
	// Role is meta, bookie or broker (RestartRegion orders by it; other
	// values start last); empty, it is taken from the ready report.
	Region, ID, Role string
	// Exe is the strata binary.
	Exe string
	// Args are the `strata node` arguments (without "node").
	Args []string
	// Env is added to the environment (after Config.Env), KEY=VALUE.
	Env []string
	// Log is the file receiving the node's stdout (after the ready
	// report) and stderr; appended to, so restarts keep earlier output.
	// Empty: os.DevNull.
	Log string
	// Netns is the network namespace to run in ("" = ours): the node is
	// run as `ip netns exec Netns Exe node Args...` (ip execs the node, so
	// the PID is the node's).
	Netns string
}

// SpecFromArgs is the spec of `exe node args...` whose Region, ID and Role
// are read from the arguments' --region, --id and --role flags (the
// `strata node` flags; without --role the role is left empty, and Start
// takes it from the ready report).
// A leading "node" in args is dropped.
func SpecFromArgs(exe string, args []string) NodeSpec {
	if len(args) > 0 && args[0] == "node" {
		args = args[1:]
	}
	s := NodeSpec{Exe: exe, Args: append([]string(nil), args...)}
	for i := 0; i < len(args); i++ {
		flag, val, eq := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !eq && i+1 < len(args) {
			val = args[i+1]
		}
		switch flag {
		case "region":
			s.Region = val
		case "id":
			s.ID = val
		case "role":
			s.Role = val
		}
	}
	return s
}

// Name is "region/id".
func (s NodeSpec) Name() string { return s.Region + "/" + s.ID }

// Command is the node's full command line (argv).
func (s NodeSpec) Command() []string {
	argv := append([]string{s.Exe, "node"}, s.Args...)
	if s.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", s.Netns}, argv...)
	}
	return argv
}

// Report is the node's ready report: the one line of JSON a node prints on
// stdout once it serves (region.Node.Endpoints; the same fields as a node
// entry of mesh.json). Addresses are host:port, URLs carry their scheme;
// empty fields are services the node does not run.
type Report struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	PID     int    `json:"pid,omitempty"`
	Etcd    string `json:"etcd,omitempty"`
	NATS    string `json:"nats,omitempty"`
	GRPC    string `json:"grpc,omitempty"`
	Admin   string `json:"admin,omitempty"`
	SerfLAN string `json:"serf_lan,omitempty"`
	SerfWAN string `json:"serf_wan,omitempty"`
	// Failover is a broker's failover listeners by home region
	// (meshfile.Node.Failover).
	Failover map[string]string `json:"failover,omitempty"`
}

// ParseReport decodes a ready report line. It fails on anything that is
// not one JSON object with the node's id and role.
func ParseReport(line []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(line, &r); err != nil {
		return Report{}, fmt.Errorf("harness: ready report is not JSON: %w", err)
	}
	if r.ID == "" || r.Role == "" {
		return Report{}, errors.New("harness: ready report lacks the node's id or role")
	}
	return r, nil
}

// Node states, as NodeInfo.State gives them.
const (
	StateRunning = "running"
	StateFrozen  = "frozen"
	StateExited  = "exited"
)

// Node is one node of the harness: its spec and its current process.
// After Restart the same *Node stands for the new process.
type Node struct {
	spec NodeSpec
	h    *Harness

	op sync.Mutex // serialises fault operations on this node

	mu sync.Mutex
	p  *proc
}

// proc is one process of a node.
type proc struct {
	cmd      *exec.Cmd
	report   Report
	exited   chan struct{} // closed when the process has exited
	exitErr  error         // valid after exited is closed
	frozen   bool          // SIGSTOP sent, no SIGCONT since (under Node.mu)
	intended bool          // the harness ended it (under Node.mu)
}

func (n *Node) cur() *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p
}

// Spec is the spec the node was started with.
func (n *Node) Spec() NodeSpec {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.spec
}

// Name is "region/id".
func (n *Node) Name() string { return n.Spec().Name() }

// PID is the current process's id.
func (n *Node) PID() int { return n.cur().cmd.Process.Pid }

// Report is the current process's ready report.
func (n *Node) Report() Report { return n.cur().report }

// Done is closed when the current process has exited.
func (n *Node) Done() <-chan struct{} { return n.cur().exited }

// Exited reports whether the current process has exited and, if so, how
// (nil for exit status 0; an *exec.ExitError otherwise).
func (n *Node) Exited() (bool, error) {
	p := n.cur()
	select {
	case <-p.exited:
		return true, p.exitErr
	default:
		return false, nil
	}
}

// Wait waits for the current process to exit and returns Exited's error.
func (n *Node) Wait() error {
	p := n.cur()
	<-p.exited
	return p.exitErr
}

// Intended reports whether the current process was ended by the harness
// (Kill, Restart, Stop, Close) rather than dying by itself. It is set
// before the signal is sent, so OnExit sees it.
func (n *Node) Intended() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.p.intended
}

// State is running, frozen or exited.
func (n *Node) State() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.p.exited:
		return StateExited
	default:
	}
	if n.p.frozen {
		return StateFrozen
	}
	return StateRunning
}

// ExitDescription says how the current process ended, e.g. "exit status
// 1" or "signal: killed"; "" while it runs.
func (n *Node) ExitDescription() string {
	done, err := n.Exited()
	if !done {
		return ""
	}
	return describeExit(err)
}

func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	return err.Error()
}

// Info is the node's NodeInfo.
func (n *Node) Info() NodeInfo {
	st := n.State()
	p := n.cur()
	s := n.Spec()
	return NodeInfo{Region: s.Region, ID: s.ID, Role: s.Role, PID: p.cmd.Process.Pid, State: st,
		Report: p.report, Exit: n.ExitDescription(), Intended: n.Intended()}
}

// Signal sends sig to the current process without waiting for its effect
// (except SIGSTOP, which returns once the process is stopped: see Freeze);
// ErrNotRunning once it has exited. SIGKILL and SIGTERM mark the exit as
// Intended; SIGSTOP and SIGCONT set the frozen state. Prefer the Faults
// methods; Signal is for tests that need a signal they do not wrap (a
// SIGTERM whose handling they time, say).
func (n *Node) Signal(sig syscall.Signal) error { return n.signal(sig) }

// signal sends sig to the current process; ErrNotRunning once it exited.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	p := n.p
	select {
	case <-p.exited:
		n.mu.Unlock()
		return fmt.Errorf("%w: %s (%s)", ErrNotRunning, n.Name(), describeExit(p.exitErr))
	default:
	}
	switch sig {
	case syscall.SIGSTOP:
		p.frozen = true
	case syscall.SIGCONT:
		p.frozen = false
	case syscall.SIGKILL, syscall.SIGTERM:
		p.intended = true
	}
	n.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: signal %v to %s: %w", sig, n.Name(), err)
	}
	if sig == syscall.SIGSTOP {
		waitStopped(p)
	}
	return nil
}

// waitStopped waits (up to 2 s) until the kernel shows p stopped, so that
// Freeze returns once the node runs nothing: SIGSTOP is delivered
// asynchronously.
func waitStopped(p *proc) {
	path := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 0 && (f[0] == "T" || f[0] == "t") {
				return
			}
		}
		select {
		case <-p.exited:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// kill sends SIGKILL (unless the process has exited) and waits for the
// exit.
func (n *Node) kill() {
	_ = n.signal(syscall.SIGKILL)
	<-n.cur().exited
}

// terminate sends SIGTERM (and SIGCONT, so a frozen node sees it) and
// waits up to grace for the exit, then SIGKILL. It reports whether the
// node stopped within grace.
func (n *Node) terminate(grace time.Duration) bool {
	p := n.cur()
	if n.signal(syscall.SIGTERM) != nil {
		return true // already exited
	}
	_ = n.signal(syscall.SIGCONT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		n.kill()
		return false
	}
}

// launch starts one process of spec and waits up to timeout for its ready
// report. On failure the process is gone and the error includes the tail
// of its log.
func (h *Harness) launch(spec NodeSpec) (*proc, error) {
	logPath := spec.Log
	if logPath == "" {
		logPath = os.DevNull
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("harness: %s: log: %w", spec.Name(), err)
	}
	argv := spec.Command()
	cmd := exec.Command(argv[0], argv[1:]...)
	if env := append(append([]string(nil), h.cfg.Env...), spec.Env...); len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := h.sp.start(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("harness: start %s: %w", spec.Name(), err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	reports := make(chan Report, 1)
	bad := make(chan error, 1)
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // read the report, then copy the rest of stdout into the log
		defer readers.Done()
		br := bufio.NewReader(stdout)
		line, err := br.ReadString('\n')
		if err == nil {
			rep, perr := ParseReport([]byte(line))
			if perr == nil {
				reports <- rep
			} else {
				bad <- fmt.Errorf("%w: %q", perr, strings.TrimSpace(line))
				fmt.Fprint(logf, line)
			}
		} else if line != "" {
			fmt.Fprint(logf, line)
		}
		_, _ = io.Copy(logf, br)
	}()
	go func() {
		readers.Wait() // Wait must not run before the pipe is drained
		p.exitErr = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	timer := time.NewTimer(h.cfg.StartTimeout)
	defer timer.Stop()
	fail := func(why string) (*proc, error) {
		_ = cmd.Process.Kill()
		<-p.exited
		return nil, fmt.Errorf("harness: node %s %s; last log lines (%s):\n%s", spec.Name(), why, logPath, tail(logPath, 15))
	}
	select {
	case p.report = <-reports:
		return p, nil
	case err := <-bad:
		return fail(fmt.Sprintf("printed no ready report (%v)", err))
	case <-p.exited:
		return nil, fmt.Errorf("harness: node %s exited before it was ready (%s); last log lines (%s):\n%s",
			spec.Name(), describeExit(p.exitErr), logPath, tail(logPath, 15))
	case <-timer.C:
		return fail(fmt.Sprintf("was not ready within %v", h.cfg.StartTimeout))
	}
}

// tail returns the last n lines of a file (for error messages).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
