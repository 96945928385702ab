package tiered

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
)

// sliceSource serves fixed entries (for shapes fakeSource cannot make).
type sliceSource []ledger.Entry

func (s sliceSource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	return s[first : last+1], nil
}

func TestOffloadResult(t *testing.T) {
	src := newSource(20, 999, 16<<10)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, known := range []bool{false, true} {
		store := newMemStore()
		var progress [][2]int64
		opts := OffloadOptions{
			LedgerID: 42, LastEntryID: 999, Now: func() time.Time { return at },
			Progress: func(entries, bytes int64) { progress = append(progress, [2]int64{entries, bytes}) },
		}
		if known {
			opts.Length = src.length()
		}
		res, err := Offload(context.Background(), src, store, "x/42-u", opts)
		if err != nil {
			t.Fatal(err)
		}
		idx := store.object("x/42-u.index")
		want := Offloaded{
			LedgerID: 42, DataObject: "x/42-u.data", IndexObject: "x/42-u.index",
			DataBytes: src.length() + 16*1000, IndexBytes: int64(len(idx)),
			Entries: 1000, PayloadBytes: src.length(), IndexInterval: DefaultIndexInterval,
			IndexCRC: IndexCRC(idx), Time: at,
		}
		if res != want {
			t.Fatalf("Offloaded %+v, want %+v", res, want)
		}
		if got := int64(len(store.object("x/42-u.data"))); got != res.DataBytes {
			t.Fatalf("data object %d bytes, Offloaded says %d", got, res.DataBytes)
		}
		if n := len(store.names()); n != 2 {
			t.Fatalf("%d objects", n)
		}
		// Progress rises to the whole ledger; chunks shrink to ~1 MiB of payload.
		if len(progress) < 2 || progress[len(progress)-1] != [2]int64{1000, res.DataBytes} {
			t.Fatalf("progress %v", progress)
		}
		for i := 1; i < len(progress); i++ {
			if progress[i][0] <= progress[i-1][0] || progress[i][1] <= progress[i-1][1] {
				t.Fatalf("progress not increasing: %v", progress)
			}
		}
	}
}

func TestOffloadRefusesEmptyAndInvalid(t *testing.T) {
	store := newMemStore()
	ctx := context.Background()
	src := newSource(1, 10, 10)
	if _, err := Offload(ctx, src, store, "b", OffloadOptions{LedgerID: 1, LastEntryID: -1}); !errors.Is(err, ErrEmptyLedger) {
		t.Fatalf("empty ledger: %v", err)
	}
	if _, err := Offload(ctx, src, store, "", OffloadOptions{LedgerID: 1, LastEntryID: 10}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty base: %v", err)
	}
	if _, err := Offload(ctx, src, store, "b", OffloadOptions{LedgerID: -2, LastEntryID: 10}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative ledger id: %v", err)
	}
	cfg := DefaultConfig()
	cfg.IndexInterval = 0
	if _, err := Offload(ctx, src, store, "b", OffloadOptions{LedgerID: 1, LastEntryID: 10, Config: cfg}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad config: %v", err)
	}
	big := sliceSource{{ID: 0, Payload: make([]byte, MaxEntryBytes+1)}}
	if _, err := Offload(ctx, big, store, "b", OffloadOptions{LedgerID: 1, LastEntryID: 0}); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("entry too large: %v", err)
	}
	if n := store.names(); len(n) != 0 {
		t.Fatalf("objects left: %v", n)
	}
}

func TestOffloadSourceFailsHalfway(t *testing.T) {
	store := newMemStore()
	src := newSource(21, 499, 8<<10)
	src.failAt, src.failN = 250, 1
	_, err := Offload(context.Background(), src, store, "b-1", OffloadOptions{LedgerID: 42, LastEntryID: 499})
	if !errors.Is(err, errSource) {
		t.Fatalf("offload with a failing source: %v", err)
	}
	if n := store.names(); len(n) != 0 {
		t.Fatalf("objects left after a failed offload: %v", n)
	}
	// The retry (a new attempt, a new name) succeeds.
	res := mustOffload(t, store, src, "b-2", Config{})
	if n := store.names(); len(n) != 2 || res.Entries != 500 {
		t.Fatalf("after retry: objects %v, %+v", n, res)
	}
	r := mustOpen(t, store, "b-2", nil, Config{})
	es, err := r.Read(context.Background(), 0, 499)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, src, es, 0, 499)
}

func TestOffloadPutFails(t *testing.T) {
	for _, n := range []int{1, 2} { // the data object's Put, the index's
		store := newMemStore()
		boom := errors.New("store: 503 slow down")
		store.failPut[n] = boom
		_, err := Offload(context.Background(), newSource(22, 299, 8<<10), store, "b", OffloadOptions{LedgerID: 42, LastEntryID: 299})
		if !errors.Is(err, boom) {
			t.Fatalf("put %d failing: %v", n, err)
		}
		if names := store.names(); len(names) != 0 {
			t.Fatalf("put %d failing: objects left: %v", n, names)
		}
	}
}

