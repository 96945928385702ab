package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
)

// process is one running node process.
type process struct {
	region, id, role string
	cmd              *exec.Cmd
	logPath          string
	report           meshfile.Node
	exited           chan struct{} // closed when the process has exited
	exitErr          error         // valid after exited is closed
}

func (p *process) name() string { return p.region + "/" + p.id }

// spawner starts child processes from one locked OS thread that lives as
// long as the supervisor: Linux delivers the parent-death signal when the
// *thread* that forked a child exits, so forking from arbitrary Go threads
// could kill children early if such a thread ever ended.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd  *exec.Cmd
	resp chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after every child is gone
		defer close(s.done)
		for r := range s.reqs {
			r.resp <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	resp := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, resp: resp}
	return <-resp
}

func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}

// startNode starts `strata node` with args, logs to logPath, and waits up to
// timeout for its one-line JSON report on stdout. If the process exits or
// times out first, the error includes the tail of its log.
func startNode(sp *spawner, exe string, args, env []string, region, id, role, logPath string, timeout time.Duration) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := sp.start(cmd); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s/%s: %w", region, id, err)
	}
	p := &process{region: region, id: id, role: role, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	reports := make(chan meshfile.Node, 1)
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // read the report, then copy the rest of stdout into the log
		defer readers.Done()
		br := bufio.NewReader(stdout)
		line, err := br.ReadString('\n')
		var rep meshfile.Node
		if err == nil && json.Unmarshal([]byte(line), &rep) == nil {
			reports <- rep
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
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case p.report = <-reports:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("node %s exited before it was ready (%v); last log lines:\n%s", p.name(), p.exitErr, tail(logPath, 15))
	case <-timer.C:
		p.kill()
		<-p.exited
		return nil, fmt.Errorf("node %s was not ready within %v; last log lines:\n%s", p.name(), timeout, tail(logPath, 15))
	}
}

// terminate sends SIGTERM and waits up to grace for the exit, then SIGKILL.
// It reports whether the node stopped within grace.
func (p *process) terminate(grace time.Duration) bool {
	select {
	case <-p.exited:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		p.kill()
		<-p.exited
		return false
	}
}

func (p *process) kill() { _ = p.cmd.Process.Kill() }

// exitDescription says how a process ended, e.g. "exit status 1" or
// "signal: killed".
func (p *process) exitDescription() string {
	if p.exitErr == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.exitErr, &ee) {
		return ee.String()
	}
	return p.exitErr.Error()
}

// tail returns the last n lines of a file (for error messages).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
