package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
)

// TestBookieRefusesASecondProcess starts a second `strata node` for a live
// bookie (what an operator does who restarts a node by hand while the old
// one still runs). It must fail on the data directory's lock before it
// touches the live bookie's files: before the lock, it replayed and cut
// the live bookie's journal, and the live bookie lost acknowledged entries
// at its next restart. The live bookie then crashes and restarts with
// every acknowledged entry.
func TestBookieRefusesASecondProcess(t *testing.T) {
	dir := t.TempDir()
	topo := writeTopology(t, dir, "bookie.yaml", bookieRegion)
	k1, bookieArgs := startSoloBookie(t, dir, topo)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ledger, n = 7, 2000
	instance := addAcked(ctx, t, k1.report.GRPC, ledger, n)

	// The second process for the same bookie and data directory.
	out := refusedStart(t, filepath.Join(dir, "k1-second.log"), bookieArgs...)
	if !strings.Contains(out, "in use") {
		t.Fatalf("second process failed without naming the directory in use:\n%s", out)
	}

	// The live bookie was not disturbed: crash it, restart, read all.
	k1.kill()
	k1b := startNodeProcess(t, filepath.Join(dir, "k1.log"), bookieArgs...)
	readAcked(ctx, t, k1b.report.GRPC, instance, ledger, n, "after the second process and a restart")
}

// lockedPayload is entry e's payload in these tests.
func lockedPayload(e int64) []byte { return []byte(fmt.Sprintf("entry-%08d", e)) }

// addAcked adds entries 0..n-1 of ledger to the bookie at addr over one
// Add stream, waits until every one is acknowledged, and returns the
// bookie's instance.
func addAcked(ctx context.Context, t *testing.T, addr string, ledger int64, n int) string {
	t.Helper()
	c, err := bookie.Dial(ctx, addr, bookie.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream, err := c.NewAddStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, n)
	for e := range int64(n) {
		req := storage.AddRequest{LedgerID: ledger, EntryID: e, LAC: e - 1, MasterKey: []byte("master-key"), Payload: lockedPayload(e)}
		if err := stream.Send(req, func(err error) { acked <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
	}
	_ = stream.Close(ctx)
	return c.Instance()
}

// readAcked reads entries 0..n-1 of ledger back from instance at addr.
func readAcked(ctx context.Context, t *testing.T, addr, instance string, ledger int64, n int, when string) {
	t.Helper()
	c, err := bookie.Dial(ctx, addr, bookie.DialOptions{Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for e := range int64(n) {
		got, err := c.Read(ctx, ledger, e)
		if err != nil {
			t.Fatalf("acked entry %d %s: %v", e, when, err)
		}
		if !bytes.Equal(got.Payload, lockedPayload(e)) {
			t.Fatalf("entry %d read back wrong %s: %q", e, when, got.Payload)
		}
	}
}

// TestBookieRefusesDataWithoutItsCookie: a bookie whose COOKIE.json was
// removed while its journal, entry logs and index stayed must refuse to
// start (BookKeeper's cookie check) instead of starting as a new instance
// and giving up every entry it holds, as it did; with the cookie file put
// back it starts as the same instance with every acknowledged entry.
func TestBookieRefusesDataWithoutItsCookie(t *testing.T) {
	dir := t.TempDir()
	topo := writeTopology(t, dir, "bookie.yaml", bookieRegion)
	k1, bookieArgs := startSoloBookie(t, dir, topo)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ledger, n = 9, 200
	instance := addAcked(ctx, t, k1.report.GRPC, ledger, n)
	k1.kill()

	cookies, err := filepath.Glob(filepath.Join(dir, "data", "*", "k1", bookie.CookieFile))
	if err != nil || len(cookies) != 1 {
		t.Fatalf("the bookie's cookie file: %v, %v", cookies, err)
	}
	aside := filepath.Join(dir, "cookie.aside")
	if err := os.Rename(cookies[0], aside); err != nil {
		t.Fatal(err)
	}
	out := refusedStart(t, filepath.Join(dir, "k1-nocookie.log"), bookieArgs...)
	if !strings.Contains(out, "holds bookie data") || !strings.Contains(out, "no "+bookie.CookieFile) {
		t.Fatalf("refusal does not name the missing cookie:\n%s", out)
	}

	if err := os.Rename(aside, cookies[0]); err != nil {
		t.Fatal(err)
	}
	k1b := startNodeProcess(t, filepath.Join(dir, "k1.log"), bookieArgs...)
	readAcked(ctx, t, k1b.report.GRPC, instance, ledger, n, "after the cookie was put back")
}
