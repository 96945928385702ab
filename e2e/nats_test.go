package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/internal/testutil"
)

const natsRegion = `mesh: e2e-nats
regions:
  - name: solo
    brokers: 2
    bookies: 1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
`

// TestNATSAcrossTwoBrokers runs a region with two broker processes
// (`strata up`): a subscriber on b1 and a publisher on b2 exchange 100,000
// messages with headers, each arriving exactly once and byte for byte; a
// queue group with members on both brokers gets every message once; and
// `strata pub`/`strata sub` work against the running mesh.
func TestNATSAcrossTwoBrokers(t *testing.T) {
	dir := t.TempDir()
	topo := writeTopology(t, dir, "mesh.yaml", natsRegion)
	dataDir := filepath.Join(dir, "data")
	up := startUp(t, dataDir, "-f", topo)
	live, took := waitAlive(t, up, "the region alive")
	t.Logf("region alive after %v", took)
	b1, b2 := live.Node("solo", "b1").NATS, live.Node("solo", "b2").NATS
	if b1 == "" || b2 == "" || b1 == b2 {
		t.Fatalf("brokers' NATS URLs in mesh.json: %q %q", b1, b2)
	}
	if !strings.Contains(up.output(), "NATS: ") {
		t.Errorf("strata up did not print the region's NATS URLs:\n%s", up.output())
	}

	t.Run("pubsub-100k-with-headers", func(t *testing.T) { exactlyOnceAcross(t, b1, b2, scale(100_000)) })
	t.Run("queue-group-over-both-brokers", func(t *testing.T) { queueGroupAcross(t, b1, b2, scale(20_000)) })
	t.Run("strata-pub-sub", func(t *testing.T) { strataPubSub(t, dataDir) })
}

func mustConnect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// body is message i's payload: its index and bytes derived from it, of a
// length that varies with i.
func body(i int) []byte {
	b := make([]byte, 8+(i*37)%700)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < len(b); j++ {
		b[j] = byte(i*31 + j)
	}
	return b
}

// waitRoute publishes probes on subject from pub until sub saw one: the
// subscriber's interest has crossed the region's internal link.
func waitRoute(t *testing.T, pub *nats.Conn, subject string, seen *atomic.Int64) {
	t.Helper()
	took := testutil.Eventually(t, "interest crossing brokers", 30*time.Second, func() bool {
		_ = pub.Publish(subject, []byte("probe"))
		_ = pub.Flush()
		return seen.Load() > 0
	})
	t.Logf("interest crossed after %v", took)
}

