package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/region"
	"github.com/stratamesh/strata/topology"
)

const ledgerRegion = `mesh: e2e-ledger
regions:
  - name: solo
    brokers: 1
    bookies: 4
    ledger: {ensemble: 3, write_quorum: 2, ack_quorum: 2}
`

// ledgerCluster is a meta node and four bookie processes of one region.
type ledgerCluster struct {
	dir, topo string
	meta      *nodeProcess
	bookies   map[string]*nodeProcess
	args      map[string][]string
	store     *meta.Store
}

func startLedgerCluster(t *testing.T) *ledgerCluster {
	t.Helper()
	dir := t.TempDir()
	c := &ledgerCluster{dir: dir, topo: writeTopology(t, dir, "ledger.yaml", ledgerRegion), bookies: map[string]*nodeProcess{}, args: map[string][]string{}}
	common := []string{"--topology", c.topo, "--region", "solo", "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "warn"}
	c.meta = startNodeProcess(t, filepath.Join(dir, "meta.log"), append(common, "--id", "meta")...)
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		c.args[id] = append(append([]string{}, common...), "--id", id, "--etcd", c.meta.report.Etcd, "--join", c.meta.report.SerfLAN)
		c.bookies[id] = startNodeProcess(t, filepath.Join(dir, id+".log"), c.args[id]...)
	}
	c.store = openRegionStore(t, c.topo, c.meta.report.Etcd)
	return c
}

