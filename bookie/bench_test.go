package bookie

import (
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
	c, err := Dial(testCtx(b), h.addr, DialOptions{Instance: h.instance})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewAddStream(testCtx(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(testCtx(b))
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
