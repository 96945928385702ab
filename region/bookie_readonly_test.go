package region

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestBookieReadOnlyByOperator: PUT /admin/v1/bookie/read-only holds a
// bookie read-only — adds refused, its registration and views say so —
// across a restart of the node, until lifted; bad bodies are refused and
// change nothing.
func TestBookieReadOnlyByOperator(t *testing.T) {
	m := parse(t, oneRegion)
	base := NodeConfig{Mesh: m, Region: "r1", DataDir: t.TempDir(), Gossip: gossip.ProfileLoopback, RegistrationTTL: 2 * time.Second}
	mc := base
	mc.ID = "meta"
	me := startNode(t, mc).Endpoints()
	kc := base
	kc.ID, kc.EtcdEndpoints, kc.LANJoin = "k1", []string{me.Etcd}, []string{me.SerfLAN}
	k1 := startNode(t, kc)
	store, err := meta.Open(context.Background(), meta.Config{Endpoints: []string{me.Etcd}, Prefix: "/strata/unit/r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	add := func(n *Node, entry int64) error {
		done := make(chan error, 1)
		n.engine.Add(storage.AddRequest{LedgerID: 1, EntryID: entry, LAC: entry - 1, MasterKey: []byte("k"), Payload: []byte("x")}, func(err error) { done <- err })
		return <-done
	}
	registeredReadOnly := func() bool {
		regs, err := bookie.ListRegistrations(ctx, store)
		return err == nil && len(regs) == 1 && regs[0].ReadOnly
	}
	put := func(n *Node, body string) (admin.BookieView, error) {
		var v admin.BookieView
		err := (&admin.Client{}).Send(ctx, http.MethodPut, n.Endpoints().Admin, "/admin/v1/bookie/read-only", json.RawMessage(body), &v)
		return v, err
	}
	if err := add(k1, 0); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []string{`{}`, `{"read_only":"on"}`, `{"read_only":true,"x":1}`} {
		var apiErr *admin.APIError
		if _, err := put(k1, bad); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
			t.Fatalf("PUT %s: %v, want 400", bad, err)
		}
	}
	if err := add(k1, 1); err != nil {
		t.Fatalf("add after refused PUTs: %v", err)
	}

	// Meant for another bookie (a wrong URL): refused, nothing changed.
	var apiErr *admin.APIError
	for _, other := range []string{`{"read_only":true,"bookie":"k2"}`, `{"read_only":true,"bookie":"k1","region":"r2"}`} {
		if _, err := put(k1, other); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
			t.Fatalf("PUT %s to r1/k1: %v, want 409", other, err)
		}
	}
	if err := add(k1, 2); err != nil {
		t.Fatalf("add after a PUT meant for another bookie: %v", err)
	}

	// Settings racing each other leave the file and the engine agreeing.
	for range 20 {
		var wg sync.WaitGroup
		wg.Go(func() { put(k1, `{"read_only":true}`) })
		wg.Go(func() { put(k1, `{"read_only":false}`) })
		wg.Wait()
		file, err := readOnlySet(k1.dir())
		if mem := k1.engine.ReadOnlyBySet(); err != nil || mem != file {
			t.Fatalf("after racing PUTs: engine set read-only %v, READ_ONLY file %v (%v)", mem, file, err)
		}
	}

	v, err := put(k1, `{"read_only":true,"bookie":"k1","region":"r1"}`)
	if err != nil || !v.ReadOnly || !v.ReadOnlySet {
		t.Fatalf("PUT read_only true: %+v, %v", v, err)
	}
	if err := add(k1, 3); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("add to a bookie set read-only: %v, want ErrReadOnly", err)
	}
	if _, err := k1.engine.Read(1, 1); err != nil {
		t.Fatalf("read from a bookie set read-only: %v", err)
	}
	testutil.Eventually(t, "the registration says read-only", 10*time.Second, registeredReadOnly)

	// A restart keeps it.
	if err := k1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	k1 = startNode(t, kc)
	if err := add(k1, 3); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("add after a restart: %v, want ErrReadOnly (the setting survives)", err)
	}
	testutil.Eventually(t, "the registration says read-only after the restart", 10*time.Second, registeredReadOnly)

	if v, err := put(k1, `{"read_only":false}`); err != nil || v.ReadOnly || v.ReadOnlySet {
		t.Fatalf("PUT read_only false: %+v, %v", v, err)
	}
	if err := add(k1, 3); err != nil {
		t.Fatalf("add once lifted: %v", err)
	}
	testutil.Eventually(t, "the registration says writable", 10*time.Second, func() bool { return !registeredReadOnly() })
}
