package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
)

// nodeProcess is one `strata node` started directly by a test (not by up),
// so the test can kill and restart it.
type nodeProcess struct {
	cmd    *exec.Cmd
	report meshfile.Node
	done   chan struct{}
}

// startNodeProcess runs `strata node` with args, waits for its one-line
// report, and kills it at cleanup. Its stderr goes to logPath.
func startNodeProcess(t *testing.T, logPath string, args ...string) *nodeProcess {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p := &nodeProcess{cmd: exec.Command(strataBin, append([]string{"node"}, args...)...), done: make(chan struct{})}
	p.cmd.Stderr = logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reports := make(chan meshfile.Node, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			var rep meshfile.Node
			if json.Unmarshal(sc.Bytes(), &rep) == nil {
				reports <- rep
			}
		}
		for sc.Scan() {
		}
	}()
	go func() {
		p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("--- %s ---\n%s", filepath.Base(logPath), b)
		}
	})
	select {
	case p.report = <-reports:
		return p
	case <-p.done:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("node %v exited before its report:\n%s", args, b)
	case <-time.After(60 * time.Second):
		p.kill()
		t.Fatalf("node %v gave no report within 60s", args)
	}
	return nil
}

// kill SIGKILLs the process and waits for it.
func (p *nodeProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.done
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
