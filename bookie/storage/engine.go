package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Engine is the bookie's storage engine: journal, write cache, entry logs
// and location index. It implements Storage. See the package doc for its
// design and concurrency rules.
type Engine struct {
	cfg        Config
	log        *slog.Logger
	clock      Clock
	journalDir string
	logDir     string
	locks      []io.Closer // the directories' locks (lockDirs), released last by Close

	// lifecycle: operations that touch the index or entry-log files hold
	// it for reading; Close takes it for writing to set closed, so no
	// such operation runs once shutdown proceeds.
	lifecycle sync.RWMutex
	closed    atomic.Bool
	closing   chan struct{} // closed when Close starts
	closeOnce sync.Once
	closeErr  error
	bg        sync.WaitGroup // the flusher, compactor and prefetcher goroutines (the journal owns its own)

	// mu guards ledgers and the ledger structs' fields (except
	// ledger.flushed, written under flushMu). Lock order: mu, then
	// cache.mu, then the journal's mu.
	mu      sync.RWMutex
	ledgers map[int64]*ledger
	// deleting holds ledgers whose delete is journaled but whose index
	// data is not yet removed: their index entries belong to the old
	// incarnation and must not be seen (by reads or overwrite counting)
	// as the new one's.
	deleting map[int64]bool
	// salt is the journal's batch-header salt, from the owner id
	// (checkJournalOwner).
	salt journalSalt
	// undecided holds ledgers whose delete record is submitted but not yet
	// durable (or failed): adds and fences that would create them again
	// are refused meanwhile (errBeingDeleted).
	undecided map[int64]bool
	cache     writeCache

	ix   *index
	logs *logSet
	// prefetches queue read-ahead requests for runPrefetcher (readrun.go).
	prefetches chan prefetchReq
	j          *journal

	// flushMu serialises every change of the index: flush, DeleteLedger
	// and compaction's commit. It guards cur and checkpoint.
	flushMu    sync.Mutex
	cur        *logWriter          // entry log receiving flushes (nil until the first)
	checkpoint Pos                 // journal position the index is complete up to
	published  atomic.Pointer[Pos] // checkpoint, for Stats without flushMu
	compactMu  sync.Mutex          // one compaction at a time

	flushKick     chan struct{}
	readOnlyDisk  atomic.Bool
	readOnlyAdmin atomic.Bool
	failed        atomic.Pointer[error] // sticky: the index can no longer be updated

	flushes        atomic.Int64
	flushedEntries atomic.Int64
	compactStats   struct {
		sync.Mutex
		CompactStats
	}

	hooks testHooks
}

// testHooks let tests stop the engine at chosen instants (to take a crash
// clone there). Nil in production.
type testHooks struct {
	afterFlushLog     func() // flush: entry log synced, index not yet updated
	afterDeleteLog    func() // DeleteLedger: delete journaled, index not yet updated
	afterCompactCopy  func() // compaction: copies synced, index not yet updated
	afterCompactIndex func() // compaction: index updated, old logs not yet removed
	readRunScanning   func() // readRun: index snapshot taken, cache not yet checked
}

// Open opens (creating if needed) the engine in cfg.Dir (and
// cfg.JournalDir): it loads the index, checks that the journal directory
// is this data directory's, replays the journal from the last checkpoint
// (truncating a torn tail), writes what it replayed to an entry log and
// starts the journal, flusher and compactor. Errors: an invalid Config (every problem), I/O
// errors, ErrForeignJournal (wrapped) when the journal directory is
// another's, and ErrCorrupt (wrapped) for damage that is not a torn tail.
func Open(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:        cfg,
		log:        cfg.Logger,
		clock:      cfg.Clock,
		journalDir: cfg.journalDir(),
		logDir:     filepath.Join(cfg.Dir, logsDir),
		closing:    make(chan struct{}),
		flushKick:  make(chan struct{}, 1),
		deleting:   map[int64]bool{},
		undecided:  map[int64]bool{},
	}
	for _, d := range []string{cfg.Dir, e.journalDir, e.logDir} {
		if err := cfg.FS.MkdirAll(d, 0o700); err != nil { // message data: the owner's only
			return nil, fmt.Errorf("bookie: create %s: %w", d, err)
		}
	}
	locks, err := lockDirs(cfg)
	if err != nil {
		return nil, err
	}
	e.locks = locks
	ix, err := openIndex(cfg.FS, filepath.Join(cfg.Dir, indexDirName), cfg.IndexCacheBytes, cfg.IndexMemTableBytes,
		e.log, cfg.DisableFsync)
	if err != nil {
		unlockDirs(locks)
		return nil, err
	}
	e.ix = ix
	if err := e.load(); err != nil {
		e.abandon()
		return nil, err
	}
	e.checkDisk()
	e.prefetches = make(chan prefetchReq, prefetchQueue)
	e.bg.Add(2)
	go e.runFlusher()
	go e.runPrefetcher()
	if cfg.CompactInterval > 0 {
		e.bg.Add(1)
		go e.runCompactor()
	}
	return e, nil
}

