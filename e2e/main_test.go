package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/status"
	"github.com/stratamesh/strata/internal/testutil"
)

// strataBin is the binary built by TestMain.
var strataBin string

func TestMain(m *testing.M) {
	if spec := os.Getenv("STRATA_E2E_LEDGER_WRITER"); spec != "" {
		ledgerWriterMain(spec) // this binary, re-run as a ledger writer process
		return
	}
	dir, err := os.MkdirTemp("", "strata-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin = filepath.Join(dir, "strata")
	build := exec.Command("go", "build", "-o", strataBin, "github.com/stratamesh/strata/cmd/strata")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building strata:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// strata runs a short strata command and returns its stdout, stderr and
// exit code.
func strata(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("strata %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

// upProcess is a running `strata up`.
type upProcess struct {
	cmd     *exec.Cmd
	dataDir string
	mu      sync.Mutex
	out     bytes.Buffer
	done    chan struct{}
	exitErr error
}

// startUp runs `strata up` with args; the process dies with the test
// binary (parent-death signal), and is killed at cleanup if still running.
func startUp(t *testing.T, dataDir string, args ...string) *upProcess {
	t.Helper()
	u := &upProcess{dataDir: dataDir, done: make(chan struct{})}
	u.cmd = exec.Command(strataBin, append([]string{"up", "--data-dir", dataDir}, args...)...)
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	u.cmd.Stdout, u.cmd.Stderr = pw, pw
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			u.mu.Lock()
			u.out.Write(buf[:n])
			u.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		u.exitErr = u.cmd.Wait()
		pw.Close()
		close(u.done)
	}()
	t.Cleanup(func() {
		select {
		case <-u.done:
		default:
			u.cmd.Process.Kill()
			<-u.done
		}
		if t.Failed() {
			t.Logf("strata up output:\n%s", u.output())
			dumpLogs(t, dataDir)
		}
	})
	return u
}

func (u *upProcess) output() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.out.String()
}

func (u *upProcess) exited() bool {
	select {
	case <-u.done:
		return true
	default:
		return false
	}
}

// dumpLogs prints the tail of every node log (on failure only).
func dumpLogs(t *testing.T, dataDir string) {
	logs, _ := filepath.Glob(filepath.Join(dataDir, "logs", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("--- %s ---\n%s", filepath.Base(l), b)
	}
}

// meshStatus runs `strata status --json` and decodes it; ok is false when the
// command failed (for example before mesh.json exists).
func meshStatus(t *testing.T, dataDir string) (*meshfile.File, bool) {
	t.Helper()
	out, _, code := strata(t, "status", "--json", "--data-dir", dataDir)
	if code != 0 {
		return nil, false
	}
	var f meshfile.File
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	return &f, true
}

// processGone reports whether pid no longer exists.
func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// waitAlive waits until `strata status` shows every node of the mesh
// alive in its LAN pool and every broker alive in each region's WAN view,
// failing early if up exits. It returns that status and the time taken.
func waitAlive(t *testing.T, up *upProcess, what string) (*meshfile.File, time.Duration) {
	t.Helper()
	var live *meshfile.File
	took := testutil.Eventually(t, what, 60*time.Second, func() bool {
		if up.exited() {
			t.Fatalf("strata up exited early: %v", up.exitErr)
		}
		f, ok := meshStatus(t, up.dataDir)
		if ok && status.AllAlive(f) {
			live = f
			return true
		}
		return false
	})
	return live, took
}
