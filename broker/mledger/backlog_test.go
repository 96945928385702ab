package mledger

import "testing"

// TestBacklogBytes: exact over the tail cache, whole ledgers below it
// exactly and the ledger the sequence falls in by its average; nothing
// past the last message; trimmed messages never count.
func TestBacklogBytes(t *testing.T) {
	c := newCore(Limits{}, 1000, 1)
	var tail tailCache
	c.addLedger(1, 1)
	publish := func(id int64, size int64) {
		seq, _, err := pub(c, id, "s", "", size, t0, PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tail.push(Message{Seq: seq, Time: t0}, size)
	}
	for i := 0; i < 4; i++ { // seqs 1-4: 10, 20, 30, 40 bytes (avg 25)
		publish(1, int64(10*(i+1)))
	}
	if err := c.closeLedger(1, 4, 100); err != nil {
		t.Fatal(err)
	}
	c.addLedger(2, 5)
	publish(2, 50) // seqs 5-7: 50, 50, 200 bytes (avg 100)
	publish(2, 50)
	publish(2, 200)
	check := func(what string, want map[uint64]uint64) {
		t.Helper()
		for seq, w := range want {
			if got := c.backlogBytes(seq, &tail); got != w {
				t.Errorf("%s: backlogBytes(%d) = %d, want %d", what, seq, got, w)
			}
		}
	}
	check("all cached", map[uint64]uint64{0: 400, 1: 400, 2: 390, 5: 300, 6: 250, 7: 200, 8: 0, 100: 0})
	// Only 6-7 cached: below, ledger 1 exact when whole, by its average
	// (25) when partial, and ledger 2's seq 5 by its average (100).
	tail.popFront()
	tail.popFront()
	tail.popFront()
	tail.popFront()
	tail.popFront()
	check("6-7 cached", map[uint64]uint64{1: 100 + 100 + 250, 2: 75 + 100 + 250, 5: 350, 6: 250, 7: 200})
	// A cache that does not end at the last message is not used.
	var stale tailCache
	stale.push(Message{Seq: 3}, 1)
	if got := c.backlogBytes(1, &stale); got != 400 {
		t.Errorf("stale cache: backlogBytes(1) = %d, want 400 (the ledgers' totals)", got)
	}
	if got := c.backlogBytes(6, &tailCache{}); got != 200 {
		t.Errorf("no cache: backlogBytes(6) = %d, want 200 (ledger 2's average 100, twice)", got)
	}
	c.trim(6, &tail)
	check("trimmed to 6", map[uint64]uint64{1: 250, 6: 250})
}
