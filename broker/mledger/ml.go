package mledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// ledgerPassword protects the ML's ledgers (fencing needs it). The same
// for every topic: it guards against accidents, not attackers.
var ledgerPassword = []byte("strata/mledger")

// CustomTopic is the custom property naming the topic ("t/ns/topic") of
// every ledger an ML creates, so that ledgers no list refers to (a crash
// between creating a ledger and recording it) can be found.
const CustomTopic = "strata.topic"

// ML is the managed ledger of one topic, owned by this process: see the
// package doc. Safe for concurrent use.
type ML struct {
	cfg Config
	// offPolicy, once set (SetOffloadPolicy), replaces cfg.Offload.
	offPolicy atomic.Pointer[offloadPolicyBox]
	name      tenancy.Name
	key       string
	log       *slog.Logger
	// local is the origin stream the topic's compact records stand for
	// (TopicMeta.Local): every record is encoded and decoded with it.
	// Fixed at Open.
	local Local

	// ctx ends when the ML stops; every goroutine and I/O of the ML
	// watches it.
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	core *core
	// hidden are sequences a test hook removed (HideForTest): they read
	// as gone. Nil in production.
	hidden  map[uint64]bool
	spec    []byte
	created time.Time
	cur     *openLedger // receives appends
	prev    *openLedger // switched away from, being closed (a rollover in progress)
	spare   *openLedger // created ahead for the next rollover
	// spareSaved: the spare is recorded as TopicMeta.Spare in etcd (only
	// then may Publish switch to it).
	spareSaved bool
	queue      []*item // publishes not yet answered, in call order
	qhead      int
	// batch queues stored messages until they go to the ledger writer, in
	// entries it cuts (the batching policy).
	batch batcher
	// sending: a goroutine is in send, appending the entries batch lets
	// go; only it appends, so entry order is sequence order.
	sending bool
	// lingering: the first message queued while no entry was in flight
	// waits for more (Config.Linger); send appends nothing meanwhile.
	// lingerStart and lastPush are when it began and when the latest
	// message was queued (monotonic clock, not Config.Now).
	lingering             bool
	lingerStart, lastPush time.Time
	lingerTimer           *time.Timer
	// room, when not nil, is closed once queued bytes drop (or the ML
	// stops): Publishes blocked by MaxQueuedBytes wait on it.
	room    chan struct{}
	cache   tailCache
	backlog backlogCache
	trash   []int64 // ledgers out of the list, to delete
	dirty   bool    // state changed since the last metadata write
	closing bool    // Close or DeleteTopic began: Publish refused
	stopErr error   // set once stopped: what later calls get
	lostErr error   // set when it stopped by itself (OnLost)
	notify  chan struct{}
	rollErr time.Time // a rollover failed to create a ledger: retry after

	// rev is the topic key's mod revision as last written; only the loop
	// (and Open, before it starts) touches it.
	rev int64
	// readRetry: reads of trimmed messages or of FirstTime failed; the
	// loop retries after this (loop only).
	readRetry time.Time

	completeCh chan struct{} // wakes the completer
	// answering is held by the goroutine answering publishes: the
	// completer, or a writer callback that found the completer idle
	// (onAdded). One at a time, so answers keep their order.
	answering sync.Mutex
	kickCh    chan struct{} // wakes the loop
	reqCh     chan request
	done      chan struct{} // closed once stopped and released
	loopDone  chan struct{}
	complDone chan struct{}

	rmu      sync.Mutex
	readers  map[int64]*ledger.Reader // of closed ledgers
	treaders map[int64]TierReader     // of offloaded ledgers' tier copies

	// off is the offload driver's state (offload.go; guarded by mu);
	// offWG waits for its copy goroutine.
	off   offloadState
	offWG sync.WaitGroup
	// index maps sequences to entries within ledgers.
	index *entryIndex
}

// openLedger is a ledger the ML writes.
type openLedger struct {
	w        *ledger.Writer
	id       int64
	firstSeq uint64
	created  time.Time
	appended int64 // messages given to it (queued or sent; guarded by mu)
	bytes    int64 // their bytes (EncodedSize)
	entries  int64 // entries sent to its writer (guarded by mu)
	// recorded: the ledger is in the list in etcd, so its confirmed
	// messages may be acknowledged (guarded by mu).
	recorded bool
}

// item is one Publish awaiting its answer.
type item struct {
	done  func(PubResult, error)
	seq   uint64 // assigned, or the original's for a duplicate
	dup   bool
	err   error // refused by a check
	led   *openLedger
	rec   []byte  // its record in an entry (appendRecord)
	msg   Message // the stored message (aliases rec)
	msgID string
	size  int64 // EncodedSize = len(rec)
	// entryFirst: it is the first message of its entry (set when sent).
	entryFirst bool
	confirmed  bool // its entry was confirmed at the ack quorum
	// skip: not a message but a gap record accepted by SkipOrigin, applied
	// to the confirmed marks when its turn comes (everything before it
	// answered).
	skip *skipItem
}

// skipItem is a gap record in the publish queue.
type skipItem struct {
	stream      replicator.Stream
	first, last uint64
	lost        uint64 // set when applied
}

type request struct {
	fn    func() error
	reply chan error
}