func TestOffloadVerifyCatchesCorruption(t *testing.T) {
	for _, tc := range []struct {
		object string
		at     int64
	}{
		{"b.data", -1},  // the last entry's last byte
		{"b.data", -20}, // inside the last entry, or its header
		{"b.index", -1}, // the last index point
		{"b.index", 9},  // the index CRC
	} {
		store := newMemStore()
		store.corrupt[tc.object] = tc.at
		src := newSource(23, 199, 4<<10)
		for len(src.payload(199)) < 20 {
			src.seed++
		}
		_, err := Offload(context.Background(), src, store, "b", OffloadOptions{LedgerID: 42, LastEntryID: 199})
		if !errors.Is(err, ErrVerify) {
			t.Fatalf("store flipping byte %d of %s: %v; want ErrVerify", tc.at, tc.object, err)
		}
		if names := store.names(); len(names) != 0 {
			t.Fatalf("objects left after failed verification: %v", names)
		}
	}
}

func TestOffloadSourceMismatch(t *testing.T) {
	ctx := context.Background()
	src := newSource(24, 99, 1000)
	for name, tc := range map[string]struct {
		src    EntrySource
		opts   OffloadOptions
		inText string
	}{
		"wrong ids": {&fakeSource{seed: 24, last: 99, maxSize: 1000, failAt: -1, wrong: true},
			OffloadOptions{LedgerID: 1, LastEntryID: 99}, "asked for entry"},
		"length too small": {src, OffloadOptions{LedgerID: 1, LastEntryID: 99, Length: src.length() - 1}, "exceed the ledger length"},
		"length too large": {src, OffloadOptions{LedgerID: 1, LastEntryID: 99, Length: src.length() + 1}, "add up to"},
	} {
		store := newMemStore()
		_, err := Offload(ctx, tc.src, store, "b", tc.opts)
		if !errors.Is(err, ErrSourceMismatch) || !strings.Contains(err.Error(), tc.inText) {
			t.Fatalf("%s: %v; want ErrSourceMismatch mentioning %q", name, err, tc.inText)
		}
		if names := store.names(); len(names) != 0 {
			t.Fatalf("%s: objects left: %v", name, names)
		}
	}
	// A source answering fewer entries than asked for.
	store := newMemStore()
	short := shortSource{src}
	if _, err := Offload(ctx, short, store, "b", OffloadOptions{LedgerID: 1, LastEntryID: 99}); !errors.Is(err, ErrSourceMismatch) {
		t.Fatalf("short source: %v", err)
	}
	if names := store.names(); len(names) != 0 {
		t.Fatalf("short source: objects left: %v", names)
	}
}

// shortSource drops the last entry of each answer.
type shortSource struct{ src *fakeSource }

func (s shortSource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	es, err := s.src.Read(ctx, first, last)
	if len(es) > 0 {
		es = es[:len(es)-1]
	}
	return es, err
}

func TestOffloadContextCancelled(t *testing.T) {
	store := newMemStore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := newSource(25, 999, 8<<10)
	opts := OffloadOptions{LedgerID: 42, LastEntryID: 999, Progress: func(entries, _ int64) {
		if entries >= 300 {
			cancel()
		}
	}}
	if _, err := Offload(ctx, src, store, "b", opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled offload: %v", err)
	}
	if names := store.names(); len(names) != 0 {
		t.Fatalf("objects left after a cancelled offload: %v", names)
	}
}

func TestDelete(t *testing.T) {
	store := newMemStore()
	mustOffload(t, store, newSource(26, 9, 100), "b", Config{})
	mustOffload(t, store, newSource(27, 9, 100), "c", Config{})
	if err := Delete(context.Background(), store, "b"); err != nil {
		t.Fatal(err)
	}
	if names := store.names(); len(names) != 2 || names[0] != "c.data" || names[1] != "c.index" {
		t.Fatalf("after Delete: %v", names)
	}
	if err := Delete(context.Background(), store, "b"); err != nil { // again: nothing to delete
		t.Fatal(err)
	}
	if err := Delete(context.Background(), store, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Delete of empty base: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	err := Config{IndexInterval: 0, ReadChunkEntries: 0, ReadChunkBytes: 0, BlockSize: 100, ReadAheadBlocks: -1}.Validate()
	for _, field := range []string{"IndexInterval", "ReadChunkEntries", "ReadChunkBytes", "BlockSize", "ReadAheadBlocks", "CleanupTimeout"} {
		if !strings.Contains(err.Error(), "Config."+field) {
			t.Fatalf("Validate does not name %s: %v", field, err)
		}
	}
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, ledger.ErrInvalidOptions) {
		t.Fatalf("Validate: %v", err)
	}
}