// load loads the index, replays the journal and starts the journal.
func (e *Engine) load() error {
	ledgers, err := e.ix.loadLedgers()
	if err != nil {
		return fmt.Errorf("bookie: load ledgers: %w", err)
	}
	metas, err := e.ix.loadLogs()
	if err != nil {
		return fmt.Errorf("bookie: load entry logs: %w", err)
	}
	e.ledgers = ledgers
	e.logs = &logSet{fs: e.cfg.FS, dir: e.logDir, log: e.log, files: map[uint64]*logFile{}, meta: metas}
	if err := e.checkJournalOwner(); err != nil {
		return err
	}
	if err := e.removeOrphanLogs(); err != nil {
		return err
	}
	cp, _, err := e.ix.checkpoint()
	if err != nil {
		return err
	}
	e.checkpoint = cp
	e.published.Store(&cp)
	e.cache.active = newGen(cp)
	last, seq, err := e.replay(cp)
	if err != nil {
		return err
	}
	e.flushMu.Lock()
	err = e.flushLocked()
	e.flushMu.Unlock()
	if err != nil {
		return err
	}
	j, err := startJournal(journalConfig{
		fs:          e.cfg.FS,
		dir:         e.journalDir,
		clock:       e.clock,
		log:         e.log,
		policy:      groupPolicy{window: e.cfg.JournalGroupWindow, maxBytes: e.cfg.JournalGroupBytes},
		maxPending:  e.cfg.JournalMaxPendingBytes,
		maxFileSize: e.cfg.JournalMaxFileSize,
		prealloc:    e.cfg.JournalPreallocate,
		noSync:      e.cfg.DisableFsync,
		salt:        e.salt,
	}, last+1, seq, e.applyDurable)
	if err != nil {
		return err
	}
	e.j = j
	j.purge(e.checkpoint.File)
	return nil
}

// removeOrphanLogs deletes entry-log files the index does not know: the
// output of a flush or compaction that crashed before its index commit,
// or a log whose removal after compaction was cut short.
func (e *Engine) removeOrphanLogs() error {
	names, err := e.cfg.FS.List(e.logDir)
	if err != nil {
		return fmt.Errorf("bookie: list entry logs: %w", err)
	}
	next := uint64(0)
	for id := range e.logs.meta {
		next = max(next, id+1)
	}
	for _, n := range names {
		id, ok := parseIDFileName(n, entryLogExt)
		if !ok {
			continue
		}
		next = max(next, id+1)
		if _, known := e.logs.meta[id]; !known {
			e.log.Info("removing orphan entry log", "log", id)
			if err := e.cfg.FS.Remove(filepath.Join(e.logDir, n)); err != nil {
				return fmt.Errorf("bookie: remove orphan entry log: %w", err)
			}
		}
	}
	e.logs.nextID = next
	return nil
}

// abandon releases what a failed Open had opened.
func (e *Engine) abandon() {
	if e.j != nil {
		e.j.close()
	}
	if e.cur != nil {
		e.cur.close()
	}
	if e.logs != nil {
		e.logs.close()
	}
	e.ix.close()
	unlockDirs(e.locks)
}

// applyDurable is the journal's callback after a batch's fsync (err nil)
// or its failure: it applies the batch to the ledger table and write
// cache, then completes each op, in journal order.
func (e *Engine) applyDurable(ops []*op, end Pos, err error) {
	if err != nil {
		for _, o := range ops {
			o.done(err)
		}
		return
	}
	e.mu.Lock()
	e.cache.mu.Lock()
	a := applier{ledgers: e.ledgers, cache: &e.cache, indexed: e.indexedPayload, gone: e.deleting}
	for _, o := range ops {
		a.apply(o)
	}
	e.cache.active.end = end
	full := e.cache.active.bytes >= e.cfg.WriteCacheBytes
	e.cache.mu.Unlock()
	e.mu.Unlock()
	if full {
		select {
		case e.flushKick <- struct{}{}:
		default:
		}
	}
	for _, o := range ops {
		o.done(nil)
	}
}

// indexedPayload returns the payload size of an entry in the index.
func (e *Engine) indexedPayload(ledger, entry int64) (int64, bool) {
	loc, ok, err := e.ix.location(ledger, entry)
	if err != nil {
		e.log.Error("index lookup", "ledger", ledger, "entry", entry, "err", err)
		return 0, false
	}
	return entryPayloadLen(int(loc.size)), ok
}

// enter starts an operation that uses the index or entry logs.
func (e *Engine) enter() error {
	e.lifecycle.RLock()
	if e.closed.Load() {
		e.lifecycle.RUnlock()
		return ErrClosed
	}
	return nil
}

func (e *Engine) leave() { e.lifecycle.RUnlock() }

// failure returns the sticky error set when the index could not be
// updated; adds and flushes fail with it until the engine is reopened.
func (e *Engine) failure() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (e *Engine) setFailed(err error) {
	err = fmt.Errorf("bookie: storage failed, reopen required: %w", err)
	if e.failed.CompareAndSwap(nil, &err) {
		e.log.Error("storage failed", "err", err)
	}
}

// Close stops the background work, writes and acks what the journal has
// pending, flushes the write cache (so the next Open replays little) and
// closes every file. Operations after Close fail with ErrClosed; WaitLAC
// callers wake with ErrClosed. Idempotent: later calls return the first
// result.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.shutdown() })
	return e.closeErr
}

func (e *Engine) shutdown() error {
	close(e.closing)
	e.lifecycle.Lock()
	e.closed.Store(true)
	e.lifecycle.Unlock()
	e.bg.Wait()
	// Readers still inside when the prefetcher left may have queued
	// read-aheads after it; none is inside now. Let go of their logs.
	for len(e.prefetches) > 0 {
		e.logs.release((<-e.prefetches).lf)
	}
	errs := []error{e.j.close()}
	e.flushMu.Lock()
	if e.failure() == nil {
		errs = append(errs, e.flushLocked())
	}
	if e.cur != nil {
		errs = append(errs, e.cur.close())
		e.cur = nil
	}
	e.flushMu.Unlock()
	e.logs.close()
	errs = append(errs, e.ix.close())
	unlockDirs(e.locks) // last: nothing of this engine touches the directories now
	return errors.Join(errs...)
}
