package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
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
	c, err := bookie.Dial(ctx, k1.report.GRPC, bookie.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	instance := c.Instance()
	stream, err := c.NewAddStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ledger, n = 7, 2000
	key := []byte("master-key")
	payload := func(e int64) []byte { return []byte(fmt.Sprintf("entry-%08d", e)) }
	acked := make(chan error, n)
	for e := range int64(n) {
		if err := stream.Send(storage.AddRequest{LedgerID: ledger, EntryID: e, LAC: e - 1, MasterKey: key, Payload: payload(e)},
			func(err error) { acked <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
	}
	_ = stream.Close(ctx)
	c.Close()

	// The second process for the same bookie and data directory.
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	out, err := exec.CommandContext(sctx, strataBin, append([]string{"node"}, bookieArgs...)...).CombinedOutput()
	if err == nil {
		t.Fatalf("a second process for a live bookie started:\n%s", out)
	}
	if !strings.Contains(string(out), "in use") {
		t.Fatalf("second process failed without naming the directory in use (%v):\n%s", err, out)
	}

	// The live bookie was not disturbed: crash it, restart, read all.
	k1.kill()
	k1b := startNodeProcess(t, filepath.Join(dir, "k1.log"), bookieArgs...)
	c2, err := bookie.Dial(ctx, k1b.report.GRPC, bookie.DialOptions{Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for e := range int64(n) {
		got, err := c2.Read(ctx, ledger, e)
		if err != nil {
			t.Fatalf("acked entry %d lost after the second process and a restart: %v", e, err)
		}
		if !bytes.Equal(got.Payload, payload(e)) {
			t.Fatalf("entry %d read back wrong: %q", e, got.Payload)
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
	c, err := bookie.Dial(ctx, k1.report.GRPC, bookie.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	instance := c.Instance()
	stream, err := c.NewAddStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ledger, n = 9, 200
	key := []byte("master-key")
	payload := func(e int64) []byte { return []byte(fmt.Sprintf("entry-%08d", e)) }
	acked := make(chan error, n)
	for e := range int64(n) {
		if err := stream.Send(storage.AddRequest{LedgerID: ledger, EntryID: e, LAC: e - 1, MasterKey: key, Payload: payload(e)},
			func(err error) { acked <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if err := <-acked; err != nil {
			t.Fatal(err)
		}
	}
	_ = stream.Close(ctx)
	c.Close()
	k1.kill()

	cookies, err := filepath.Glob(filepath.Join(dir, "data", "*", "k1", bookie.CookieFile))
	if err != nil || len(cookies) != 1 {
		t.Fatalf("the bookie's cookie file: %v, %v", cookies, err)
	}
	aside := filepath.Join(dir, "cookie.aside")
	if err := os.Rename(cookies[0], aside); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	out, err := exec.CommandContext(sctx, strataBin, append([]string{"node"}, bookieArgs...)...).CombinedOutput()
	if err == nil {
		t.Fatalf("a bookie with data but no cookie started:\n%s", out)
	}
	if !strings.Contains(string(out), "holds bookie data") || !strings.Contains(string(out), "no "+bookie.CookieFile) {
		t.Fatalf("refusal does not name the missing cookie (%v):\n%s", err, out)
	}

	if err := os.Rename(aside, cookies[0]); err != nil {
		t.Fatal(err)
	}
	k1b := startNodeProcess(t, filepath.Join(dir, "k1.log"), bookieArgs...)
	c2, err := bookie.Dial(ctx, k1b.report.GRPC, bookie.DialOptions{Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for e := range int64(n) {
		got, err := c2.Read(ctx, ledger, e)
		if err != nil {
			t.Fatalf("entry %d after the cookie was put back: %v", e, err)
		}
		if !bytes.Equal(got.Payload, payload(e)) {
			t.Fatalf("entry %d read back wrong: %q", e, got.Payload)
		}
	}
}
