package bookie

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stratamesh/strata/bookie/storage"
)

// BenchmarkAddPipelined measures the protocol's own cost: pipelined adds of
// 1 KiB over loopback gRPC to an in-memory engine (no disk), so the
// figure is an upper bound the journal's fsync will bring down.
//
//	go test ./bookie -run '^$' -bench AddPipelined -benchmem
func BenchmarkAddPipelined(b *testing.B) {
	h := startHarness(b)
	s := benchStream(b, h)
	payload := make([]byte, 1024)
	var wg sync.WaitGroup
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := range int64(b.N) {
		wg.Add(1)
		err := s.Send(storage.AddRequest{LedgerID: 1, EntryID: i, LAC: i - 1, MasterKey: key, Payload: payload}, func(err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
}

// BenchmarkAddRoundTrip measures one add at a time (nothing else in
// flight) over loopback gRPC: to an in-memory engine, the protocol's round
// trip, which a closed-loop writer pays on top of the journal's
// write+fsync for every batch; to the storage engine, with and without
// fsync (ns/op = one round trip).
//
//	go test ./bookie -run '^$' -bench AddRoundTrip
func BenchmarkAddRoundTrip(b *testing.B) {
	b.Run("engine=mem", func(b *testing.B) { addRoundTrip(b, startHarness(b)) })
	// The storage engine on the test's temporary directory, with and
	// without fsync: the first adds the journal's write+fsync, the
	// second only the engine's goroutine hand-offs.
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("engine=disk/fsync=%v", sync), func(b *testing.B) {
			cfg := storage.DefaultConfig()
			cfg.Dir, cfg.DisableFsync, cfg.JournalGroupWindow = b.TempDir(), !sync, 0 // as on bookie nodes
			e, err := storage.Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.Close() }) // after the harness's server stops (cleanups run last first)
			addRoundTrip(b, startHarness(b, func(c *ServerConfig) { c.Storage = e }))
		})
	}
}

func addRoundTrip(b *testing.B, h *harness) {
	s := benchStream(b, h)
	payload := make([]byte, 1024)
	done := make(chan error, 1)
	add := func(id int64) {
		err := s.Send(storage.AddRequest{LedgerID: 1, EntryID: id, LAC: id - 1, MasterKey: key, Payload: payload}, func(err error) { done <- err })
		if err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	// One add before the clock: the ledger's creation, and on a fresh
	// journal the first zero-filled reserve chunk, are not round trips.
	add(0)
	b.ResetTimer()
	for i := range int64(b.N) {
		add(i + 1)
	}
}

// benchStream dials h and opens an Add stream, both closed when b ends.
func benchStream(b *testing.B, h *harness) *AddStream {
	ctx := testCtx(b) // its cancel runs after the closes below
	c, err := Dial(ctx, h.addr, DialOptions{Instance: h.instance})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	s, err := c.NewAddStream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(ctx) })
	return s
}
