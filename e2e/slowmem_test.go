package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
)

const slowRegion = `mesh: e2e-slowmem
regions:
  - name: solo
    brokers: 1
    bookies: 1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
`

// slowRSSBound is how far a broker process's resident memory may rise
// above its idle figure under TestSlowConsumersBrokerRSS's load: the
// broker's outbound budget (MaxOutboundTotal, 128 MiB by default) plus
// 128 MiB for the Go runtime's headroom over it.
const slowRSSBound = 256 << 20

// A real broker node (GOGC and memory limit as `strata node` sets them)
// with five subscribers that never read and one publisher flooding 600 MiB
// (× STRATA_E2E_SCALE): its RSS stays within slowRSSBound of idle, the
// publisher gets through, and the slow subscribers are closed.
//
// With STRATA_SLOWMEM_NATS_SERVER=path/to/nats-server (`make peers` builds
// bin/nats-server), the same load also runs against that server and its
// figures are logged beside the broker's (docs/perf.md); they are not
// checked: under this load the reference's RSS rises further than the bound.
func TestSlowConsumersBrokerRSS(t *testing.T) {
	dir := t.TempDir()
	topo := writeTopology(t, dir, "slow.yaml", slowRegion)
	common := []string{"--topology", topo, "--region", "solo", "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "warn"}
	meta := startNodeProcess(t, filepath.Join(dir, "meta.log"), append(common, "--id", "meta")...)
	join := []string{"--etcd", meta.report.Etcd, "--join", meta.report.SerfLAN}
	startNodeProcess(t, filepath.Join(dir, "k1.log"), append(append(append([]string{}, common...), "--id", "k1"), join...)...)
	b1 := startNodeProcess(t, filepath.Join(dir, "b1.log"), append(append(append([]string{}, common...), "--id", "b1"), join...)...)
	addr := natsHostPort(t, b1.report.NATS)
	total := scale(600) << 20

	r := slowFlood(t, addr, b1.pid(), 5, total)
	t.Logf("strata broker: %s", r)
	if r.peak-r.idle > slowRSSBound {
		t.Errorf("broker RSS rose %d MiB above idle, bound %d MiB", (r.peak-r.idle)>>20, slowRSSBound>>20)
	}

	if bin := os.Getenv("STRATA_SLOWMEM_NATS_SERVER"); bin != "" {
		ref := startNATSServer(t, bin)
		r := slowFlood(t, ref.addr, ref.cmd.Process.Pid, 5, total)
		t.Logf("nats-server (for comparison, not checked): %s", r)
	}
}

// natsHostPort turns a node report's NATS URL into host:port.
func natsHostPort(t *testing.T, u string) string {
	t.Helper()
	if !strings.Contains(u, "://") {
		return u
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// floodResult is what slowFlood measured: resident memory (bytes) before
// the flood and its peak while the flood ran, and the flood's size and
// duration.
type floodResult struct {
	idle, peak uint64
	sent       int
	took       time.Duration
}

func (r floodResult) String() string {
	return fmt.Sprintf("flood %d MiB in %v; RSS idle %d MiB, peak %d MiB (+%d MiB)",
		r.sent>>20, r.took.Round(time.Millisecond), r.idle>>20, r.peak>>20, (r.peak-r.idle)>>20)
}

// slowFlood connects `slow` subscribers to subject "flood" at addr that
// never read (4 KiB receive buffers), floods total bytes of 16 KiB
// messages from one publisher, waits for the server's PONG after them and
// for every slow subscriber to be closed, and samples pid's VmRSS
// throughout.
func slowFlood(t *testing.T, addr string, pid, slow, total int) floodResult {
	t.Helper()
	var subs []net.Conn
	for i := 0; i < slow; i++ {
		subs = append(subs, testutil.StalledSubscriber(t, addr, "flood"))
	}
	var r floodResult
	r.idle = vmRSS(t, pid)
	stopSampling := testutil.SamplePeak(10*time.Millisecond, func() (uint64, bool) {
		v, err := readVmRSS(pid)
		return v, err == nil
	})

	pub := testutil.DialSmallWindow(t, addr)
	pr := bufio.NewReader(pub)
	_ = pub.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := pr.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 16<<10)
	frame := append([]byte("PUB flood "+strconv.Itoa(len(payload))+"\r\n"), payload...)
	frame = append(frame, "\r\n"...)
	perBatch := (1 << 20) / len(frame)
	batch := bytes.Repeat(frame, perBatch)
	start := time.Now()
	if _, err := pub.Write([]byte("CONNECT {\"verbose\":false,\"pedantic\":false}\r\n")); err != nil {
		t.Fatal(err)
	}
	for r.sent < total {
		if _, err := pub.Write(batch); err != nil {
			t.Fatalf("publisher cut off after %d MiB: %v", r.sent>>20, err)
		}
		r.sent += len(batch)
	}
	if _, err := pub.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	for {
		l, err := pr.ReadString('\n')
		if err != nil {
			t.Fatalf("publisher's PONG: %v", err)
		}
		if l == "PONG\r\n" {
			break
		}
		if strings.HasPrefix(l, "-ERR") {
			t.Fatalf("publisher got %q", l)
		}
	}
	r.took = time.Since(start)
	// Every slow subscriber is closed by the server: reading what the
	// kernel holds ends in EOF or a reset, not a timeout.
	for i, c := range subs {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("slow subscriber %d still open after the flood", i)
			}
		}
	}
	r.peak = max(stopSampling(), r.idle)
	return r
}

// readVmRSS returns pid's resident set size in bytes (/proc/PID/status).
func readVmRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func vmRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	v, err := readVmRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// natsServerProcess is a reference nats-server on a free loopback port.
type natsServerProcess struct {
	cmd  *exec.Cmd
	addr string
}

func startNATSServer(t *testing.T, bin string) *natsServerProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	p := &natsServerProcess{cmd: exec.Command(bin, "-a", "127.0.0.1", "-p", port), addr: addr}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	testutil.Eventually(t, "nats-server listening", 30*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}
