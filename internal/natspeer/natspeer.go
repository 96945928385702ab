package natspeer

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvBinary names the environment variable that, when set, is the path of
// the nats-server to run instead of building one.
const EnvBinary = "STRATA_NATS_SERVER"

// EnvCLI names the environment variable that, when set, is the path of
// the nats CLI to run instead of building one.
const EnvCLI = "STRATA_NATS_CLI"

const (
	startTimeout = 15 * time.Second // until the server answers with INFO
	stopTimeout  = 10 * time.Second // SIGTERM to exit, then SIGKILL
	logTail      = 40               // server log lines shown when a test fails
)

// peerBinary is one executable of the tools module, built at most once
// per test binary.
type peerBinary struct {
	env, pkg, name string
	once           sync.Once
	path           string
	err            error
}

var (
	serverBin = &peerBinary{env: EnvBinary, pkg: "github.com/nats-io/nats-server/v2", name: "nats-server"}
	cliBin    = &peerBinary{env: EnvCLI, pkg: "github.com/nats-io/natscli/nats", name: "nats"}
)

// get returns the binary's path: the environment variable's value when
// set, else the package built from the tools module on first use.
func (b *peerBinary) get(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if p := os.Getenv(b.env); p != "" {
			b.path = p
			return
		}
		_, file, _, _ := runtime.Caller(0)
		tools := filepath.Join(filepath.Dir(file), "..", "..", "tools")
		dir, err := os.MkdirTemp("", "strata-natspeer-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		cmd.Dir = tools
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("natspeer: building %s in %s: %v\n%s", b.pkg, tools, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Binary returns the path of the reference nats-server, building it on
// first use in this test binary. STRATA_NATS_SERVER overrides the path.
func Binary(t testing.TB) string {
	t.Helper()
	return serverBin.get(t)
}

// CLI returns the path of the pinned nats CLI (natscli, tools/go.mod),
// building it on first use in this test binary (under a minute cold).
// STRATA_NATS_CLI overrides the path. Run it with a HOME of the test's
// own and --no-context, so no context of the machine's user applies.
func CLI(t testing.TB) string {
	t.Helper()
	return cliBin.get(t)
}

// Server is a running reference nats-server.
type Server struct {
	addr     string // 127.0.0.1:port, fixed for the Server's life
	confPath string
	logPath  string

	mu   sync.Mutex
	proc *process // the current process; nil while stopped
}

// process is one nats-server process; exited is closed once it has been
// waited for.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// URL is the server's client URL, nats://127.0.0.1:port.
func (s *Server) URL() string { return "nats://" + s.addr }

// Addr is the server's client address, 127.0.0.1:port.
func (s *Server) Addr() string { return s.addr }

// Start runs the reference nats-server on a free loopback port with the
// given extra config lines (nats-server config syntax, e.g.
// `ping_interval: "300ms"` or `jetstream: {store_dir: "/tmp/x"}`), and
// stops it when the test ends. If the server's log is needed to explain a
// failure, its tail is logged then.
func Start(t testing.TB, config ...string) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := FreePort(t)
		s := &Server{
			addr:     fmt.Sprintf("127.0.0.1:%d", port),
			confPath: filepath.Join(dir, "nats.conf"),
			logPath:  filepath.Join(dir, "nats.log"),
		}
		conf := fmt.Sprintf("listen: %q\n%s\n", s.addr, strings.Join(config, "\n"))
		if err := os.WriteFile(s.confPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if lastErr = s.start(bin); lastErr != nil {
			continue // most likely the port was taken in between: pick another
		}
		t.Cleanup(func() {
			s.stop()
			if t.Failed() {
				t.Logf("reference nats-server %s log (tail):\n%s", s.addr, s.tail())
			}
		})
		return s
	}
	t.Fatalf("natspeer: reference nats-server did not start: %v", lastErr)
	return nil
}

// Restart stops the server gracefully (SIGTERM, waiting for it to exit)
// and starts it again on the same port with the same config. It returns
// once the new process answers with INFO; JetStream has recovered its
// store by then (nats-server listens only after recovery).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.stop()
	var err error
	// The port is ours, but a client may still hold a connection to it in
	// TIME_WAIT; nats-server sets SO_REUSEADDR, so a failure here is rare.
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.start(Binary(t)); err == nil {
			return
		}
	}
	t.Fatalf("natspeer: restarting %s: %v\nlog (tail):\n%s", s.addr, err, s.tail())
}

// start launches the process and waits until it answers.
func (s *Server) start(bin string) error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, "-c", s.confPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	if err := waitListening(s.addr, startTimeout, p.exited); err != nil {
		_ = cmd.Process.Kill()
		<-p.exited
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// stop sends SIGTERM and waits for the exit, killing the process if it
// takes longer than stopTimeout. It is a no-op when stopped.
func (s *Server) stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// tail returns the last lines of the server's log.
func (s *Server) tail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > logTail {
		lines = lines[len(lines)-logTail:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WaitListening waits up to d until addr accepts a connection and sends an
// INFO line (any NATS server, Strata's included).
func WaitListening(addr string, d time.Duration) error {
	return waitListening(addr, d, nil)
}

// waitListening is WaitListening that also gives up as soon as exited is
// closed (the process died).
func waitListening(addr string, d time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, rerr := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if rerr == nil && strings.HasPrefix(line, "INFO ") {
				return nil
			}
			err = rerr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("natspeer: %s not listening after %v: %v", addr, d, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("natspeer: the server for %s exited before listening", addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
