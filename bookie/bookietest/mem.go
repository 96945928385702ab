// Package bookietest provides an in-memory storage.Storage for tests of
// the bookie service and its clients (the ledger client's tests too). It
// follows the storage contract (fencing, master keys, LAC, read-only,
// close) without any I/O, and lets tests hold add completions to release
// them later in any order, inject faults, and mark entries corrupt.
//
// It must not be used outside tests. Mem is safe for concurrent use.
package bookietest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/stratamesh/strata/bookie/storage"
)

// Ops named to a Fault hook.
const (
	OpAdd       = "add"
	OpRead      = "read"
	OpReadRange = "read_range"
	OpFence     = "fence"
	OpLAC       = "lac"
	OpWaitLAC   = "wait_lac"
	OpDelete    = "delete"
)

// Fault, when set, is consulted at the start of each operation; a non-nil
// error fails the operation with it. entryID is -1 where the operation
// names no entry.
type Fault func(op string, ledgerID, entryID int64) error

// Mem is an in-memory storage.Storage.
type Mem struct {
	mu       sync.Mutex
	ledgers  map[int64]*ledger
	usage    storage.Usage
	closed   bool
	closedCh chan struct{}
	fault    Fault
	hold     bool
	held     []held
	maxHeld  int
	adds     int
}

type ledger struct {
	key     []byte
	fenced  bool
	lac     int64
	entries map[int64]storage.Entry
	corrupt map[int64]bool
	bytes   int64
	lacCh   chan struct{} // closed (and replaced) when lac grows
}

type held struct {
	done func(error)
	err  error
}

var _ storage.Storage = (*Mem)(nil)

// NewMem returns an empty, writable Mem reporting 1 GiB free of 2 GiB.
func NewMem() *Mem {
	return &Mem{
		ledgers:  map[int64]*ledger{},
		usage:    storage.Usage{FreeBytes: 1 << 30, TotalBytes: 2 << 30},
		closedCh: make(chan struct{}),
	}
}

// SetFault installs (nil: removes) a fault hook.
func (m *Mem) SetFault(f Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fault = f
}

// SetReadOnly turns the read-only state on or off (adds then fail with
// storage.ErrReadOnly).
func (m *Mem) SetReadOnly(ro bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage.ReadOnly = ro
}

// SetUsage sets what Usage reports (ReadOnly included).
func (m *Mem) SetUsage(u storage.Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage = u
}

// Corrupt makes the entry fail its checksum from now on.
func (m *Mem) Corrupt(ledgerID, entryID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.ledgers[ledgerID]; l != nil {
		l.corrupt[entryID] = true
	}
}

// Hold makes Add keep its completions (done callbacks) until released by
// ReleaseHeld; Hold(false) stops holding new ones (held ones stay held).
// Adds take effect (are readable, move the LAC) at once either way.
func (m *Mem) Hold(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hold = on
}

// Held is the number of completions held now.
func (m *Mem) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

// MaxHeld is the largest number of completions held at once so far.
func (m *Mem) MaxHeld() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxHeld
}

// Adds is the number of Add calls so far.
func (m *Mem) Adds() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.adds
}

// ReleaseHeld completes every held add, in the order shuffle leaves them
// (it is called like rand.Shuffle; nil keeps the order of the Add calls),
// and returns how many it completed. Callbacks run on the caller's
// goroutine.
func (m *Mem) ReleaseHeld(shuffle func(n int, swap func(i, j int))) int {
	m.mu.Lock()
	hs := m.held
	m.held = nil
	m.mu.Unlock()
	if shuffle != nil {
		shuffle(len(hs), func(i, j int) { hs[i], hs[j] = hs[j], hs[i] })
	}
	for _, h := range hs {
		h.done(h.err)
	}
	return len(hs)
}

func (m *Mem) check(op string, ledgerID, entryID int64) error {
	if m.closed {
		return storage.ErrClosed
	}
	if m.fault != nil {
		return m.fault(op, ledgerID, entryID)
	}
	return nil
}

// Add implements storage.Storage.
func (m *Mem) Add(req storage.AddRequest, done func(error)) {
	m.mu.Lock()
	m.adds++
	err := m.add(req)
	if m.hold {
		m.held = append(m.held, held{done: done, err: err})
		m.maxHeld = max(m.maxHeld, len(m.held))
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	done(err)
}

func (m *Mem) add(req storage.AddRequest) error {
	if err := m.check(OpAdd, req.LedgerID, req.EntryID); err != nil {
		return err
	}
	if m.usage.ReadOnly && !req.Recovery { // recovery adds pass, as the engine's
		return storage.ErrReadOnly
	}
	l := m.ledgers[req.LedgerID]
	if l == nil {
		l = m.newLedger(req.LedgerID, req.MasterKey)
	}
	switch {
	case string(l.key) != string(req.MasterKey):
		return storage.ErrMasterKey
	case l.fenced && !req.Recovery:
		return storage.ErrFenced
	}
	if old, ok := l.entries[req.EntryID]; ok {
		l.bytes -= int64(len(old.Payload))
	}
	l.entries[req.EntryID] = storage.Entry{LedgerID: req.LedgerID, EntryID: req.EntryID, LAC: req.LAC, Payload: slices.Clone(req.Payload)}
	delete(l.corrupt, req.EntryID)
	l.bytes += int64(len(req.Payload))
	if req.LAC > l.lac {
		l.lac = req.LAC
		l.wake()
	}
	return nil
}

func (m *Mem) newLedger(id int64, key []byte) *ledger {
	l := &ledger{
		key: slices.Clone(key), lac: storage.NoEntry,
		entries: map[int64]storage.Entry{}, corrupt: map[int64]bool{},
		lacCh: make(chan struct{}),
	}
	m.ledgers[id] = l
	return l
}

// Read implements storage.Storage.
func (m *Mem) Read(ledgerID, entryID int64) (storage.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRead, ledgerID, entryID); err != nil {
		return storage.Entry{}, err
	}
	return m.read(ledgerID, entryID)
}