// openRegionStore opens the region's metadata as the region's nodes see it.
func openRegionStore(t *testing.T, topoPath, etcd string) *meta.Store {
	t.Helper()
	m, _, err := topology.LoadFile(topoPath)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := m.Region("solo")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := meta.Open(ctx, meta.Config{Endpoints: []string{etcd}, Prefix: region.KeyPrefix(m, r)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newLedgerClient(t *testing.T, st *meta.Store) *ledger.Client {
	t.Helper()
	lc, err := ledger.NewClient(ledger.Config{Store: st, AddTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	return lc
}

// dialLedgers opens a ledger client the way a tool outside this module
// does: ledger.Dial with the meta node's etcd and the region's key prefix.
func dialLedgers(t *testing.T, c *ledgerCluster) *ledger.Client {
	t.Helper()
	m, _, err := topology.LoadFile(c.topo)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := m.Region("solo")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lc, err := ledger.Dial(ctx, []string{c.meta.report.Etcd}, m.KeyPrefix(r), ledger.Config{AddTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	return lc
}

func entryPayload(e int64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("ledger-entry-%08d|", e)), 1+int(e%40))
}

// TestLedgerEnsembleChangeOnBookieKill writes 10,000 pipelined entries
// (E=3, Qw=2, Qa=2) over four bookie processes and SIGKILLs a bookie of the
// ensemble in the middle (the second half is appended after the kill): every acknowledged entry stays readable, the
// ledger's second segment starts right after the last entry confirmed
// before the change, and `strata admin ledgers` shows it.
func TestLedgerEnsembleChangeOnBookieKill(t *testing.T) {
	c := startLedgerCluster(t)
	lc := dialLedgers(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(scale(10000))
	var mu sync.Mutex
	acked := map[int64]bool{}
	var firstErr error
	done := make(chan struct{})
	var completions int64
	killed := make(chan struct{})
	go func() { // pipelined appends; the window is the writer's queue
		for e := int64(0); e < n; e++ {
			if e == n/2 {
				// The second half only once the bookie is dead, so that
				// it cannot all be acknowledged before the kill (on a
				// fast machine it was, and no ensemble change happened).
				<-killed
			}
			w.AppendAsync(entryPayload(e), func(id int64, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
				} else {
					acked[id] = true
				}
				completions++
				if completions == n {
					close(done)
				}
			})
		}
	}()
	// Kill a bookie of the ensemble once a quarter is confirmed, with the
	// rest queued or in flight to the old ensemble.
	testutil.Eventually(t, "a quarter of the entries confirmed", 60*time.Second, func() bool { return w.LAC() >= n/4 })
	victim := string(w.Metadata().Segments[0].Ensemble[1])
	lacAtKill := w.LAC()
	c.bookies[victim].kill()
	close(killed)
	t.Logf("SIGKILLed %s of %v with LAC %d", victim, w.Metadata().Segments[0].Ensemble, lacAtKill)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("only %d of %d adds completed", completions, n)
	}
	if firstErr != nil {
		t.Fatalf("an add failed although 3 bookies stayed up: %v", firstErr)
	}
	md, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.State != core.StateClosed || md.LastEntryID != n-1 {
		t.Fatalf("closed metadata: state %v last entry %d, want CLOSED %d", md.State, md.LastEntryID, n-1)
	}
	if len(md.Segments) < 2 {
		t.Fatalf("no ensemble change recorded: %+v", md.Segments)
	}
	second := md.Segments[1]
	if second.FirstEntry <= lacAtKill || second.FirstEntry >= n {
		t.Fatalf("second segment starts at %d; the LAC was %d when the bookie was killed", second.FirstEntry, lacAtKill)
	}
	for _, b := range second.Ensemble {
		if c.bookies[string(b)].exited() {
			t.Fatalf("new ensemble %v still holds the killed bookie", second.Ensemble)
		}
	}
	t.Logf("segments: %+v", md.Segments)

	rd, err := lc.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	for from := int64(0); from < n; from += 500 {
		entries, err := rd.Read(ctx, from, min(from+499, n-1))
		if err != nil {
			t.Fatalf("read %d..: %v", from, err)
		}
		for _, e := range entries {
			if !bytes.Equal(e.Payload, entryPayload(e.ID)) {
				t.Fatalf("entry %d read back wrong", e.ID)
			}
		}
		if len(entries) != int(min(500, n-from)) {
			t.Fatalf("read %d..: %d entries", from, len(entries))
		}
	}
	if int64(len(acked)) != n {
		t.Fatalf("%d acked of %d", len(acked), n)
	}

	// The operator's view through a node's admin API (the meta node's).
	id := strconv.FormatInt(w.ID(), 10)
	out, stderr, code := strata(t, "admin", "ledgers", "show", id, "--url", c.meta.report.Admin)
	if code != 0 || !strings.Contains(out, "state CLOSED") || !strings.Contains(out, fmt.Sprintf("from entry %d:", second.FirstEntry)) {
		t.Fatalf("admin ledgers show: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = strata(t, "admin", "ledgers", "read", id, "--from", "5", "--to", "7", "--url", c.meta.report.Admin)
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, string(entryPayload(6))[:22]) {
		t.Fatalf("admin ledgers read: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code = strata(t, "admin", "ledgers", "list", "--url", c.meta.report.Admin)
	if code != 0 || !strings.Contains(out, id) {
		t.Fatalf("admin ledgers list: exit %d\n%s", code, out)
	}
}

// TestLedgerRecoveryAfterWriterDies runs the writer as its own process
// (this test binary in writer mode), SIGKILLs it, and recovers the ledger
// from here: the recovered last entry is at least every entry the writer
// saw acknowledged — also for a ledger with one entry (bookies report LAC
// -1) and with a bookie of the write sets down during recovery.
func TestLedgerRecoveryAfterWriterDies(t *testing.T) {
	outer := t
	c := startLedgerCluster(t)
	lc := newLedgerClient(t, c.store)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name       string
		entries    int
		qw         int // write quorum (ack quorum 2, ensemble 3)
		bookieDown bool
	}{
		{"one-entry-lac-minus-one", 1, 3, false},
		{"many-entries", scale(3000), 3, false},
		{"many-entries-one-bookie-down", scale(3000), 3, true},
		// Qw = Qa: recovery must replace the dead bookie to rewrite.
		{"many-entries-one-bookie-down-qw-eq-qa", scale(3000), 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, acked := runWriterProcess(t, c, tc.entries, tc.qw)
			if tc.bookieDown {
				md, err := lc.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				victim := string(md.Segments[len(md.Segments)-1].Ensemble[0])
				c.bookies[victim].kill()
				// Back for the next case (started under the outer test, so
				// it lives until the cluster goes).
				defer func() {
					c.bookies[victim] = startNodeProcess(outer, filepath.Join(c.dir, victim+".log"), c.args[victim]...)
				}()
				t.Logf("bookie %s down during recovery", victim)
			}
			start := time.Now()
			md, err := lc.OpenForTakeover(ctx, id, []byte("pw"))
			if err != nil {
				t.Fatalf("recovery: %v", err)
			}
			t.Logf("recovered ledger %d in %v: last entry %d, writer saw %d acked", id, time.Since(start), md.LastEntryID, acked)
			if md.State != core.StateClosed || md.LastEntryID < acked {
				t.Fatalf("recovered %v last entry %d, but entry %d was acknowledged to the writer", md.State, md.LastEntryID, acked)
			}
			rd, err := lc.OpenReader(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if md.LastEntryID >= 0 {
				entries, err := rd.Read(ctx, 0, md.LastEntryID)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if !bytes.Equal(e.Payload, entryPayload(e.ID)) {
						t.Fatalf("entry %d wrong after recovery", e.ID)
					}
				}
			}
		})
	}
}

// runWriterProcess starts this binary as a ledger writer, reads the ids it
// reports acknowledged until it has written n entries, SIGKILLs it and
// returns the ledger id and the highest acknowledged entry.
func runWriterProcess(t *testing.T, c *ledgerCluster, n, qw int) (int64, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STRATA_E2E_LEDGER_WRITER="+c.topo+","+c.meta.report.Etcd+","+strconv.Itoa(n)+","+strconv.Itoa(qw))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	id, acked := int64(-1), int64(-1)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "ledger" {
			id, _ = strconv.ParseInt(f[1], 10, 64)
			continue
		}
		if len(f) == 2 && f[0] == "acked" {
			acked, _ = strconv.ParseInt(f[1], 10, 64)
			if acked == int64(n-1) {
				break
			}
		}
	}
	if id < 0 || acked != int64(n-1) {
		t.Fatalf("writer process: ledger %d, last acked %d of %d\n%s", id, acked, n, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	return id, acked
}

// ledgerWriterMain is the writer process: it creates a ledger, appends n
// entries (pipelined), prints "ledger ID" and "acked E" lines, then waits
// to be killed without closing the ledger.
func ledgerWriterMain(spec string) {
	parts := strings.Split(spec, ",")
	fail := func(err error) { fmt.Fprintln(os.Stderr, "writer:", err); os.Exit(2) }
	if len(parts) != 4 {
		fail(errors.New("bad STRATA_E2E_LEDGER_WRITER"))
	}
	n, _ := strconv.Atoi(parts[2])
	qw, _ := strconv.Atoi(parts[3])
	m, _, err := topology.LoadFile(parts[0])
	if err != nil {
		fail(err)
	}
	r, _ := m.Region("solo")
	ctx := context.Background()
	st, err := meta.Open(ctx, meta.Config{Endpoints: []string{parts[1]}, Prefix: region.KeyPrefix(m, r)})
	if err != nil {
		fail(err)
	}
	lc, err := ledger.NewClient(ledger.Config{Store: st})
	if err != nil {
		fail(err)
	}
	w, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: qw, AckQuorum: 2, Password: []byte("pw")})
	if err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	fmt.Fprintf(out, "ledger %d\n", w.ID())
	out.Flush()
	for e := int64(0); e < int64(n); e++ {
		w.AppendAsync(entryPayload(e), func(id int64, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fail(err)
			}
			fmt.Fprintf(out, "acked %d\n", id)
			out.Flush()
		})
	}
	select {} // killed by the test, the ledger left OPEN
}