func newML(cfg Config, name tenancy.Name, tm *TopicMeta, rev int64, c *core) *ML {
	ctx, cancel := context.WithCancel(context.Background())
	return &ML{
		cfg: cfg, name: name, key: TopicKey(name), local: tm.Local(),
		log: cfg.Logger.With("topic", name.String()),
		ctx: ctx, cancel: cancel,
		core: c, spec: slices.Clone([]byte(tm.Spec)), created: tm.Created,
		trash: slices.Clone(tm.Trash), rev: rev,
		cache:      tailCache{},
		backlog:    backlogCache{budget: int64(cfg.CacheBytes / 4)},
		batch:      newBatcher(cfg.MaxInflightEntries, cfg.MaxBatchMsgs, cfg.MaxBatchBytes),
		index:      newEntryIndex(cfg.CacheBytes / 64),
		notify:     make(chan struct{}),
		completeCh: make(chan struct{}, 1), kickCh: make(chan struct{}, 1),
		reqCh: make(chan request), done: make(chan struct{}),
		loopDone: make(chan struct{}), complDone: make(chan struct{}),
		readers: map[int64]*ledger.Reader{}, treaders: map[int64]TierReader{},
		off: offloadState{keep: -1},
	}
}

// Name is the topic's name.
func (m *ML) Name() tenancy.Name { return m.name }

// Done is closed when the ML has stopped, for any reason, and every
// pending publish has been answered.
func (m *ML) Done() <-chan struct{} { return m.done }

// Err is why the ML stopped (nil while it runs): wraps ErrClosed after
// Close or DeleteTopic, ErrNotOwner after Drop or a loss of ownership,
// or the ledger writer's error.
func (m *ML) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopErr
}

// State is the topic's confirmed state.
func (m *ML) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.core
	s := State{
		Msgs: c.msgs(), Bytes: uint64(max(c.live, 0)), FirstSeq: c.first,
		LastSeq: c.conf.seq, LastTime: c.conf.time, NumSubjects: c.subjects.numConf,
		Incarnation: c.incarnation, LastOriginSeq: c.conf.origin, OriginsLost: c.lost,
	}
	if s.Msgs > 0 {
		s.FirstTime = c.firstTime
		if cm, ok := m.cache.get(c.first); ok {
			s.FirstTime = cm.m.Time
		}
	}
	return s
}

// Notify returns a channel closed when the last confirmed sequence moves
// on, or the ML stops. Call it again for the next change.
func (m *ML) Notify() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.notify
}

// LastForSubject is the last confirmed live sequence of subject (exact
// subjects, no wildcards) and its message count; 0, 0 if none. The count
// may include trimmed messages for a while (package doc: subject index).
func (m *ML) LastForSubject(subject string) (seq uint64, count uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.core.subjects.lastConf(subject, m.core.first)
}

// Subjects returns subject → confirmed message count (a copy), for the
// subjects with a live message.
func (m *ML) Subjects() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]uint64, m.core.subjects.numConf)
	for k, s := range m.core.subjects.m {
		if s.cCount > 0 && s.cLast >= m.core.first {
			out[k] = s.cCount
		}
	}
	return out
}

// Spec is the topic's spec (a copy).
func (m *ML) Spec() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.spec)
}

// refuseErr is what a call gets once the ML closes or stops (mu held).
func (m *ML) refuseErr() error {
	if m.stopErr != nil {
		return m.stopErr
	}
	if m.closing {
		return fmt.Errorf("%w: %s", ErrClosed, m.name)
	}
	return nil
}

// ownershipLost reports whether err means another owner took over.
func ownershipLost(err error) bool {
	return errors.Is(err, meta.ErrConflict) || errors.Is(err, ledger.ErrFenced) ||
		errors.Is(err, ledger.ErrRecovering) || errors.Is(err, ledger.ErrLedgerClosed) ||
		errors.Is(err, ledger.ErrMetadataConflict) || errors.Is(err, ErrNotOwner)
}

// lose stops the ML because of cause (a failed add, a failed
// conditioned write): every pending and later call fails, nothing is
// written again, OnLost is called once. A no-op once stopped.
func (m *ML) lose(cause error) {
	err := cause
	if ownershipLost(cause) {
		if !errors.Is(cause, ErrNotOwner) {
			err = fmt.Errorf("%w: %s: %w", ErrNotOwner, m.name, cause)
		}
	} else {
		err = fmt.Errorf("mledger: %s stopped: %w", m.name, cause)
	}
	m.mu.Lock()
	if m.stopErr != nil {
		m.mu.Unlock()
		return
	}
	if !m.closing || ownershipLost(cause) {
		m.lostErr = err
	}
	m.stopLocked(err)
	m.mu.Unlock()
	m.log.Warn("managed ledger lost", "err", err)
	m.cancel()
}

// stopLocked records err as the stop reason (mu held): later calls fail
// with it, the completer answers what is pending and exits, waiters wake.
func (m *ML) stopLocked(err error) {
	if m.stopErr != nil {
		return
	}
	m.stopErr = err
	close(m.notify)
	m.wakeRoomLocked()
	m.wakeCompleter()
}

// stop stops the ML with err and ends its work in progress.
func (m *ML) stop(err error) {
	m.mu.Lock()
	m.stopLocked(err)
	m.mu.Unlock()
	m.cancel()
}

func (m *ML) wakeCompleter() {
	select {
	case m.completeCh <- struct{}{}:
	default:
	}
}

func (m *ML) kick() {
	select {
	case m.kickCh <- struct{}{}:
	default:
	}
}

// request runs fn on the loop and returns its error; ErrClosed (or why
// the ML stopped) if it stopped first; ctx's error if ctx ends first
// (fn may still run).
func (m *ML) request(ctx context.Context, fn func() error) error {
	r := request{fn: fn, reply: make(chan error, 1)}
	select {
	case m.reqCh <- r:
	case <-m.done: // closed before OnLost, which may call us on the loop
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.refuseErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