func (m *Mem) read(ledgerID, entryID int64) (storage.Entry, error) {
	l := m.ledgers[ledgerID]
	if l == nil {
		return storage.Entry{}, storage.ErrNoLedger
	}
	e, ok := l.entries[entryID]
	switch {
	case !ok:
		return storage.Entry{}, storage.ErrNoEntry
	case l.corrupt[entryID]:
		return storage.Entry{}, storage.ErrCorrupt
	}
	e.Payload = slices.Clone(e.Payload)
	return e, nil
}

// ReadRange implements storage.Storage. It stops before the entry that
// would take the payload total past maxBytes (so it may return nothing),
// at the first missing entry, and before a corrupt entry (ErrCorrupt if
// that is the first).
func (m *Mem) ReadRange(ledgerID, first, last int64, maxBytes int) ([]storage.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpReadRange, ledgerID, first); err != nil {
		return nil, err
	}
	if m.ledgers[ledgerID] == nil {
		return nil, storage.ErrNoLedger
	}
	var out []storage.Entry
	size := 0
	for id := first; id <= last && id >= first; id++ {
		e, err := m.read(ledgerID, id)
		if err == storage.ErrCorrupt {
			return out, err // as the engine: the entries before it, and the error
		}
		if err != nil {
			break
		}
		size += len(e.Payload)
		if maxBytes > 0 && size > maxBytes {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// Fence implements storage.Storage.
func (m *Mem) Fence(_ context.Context, ledgerID int64, masterKey []byte) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpFence, ledgerID, -1); err != nil {
		return storage.NoEntry, err
	}
	l := m.ledgers[ledgerID]
	if l == nil {
		l = m.newLedger(ledgerID, masterKey)
	}
	if string(l.key) != string(masterKey) {
		return storage.NoEntry, storage.ErrMasterKey
	}
	l.fenced = true
	l.wake() // long polls end on a fence, as the engine's
	return l.lac, nil
}

// LAC implements storage.Storage.
func (m *Mem) LAC(ledgerID int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpLAC, ledgerID, -1); err != nil {
		return storage.NoEntry, err
	}
	l := m.ledgers[ledgerID]
	if l == nil {
		return storage.NoEntry, storage.ErrNoLedger
	}
	return l.lac, nil
}

// WaitLAC implements storage.Storage. An unknown ledger is ErrNoLedger at
// once.
func (m *Mem) WaitLAC(ctx context.Context, ledgerID int64, after int64) (int64, error) {
	for {
		m.mu.Lock()
		if err := m.check(OpWaitLAC, ledgerID, -1); err != nil {
			m.mu.Unlock()
			return storage.NoEntry, err
		}
		l := m.ledgers[ledgerID]
		if l == nil {
			m.mu.Unlock()
			return storage.NoEntry, storage.ErrNoLedger
		}
		lac, ch, fenced := l.lac, l.lacCh, l.fenced
		m.mu.Unlock()
		if lac > after || fenced {
			return lac, nil
		}
		select {
		case <-ch:
		case <-m.closedCh:
		case <-ctx.Done():
			return lac, ctx.Err()
		}
	}
}

// DeleteLedger implements storage.Storage.
func (m *Mem) DeleteLedger(ledgerID int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpDelete, ledgerID, -1); err != nil {
		return err
	}
	l := m.ledgers[ledgerID]
	if l == nil {
		return storage.ErrNoLedger
	}
	delete(m.ledgers, ledgerID)
	l.wake() // long polls end with ErrNoLedger, as the engine's
	return nil
}

// wake ends the ledger's current long polls (callers hold m.mu).
func (l *ledger) wake() {
	close(l.lacCh)
	l.lacCh = make(chan struct{})
}

// Ledgers implements storage.Storage.
func (m *Mem) Ledgers() []storage.LedgerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := slices.Sorted(maps.Keys(m.ledgers))
	out := make([]storage.LedgerInfo, 0, len(ids))
	for _, id := range ids {
		l := m.ledgers[id]
		last := storage.NoEntry
		for e := range l.entries {
			last = max(last, e)
		}
		out = append(out, storage.LedgerInfo{
			LedgerID: id, LAC: l.lac, LastEntry: last,
			Entries: int64(len(l.entries)), Bytes: l.bytes, Fenced: l.fenced,
		})
	}
	return out
}

// Usage implements storage.Storage.
func (m *Mem) Usage() storage.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage
}

// Close implements storage.Storage: later operations fail with
// storage.ErrClosed, waiting WaitLACs return it, and held completions are
// released with it. Idempotent.
func (m *Mem) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.closedCh)
	hs := m.held
	m.held = nil
	m.mu.Unlock()
	for _, h := range hs {
		h.done(storage.ErrClosed)
	}
	return nil
}
