package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta/metatest"
)

func TestMain(m *testing.M) { metatest.Main(m) }

// TestClusterWritesAndReads: a ledger over the cluster's bookies is
// written and read back, also after a bookie of its ensemble stops and
// comes back.
func TestClusterWritesAndReads(t *testing.T) {
	st := metatest.OpenStore(t)
	c := Start(t, st, 4)
	if got := c.IDs(); len(got) != 4 || got[0] != "k1" || got[3] != "k4" {
		t.Fatalf("IDs = %v", got)
	}
	lc := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := w.Append(ctx, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	md, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopped := string(md.Segments[0].Ensemble[0])
	c.Stop(stopped)
	r, err := lc.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	ents, err := r.Read(ctx, 0, 9)
	if err != nil {
		t.Fatalf("read with %s stopped: %v", stopped, err)
	}
	for i, e := range ents {
		if e.Payload[0] != byte(i) {
			t.Fatalf("entry %d = %v", i, e.Payload)
		}
	}
	c.Restart(stopped)
	if _, err := r.Read(ctx, 0, 9); err != nil {
		t.Fatalf("read after restart: %v", err)
	}
}
