package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/testutil"
)

// scale multiplies message counts: STRATA_E2E_SCALE (default 1) lets a
// local run push more than CI does.
func scale(n int) int {
	if s, err := strconv.Atoi(os.Getenv("STRATA_E2E_SCALE")); err == nil && s > 0 {
		return n * s
	}
	return n
}

const bookieRegion = `mesh: e2e-bookie
regions:
  - name: solo
    brokers: 1
    bookies: 1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
`

// bookieJournalDirRegion is bookieRegion with explicit nodes and the
// bookie's journal in a directory of its own (%s), outside its data dir.
const bookieJournalDirRegion = `mesh: e2e-bookie
regions:
  - name: solo
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
    nodes:
      - {id: meta, role: meta, host: 127.0.0.1}
      - {id: b1, role: broker, host: 127.0.0.1}
      - {id: k1, role: bookie, host: 127.0.0.1, journal_dir: %s}
`

// TestBookieCrashKeepsAckedEntries runs a real bookie process, sends
// 10,000 pipelined adds over gRPC, SIGKILLs the bookie mid-stream, restarts
// it on the same data directory, and reads every acknowledged entry back
// byte for byte (the bookie verifies each entry's CRC32C on read).
func TestBookieCrashKeepsAckedEntries(t *testing.T) {
	dir := t.TempDir()
	bookieCrashKeepsAckedEntries(t, dir, writeTopology(t, dir, "bookie.yaml", bookieRegion))
}

// TestBookieJournalDirCrashKeepsAckedEntries is the same with the
// topology's journal_dir: the journal lives there, not under the data
// directory, and replay after the SIGKILL reads it from there.
func TestBookieJournalDirCrashKeepsAckedEntries(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "fast-disk", "k1-journal")
	adminURL := bookieCrashKeepsAckedEntries(t, dir, writeTopology(t, dir, "bookie.yaml", fmt.Sprintf(bookieJournalDirRegion, journal)))
	// The bookie's admin view (what `strata status` shows) names the
	// journal's directory and its file system's free space.
	var view admin.BookieView
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := (&admin.Client{}).Get(ctx, adminURL, "/admin/v1/bookie", &view); err != nil {
		t.Fatal(err)
	}
	if view.JournalDir != journal || view.JournalFreeBytes <= 0 || view.JournalTotalBytes < view.JournalFreeBytes {
		t.Fatalf("admin view: journal_dir %q, %d of %d bytes free; want %q with its file system's space", view.JournalDir, view.JournalFreeBytes, view.JournalTotalBytes, journal)
	}
	names, err := os.ReadDir(journal)
	if err != nil {
		t.Fatal(err)
	}
	jnl := 0
	for _, e := range names {
		if filepath.Ext(e.Name()) == ".jnl" {
			jnl++
		}
	}
	if jnl == 0 {
		t.Fatalf("no journal files in journal_dir %s: %v", journal, names)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "solo", "k1", "journal")); err == nil {
		t.Fatal("the bookie's data directory has a journal/ too")
	}
}

// startSoloBookie starts the meta node and bookie k1 of the "solo" region
// of topo as processes, with their data under dir/data; it returns k1 and
// the arguments that start it again.
func startSoloBookie(t *testing.T, dir, topo string) (*nodeProcess, []string) {
	t.Helper()
	dataDir := filepath.Join(dir, "data")
	common := []string{"--topology", topo, "--region", "solo", "--data-dir", dataDir, "--gossip", "loopback", "--log-level", "warn"}
	metaNode := startNodeProcess(t, filepath.Join(dir, "meta.log"), append(common, "--id", "meta")...)
	bookieArgs := append(common, "--id", "k1", "--etcd", metaNode.report.Etcd, "--join", metaNode.report.SerfLAN)
	return startNodeProcess(t, filepath.Join(dir, "k1.log"), bookieArgs...), bookieArgs
}

// bookieCrashKeepsAckedEntries returns the restarted bookie's admin URL
// (the node runs until the test ends).
func bookieCrashKeepsAckedEntries(t *testing.T, dir, topo string) (admin string) {
	k1, bookieArgs := startSoloBookie(t, dir, topo)

	n := scale(10000) // acked before the kill
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n/10000)*2*time.Minute)
	defer cancel()
	c, err := bookie.Dial(ctx, k1.report.GRPC, bookie.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	instance := c.Instance()
	stream, err := c.NewAddStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ledger = 42
	key := []byte("master-key")
	payload := func(e int64) []byte { return bytes.Repeat([]byte(fmt.Sprintf("entry-%08d|", e)), 8) }
	var mu sync.Mutex
	acked := map[int64]bool{}
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	start := time.Now()
	sent := make(chan struct{})
	var nSent int64
	go func() { // pipelined adds until the stream breaks when the bookie dies
		defer close(sent)
		for e := int64(0); ; e++ {
			nSent = e
			req := storage.AddRequest{LedgerID: ledger, EntryID: e, LAC: e - 1, MasterKey: key, Payload: payload(e)}
			err := stream.Send(req, func(err error) {
				if err == nil {
					mu.Lock()
					acked[req.EntryID] = true
					mu.Unlock()
				}
			})
			if err != nil {
				return
			}
		}
	}()
	// SIGKILL once n adds are acknowledged, the sender still sending: the
	// kill lands with adds in flight.
	testutil.Eventually(t, "adds acknowledged", time.Duration(n/10000)*time.Minute, func() bool { return ackedCount() >= n })
	k1.kill()
	<-sent
	_ = stream.Close(ctx)
	c.Close()
	nAcked := ackedCount()
	t.Logf("%d adds sent, %d acked before SIGKILL (%v)", nSent, nAcked, time.Since(start))

	k1b := startNodeProcess(t, filepath.Join(dir, "k1.log"), bookieArgs...)
	c2, err := bookie.Dial(ctx, k1b.report.GRPC, bookie.DialOptions{Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for e := range acked {
		got, err := c2.Read(ctx, ledger, e)
		if err != nil {
			t.Fatalf("acked entry %d lost after restart: %v", e, err)
		}
		if !bytes.Equal(got.Payload, payload(e)) {
			t.Fatalf("entry %d read back wrong: %q", e, got.Payload[:20])
		}
	}
	t.Logf("all %d acked entries read back after the restart", nAcked)
	return k1b.report.Admin
}