func exactlyOnceAcross(t *testing.T, subURL, pubURL string, n int) {
	sc, pc := mustConnect(t, subURL), mustConnect(t, pubURL)
	var probes atomic.Int64
	got := make([]int32, n)
	var bad atomic.Int64
	var firstBad atomic.Value
	var total atomic.Int64
	sub, err := sc.Subscribe("e2e.data.>", func(m *nats.Msg) {
		if m.Subject == "e2e.data.probe" {
			probes.Add(1)
			return
		}
		if len(m.Data) < 8 {
			bad.Add(1)
			return
		}
		i := int(binary.BigEndian.Uint64(m.Data))
		ok := i >= 0 && i < n && bytes.Equal(m.Data, body(i)) &&
			m.Subject == fmt.Sprintf("e2e.data.%d", i%10) &&
			m.Header.Get("Seq") == fmt.Sprint(i) && m.Header.Get("X-Case-Kept") == "Yes"
		if !ok {
			if bad.Add(1) == 1 {
				firstBad.Store(fmt.Sprintf("subject %s header %v len %d", m.Subject, m.Header, len(m.Data)))
			}
			return
		}
		atomic.AddInt32(&got[i], 1)
		total.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := sc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, pc, "e2e.data.probe", &probes)
	start := time.Now()
	for i := 0; i < n; i++ {
		m := nats.NewMsg(fmt.Sprintf("e2e.data.%d", i%10))
		m.Data = body(i)
		m.Header = nats.Header{"Seq": []string{fmt.Sprint(i)}, "X-Case-Kept": []string{"Yes"}}
		if err := pc.PublishMsg(m); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := pc.FlushTimeout(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	took := testutil.Eventually(t, fmt.Sprintf("%d messages across brokers", n), 60*time.Second, func() bool {
		return total.Load()+bad.Load() >= int64(n)
	})
	t.Logf("%d messages with headers from b2 to b1 in %v (%.0f msgs/s)", n, time.Since(start), float64(n)/time.Since(start).Seconds())
	_ = took
	if err := sc.Flush(); err != nil { // anything still in flight has arrived
		t.Fatal(err)
	}
	if bad.Load() > 0 {
		t.Fatalf("%d messages arrived altered; first: %v", bad.Load(), firstBad.Load())
	}
	for i, c := range got {
		if c != 1 {
			t.Fatalf("message %d arrived %d times", i, c)
		}
	}
	if d, _ := sub.Dropped(); d != 0 {
		t.Fatalf("client dropped %d", d)
	}
}

func queueGroupAcross(t *testing.T, b1, b2 string, n int) {
	var per [4]atomic.Int64
	var seen sync.Map
	var dups atomic.Int64
	var probes atomic.Int64
	for i := 0; i < 4; i++ {
		url := b1
		if i%2 == 1 {
			url = b2
		}
		nc := mustConnect(t, url)
		i := i
		if _, err := nc.QueueSubscribe("e2e.jobs", "workers", func(m *nats.Msg) {
			if string(m.Data) == "probe" {
				probes.Add(1)
				return
			}
			if _, loaded := seen.LoadOrStore(string(m.Data), i); loaded {
				dups.Add(1)
			}
			per[i].Add(1)
		}); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	pub := mustConnect(t, b2)
	// Probes until a member on the other broker (b1: members 0 and 2) got
	// one, so b2 knows b1's members.
	testutil.Eventually(t, "queue interest crossing brokers", 30*time.Second, func() bool {
		_ = pub.Publish("e2e.jobs", []byte("probe"))
		_ = pub.Flush()
		return probes.Load() >= 20
	})
	for i := 0; i < n; i++ {
		if err := pub.Publish("e2e.jobs", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.FlushTimeout(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	sum := func() int64 { return per[0].Load() + per[1].Load() + per[2].Load() + per[3].Load() }
	testutil.Eventually(t, "every job delivered", 60*time.Second, func() bool { return sum() >= int64(n) })
	for _, u := range []string{b1, b2} { // drain anything still in flight
		nc := mustConnect(t, u)
		_ = nc.Flush()
	}
	time.Sleep(200 * time.Millisecond)
	if sum() != int64(n) || dups.Load() != 0 {
		t.Fatalf("%d deliveries (%d duplicates) for %d jobs: a queue group must get each job once", sum(), dups.Load(), n)
	}
	onB1, onB2 := per[0].Load()+per[2].Load(), per[1].Load()+per[3].Load()
	if onB1 == 0 || onB2 == 0 {
		t.Fatalf("jobs not spread over both brokers: b1 %d, b2 %d", onB1, onB2)
	}
	t.Logf("queue group: b1 members %d, b2 members %d", onB1, onB2)
}

// strataPubSub runs `strata sub --count 3` in the background and
// `strata pub` with headers; the subscriber prints all three.
func strataPubSub(t *testing.T, dataDir string) {
	cmd := exec.Command(strataBin, "sub", "e2e.cli", "--count", "3", "--data-dir", dataDir, "--region", "solo")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testutil.Eventually(t, "strata sub subscribed", 30*time.Second, func() bool {
		return strings.Contains(errb.String(), "subscribed to")
	})
	// The subscriber may sit on the other broker: publish until its
	// interest crossed, then the real messages.
	sent := 0
	testutil.Eventually(t, "strata sub receiving", 30*time.Second, func() bool {
		_, stderr, code := strata(t, "pub", "e2e.cli", fmt.Sprintf("hello %d", sent), "-H", "Trace-Id:abc", "--data-dir", dataDir, "--region", "solo")
		if code != 0 {
			t.Fatalf("strata pub: exit %d: %s", code, stderr)
		}
		sent++
		return strings.Contains(out.String(), "hello")
	})
	for extra := 0; extra < 2; extra++ { // it has at least one; two more end it
		_, stderr, code := strata(t, "pub", "e2e.cli", fmt.Sprintf("hello %d", sent), "-H", "Trace-Id:abc", "--data-dir", dataDir, "--region", "solo")
		if code != 0 {
			t.Fatalf("strata pub: exit %d: %s", code, stderr)
		}
		sent++
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("strata sub: %v\n%s", err, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("strata sub did not exit after 3 messages; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "[#3] e2e.cli") || !strings.Contains(out.String(), "Trace-Id: abc") {
		t.Fatalf("strata sub printed:\n%s", out.String())
	}
	_, stderr, code := strata(t, "pub", "x", "y", "--data-dir", dataDir, "--region", "nope")
	if code == 0 || !strings.Contains(stderr, `no region "nope"`) {
		t.Fatalf("pub to an unknown region: exit %d, %s", code, stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer process and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
