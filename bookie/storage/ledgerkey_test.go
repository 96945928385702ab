package storage

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

// TestFailedFirstRecordKeepsTheMasterKey: the first record of a ledger
// (an add, or a fence) fails its journal fsync and is rolled back; the
// ledger stays in memory with its key. The retried add must journal the
// key again: it was journaled without it, and after a crash the ledger
// came back with no key, refusing its owner and taking an empty key.
func TestFailedFirstRecordKeepsTheMasterKey(t *testing.T) {
	for _, first := range []string{"add", "fence"} {
		t.Run(first, func(t *testing.T) {
			mem := vfs.NewMem()
			efs := vfs.NewErrorFS(mem, nil)
			cfg := testConfig(efs)
			cfg.JournalPreallocate = 0 // no filler: the only journal syncs are the writer's
			e := open(t, cfg)
			mustAdd(t, e, addReq(9, 0)) // another ledger, so the journal is in use
			efs.SetInjector(vfs.NewFailNth(1, vfs.And(vfs.OnKind(vfs.OpSync), inJournal), errors.New("fsync: EIO")))
			var err error
			if first == "add" {
				err = add(t, e, addReq(1, 0))
			} else {
				_, err = e.Fence(context.Background(), 1, key(1))
			}
			if err == nil {
				t.Fatalf("first %s of ledger 1 did not fail", first)
			}
			efs.SetInjector(nil)
			req := addReq(1, 0)
			req.Recovery = first == "fence" // a fenced ledger takes recovery adds only
			mustAdd(t, e, req)
			crashed := mem.CrashClone()
			e.Close()
			e2 := open(t, testConfig(crashed))
			checkEntry(t, e2, 1, 0)
			intruder := AddRequest{LedgerID: 1, EntryID: 1, LAC: 0, MasterKey: nil, Payload: []byte("intruder"), Recovery: true}
			if err := add(t, e2, intruder); !errors.Is(err, ErrMasterKey) {
				t.Errorf("add with another (empty) master key after the crash: %v, want ErrMasterKey", err)
			}
			if _, err := e2.Fence(context.Background(), 1, key(1)); err != nil {
				t.Errorf("fence with the ledger's master key after the crash: %v", err)
			}
		})
	}
}

// holdSync blocks the next journal sync once armed, then fails it.
type holdSync struct {
	armed   atomic.Bool
	blocked chan struct{}
	release chan struct{}
}

func (b *holdSync) MaybeError(op vfs.Op) error {
	if op.Kind == vfs.OpSync && strings.Contains(op.Path, "/"+journalDir+"/") && b.armed.CompareAndSwap(true, false) {
		b.blocked <- struct{}{}
		<-b.release
		return errors.New("fsync: EIO")
	}
	return nil
}

// TestNoRecreateWhileDeleting: while a ledger's delete is in flight, an
// add or fence that would create it again is refused; the delete then
// fails (its journal fsync does), and the ledger is the old one, with its
// key and entries, live and after a crash. (The add used to create a new
// incarnation over the old one's index entries, whose key flipped back to
// the old one's at replay.)
func TestNoRecreateWhileDeleting(t *testing.T) {
	mem := vfs.NewMem()
	hs := &holdSync{blocked: make(chan struct{}, 1), release: make(chan struct{})}
	cfg := testConfig(vfs.NewErrorFS(mem, hs))
	cfg.JournalPreallocate = 0
	e := open(t, cfg)
	addMany(t, e, 1, 0, 5)
	flush(t, e)
	hs.armed.Store(true)
	delErr := make(chan error, 1)
	go func() { delErr <- e.DeleteLedger(1) }()
	<-hs.blocked // the delete's batch is written, its fsync held
	other := []byte("other-key")
	addErr, fenceErr := make(chan error, 1), make(chan error, 1)
	e.Add(AddRequest{LedgerID: 1, EntryID: 0, LAC: -1, MasterKey: other, Payload: []byte("new")}, func(err error) { addErr <- err })
	go func() { _, err := e.Fence(context.Background(), 1, other); fenceErr <- err }()
	close(hs.release) // (without the refusal, the add and fence would wait for this sync)
	if err := <-delErr; err == nil {
		t.Fatal("the delete did not fail")
	}
	if err := <-addErr; !errors.Is(err, ErrInvalid) {
		t.Errorf("add creating ledger 1 again during its delete: %v, want ErrInvalid", err)
	}
	// The fence may run before the delete fails (refused: being deleted)
	// or after (refused: the old ledger's key); never a new incarnation.
	if err := <-fenceErr; !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrMasterKey) {
		t.Errorf("fence creating ledger 1 again during its delete: %v, want ErrInvalid or ErrMasterKey", err)
	}
	check := func(e *Engine, when string, next int64) {
		t.Helper()
		for i := int64(0); i < next; i++ {
			checkEntry(t, e, 1, i)
		}
		if err := add(t, e, AddRequest{LedgerID: 1, EntryID: next, LAC: next - 1, MasterKey: other, Payload: []byte("x")}); !errors.Is(err, ErrMasterKey) {
			t.Errorf("%s: add with another key: %v, want ErrMasterKey", when, err)
		}
		mustAdd(t, e, addReq(1, next))
	}
	check(e, "live", 5)
	crashed := mem.CrashClone()
	e.Close()
	check(open(t, testConfig(crashed)), "after a crash", 6)
}
