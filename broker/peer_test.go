package broker

import (
	"bufio"
	"context"
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

// The reference nats-server (v2.15.3, pinned in tools/go.mod) is built
// once per test binary from the tools module and run as a subprocess: the
// oracle of the differential tests. It never enters Strata's module.

var (
	peerOnce sync.Once
	peerBin  string
	peerErr  error
)

// natsServerBinary returns the path of the reference nats-server, building
// it on first use (about a minute cold, a second or two with a warm build
// cache). STRATA_NATS_SERVER overrides the path.
func natsServerBinary(t testing.TB) string {
	t.Helper()
	peerOnce.Do(func() {
		if p := os.Getenv("STRATA_NATS_SERVER"); p != "" {
			peerBin = p
			return
		}
		_, file, _, _ := runtime.Caller(0)
		tools := filepath.Join(filepath.Dir(file), "..", "tools")
		dir, err := os.MkdirTemp("", "strata-peer-")
		if err != nil {
			peerErr = err
			return
		}
		peerBin = filepath.Join(dir, "nats-server")
		cmd := exec.Command("go", "build", "-o", peerBin, "github.com/nats-io/nats-server/v2")
		cmd.Dir = tools
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			peerErr = fmt.Errorf("building the reference nats-server in %s: %v\n%s", tools, err, out)
		}
	})
	if peerErr != nil {
		t.Fatal(peerErr)
	}
	return peerBin
}

// refServer is a running reference nats-server.
type refServer struct {
	url  string
	addr string
	cmd  *exec.Cmd
}

// startRefServer runs the reference nats-server on a free loopback port
// with the given extra config lines (nats-server config syntax, e.g.
// "ping_interval: \"300ms\""), and stops it when the test ends.
func startRefServer(t testing.TB, config ...string) *refServer {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(t)
		conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\n%s\n", port, strings.Join(config, "\n"))
		cf := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", cf)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if err := waitListening(addr, 10*time.Second); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			lastErr = err
			continue
		}
		rs := &refServer{url: "nats://" + addr, addr: addr, cmd: cmd}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
		return rs
	}
	t.Fatalf("reference nats-server did not start: %v", lastErr)
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitListening waits until addr answers with an INFO line.
func waitListening(addr string, d time.Duration) error {
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
			return fmt.Errorf("%s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startBroker runs a Strata broker on a free loopback port for one test.
func startBroker(t testing.TB, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{ServerName: "test-" + t.Name(), ListenAddr: "127.0.0.1:0", Mesh: "m", Region: "r"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return s
}
