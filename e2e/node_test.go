package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/harness"
)

// nodeProcess is one `strata node` started directly by a test (not by up),
// through the test's fault harness, so the test can kill, freeze and
// restart it. It stands for one process: after it exits, starting the
// same node again gives a new nodeProcess.
type nodeProcess struct {
	n      *harness.Node
	report harness.Report
	done   <-chan struct{} // closed when this process has exited
}

// harnesses are the tests' fault harnesses, one per test that starts
// nodes (killed and closed at its cleanup).
var harnesses struct {
	sync.Mutex
	m map[*testing.T]*harness.Harness
}

// testHarness is t's harness, made on first use.
func testHarness(t *testing.T) *harness.Harness {
	t.Helper()
	harnesses.Lock()
	defer harnesses.Unlock()
	if h := harnesses.m[t]; h != nil {
		return h
	}
	return newTestHarness(t, nil)
}

// linkedHarness makes t's harness with links cutting the links between
// its regions (a *harness.Net); t must have started no node yet. Nodes
// then start in the Net's namespaces through startNodeSpec.
func linkedHarness(t *testing.T, links harness.Links) *harness.Harness {
	t.Helper()
	harnesses.Lock()
	defer harnesses.Unlock()
	if harnesses.m[t] != nil {
		t.Fatal("linkedHarness: the test already has a harness")
	}
	return newTestHarness(t, links)
}

// newTestHarness makes and registers t's harness; the caller holds
// harnesses.
func newTestHarness(t *testing.T, links harness.Links) *harness.Harness {
	if harnesses.m == nil {
		harnesses.m = map[*testing.T]*harness.Harness{}
	}
	h := harness.New(harness.Config{StartTimeout: 60 * time.Second, StopGrace: 10 * time.Second, Links: links})
	harnesses.m[t] = h
	t.Cleanup(func() {
		harnesses.Lock()
		delete(harnesses.m, t)
		harnesses.Unlock()
		nodes := h.Nodes()
		var wg sync.WaitGroup
		for _, n := range nodes { // SIGKILL: a test's nodes need no clean stop
			wg.Add(1)
			go func() { defer wg.Done(); _ = h.Kill(n.Spec().Region, n.Spec().ID) }()
		}
		wg.Wait()
		h.Close()
		if t.Failed() {
			for _, n := range nodes {
				b, _ := os.ReadFile(n.Spec().Log)
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s ---\n%s", filepath.Base(n.Spec().Log), b)
			}
		}
	})
	return h
}

// startNodeProcess runs `strata node` with args (naming --region and
// --id) through t's harness, waits for its one-line report, and kills it
// at cleanup. Its output goes to logPath.
func startNodeProcess(t *testing.T, logPath string, args ...string) *nodeProcess {
	t.Helper()
	spec := harness.SpecFromArgs(strataBin, args)
	spec.Log = logPath
	return startNodeSpec(t, spec)
}

// startNodeSpec starts spec (its Exe strataBin, its Log set) through t's
// harness, waits for its report, and kills it at cleanup.
func startNodeSpec(t *testing.T, spec harness.NodeSpec) *nodeProcess {
	t.Helper()
	n, err := testHarness(t).Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &nodeProcess{n: n, report: n.Report(), done: n.Done()}
}

// exited reports whether this process has exited.
func (p *nodeProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill SIGKILLs the process and waits for it.
func (p *nodeProcess) kill() {
	if p.exited() {
		return
	}
	_ = p.n.Signal(syscall.SIGKILL)
	<-p.done
}

// signal sends sig to the process (if it still runs) without waiting.
func (p *nodeProcess) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = p.n.Signal(sig)
	}
}

// pid is the process's id.
func (p *nodeProcess) pid() int { return p.report.PID }

// exitCode is the process's exit status once it has exited (-1 if a
// signal ended it).
func (p *nodeProcess) exitCode() int {
	<-p.done
	_, err := p.n.Exited()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// writeTopology writes src to dir/name and returns its path.
func writeTopology(t *testing.T, dir, name, src string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// refusedStart runs `strata node` with args through a harness of its own
// (the node may have the region and id of one that runs) and expects it
// to exit before it is ready. It returns the harness's error, which
// carries the end of the node's log (logPath); a node that became ready
// fails the test.
func refusedStart(t *testing.T, logPath string, args ...string) string {
	t.Helper()
	h := harness.New(harness.Config{StartTimeout: time.Minute})
	defer h.Close()
	spec := harness.SpecFromArgs(strataBin, args)
	spec.Log = logPath
	if _, err := h.Start(spec); err != nil {
		return err.Error()
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("node %v started, want it refused:\n%s", args, b)
	return ""
}
