package meta

import (
	"errors"
	"testing"
)

// An owner's writes are conditioned on its ownership key: they apply while
// it holds, and nothing is written once the key changed hands.
func TestTxnConditionedOnOwnerKey(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	own, err := s.CAS(ctx, "owners/b1", []byte("broker-1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "cursors/c2", []byte("old")); err != nil {
		t.Fatal(err)
	}
	held := []Cond{{Key: "owners/b1", ModRevision: own}}
	rev, err := s.Txn(ctx, held, OpPut("ledgers/t", []byte("L1")), OpPut("cursors/c", []byte("5")), OpDelete("cursors/c2"))
	if err != nil {
		t.Fatalf("txn while owning: %v", err)
	}
	for k, want := range map[string]string{"ledgers/t": "L1", "cursors/c": "5"} {
		kv, err := s.Get(ctx, k)
		if err != nil || string(kv.Value) != want || kv.ModRevision != rev {
			t.Fatalf("%s = %+v, %v; want %q at %d", k, kv, err, want, rev)
		}
	}
	if _, err := s.Get(ctx, "cursors/c2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cursors/c2 not deleted: %v", err)
	}

	// Ownership moves.
	taken, err := s.CAS(ctx, "owners/b1", []byte("broker-2"), own)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Txn(ctx, []Cond{{Key: "cursors/c", ModRevision: rev}, {Key: "owners/b1", ModRevision: own}},
		OpPut("ledgers/t", []byte("L2")), OpPut("new", []byte("x")))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Key != "owners/b1" || ce.Expected != own || ce.Actual != taken {
		t.Fatalf("txn after losing ownership: %v; want conflict on owners/b1 (expected %d actual %d)", err, own, taken)
	}
	if kv, _ := s.Get(ctx, "ledgers/t"); string(kv.Value) != "L1" {
		t.Fatalf("ledgers/t = %q after failed txn, want L1", kv.Value)
	}
	if _, err := s.Get(ctx, "new"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed txn wrote a key: %v", err)
	}

	// Condition "absent", and the first failing condition is the one named.
	_, err = s.Txn(ctx, []Cond{{Key: "fresh", ModRevision: 0}, {Key: "owners/b1", ModRevision: taken}}, OpPut("fresh", []byte("1")))
	if err != nil {
		t.Fatalf("txn with absent condition: %v", err)
	}
	_, err = s.Txn(ctx, []Cond{{Key: "owners/b1", ModRevision: taken}, {Key: "fresh", ModRevision: 0}, {Key: "ledgers/t", ModRevision: 1}}, OpDelete("fresh"))
	if !errors.As(err, &ce) || ce.Key != "fresh" || ce.Actual == 0 {
		t.Fatalf("txn failing on fresh: %v", err)
	}
	if _, err := s.Txn(ctx, nil, Op{}); err == nil {
		t.Fatal("zero Op accepted")
	}
}
