package mledger

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
)

// Defaults of Limits and Config.
const (
	DefaultDuplicateWindow     = 2 * time.Minute
	DefaultCacheBytes          = 32 << 20
	DefaultEnsemble            = 3
	DefaultWriteQuorum         = 2
	DefaultAckQuorum           = 2
	DefaultMaintenanceInterval = time.Second
	// DefaultMaxSnapshotDedup bounds the Nats-Msg-Ids a snapshot keeps.
	DefaultMaxSnapshotDedup = 10000
	// Batching (Config.MaxInflightEntries and after).
	DefaultMaxInflightEntries = 4
	DefaultMaxBatchBytes      = 1 << 20
	DefaultMaxBatchMsgs       = 1000
	DefaultMaxQueuedBytes     = 16 << 20
	DefaultLinger             = 500 * time.Microsecond
	DefaultLingerGap          = 50 * time.Microsecond
)

// Limits are a topic's retention and rollover limits: the JetStream
// StreamConfig's limits (nats-wire §2.3) plus the ledger rollover policy.
type Limits struct {
	// MaxMsgs, MaxBytes: at most this many messages / bytes of messages
	// (each message counted as its encoded entry size, EncodedSize) are
	// kept; older ones are trimmed, or, with DiscardNew, new ones refused.
	// <= 0: unlimited (JetStream max_msgs/max_bytes -1).
	MaxMsgs, MaxBytes int64
	// MaxAge: messages older than this are trimmed (JetStream max_age).
	// 0: forever.
	MaxAge time.Duration
	// MaxMsgSize: a message whose header+data is bigger is refused with
	// ErrMsgTooBig (JetStream max_msg_size). <= 0: unlimited (still bound
	// by Config.MaxEntrySize).
	MaxMsgSize int32
	// DiscardNew: at MaxMsgs/MaxBytes refuse new messages (ErrStoreFull)
	// instead of trimming the oldest (JetStream discard "new").
	DiscardNew bool
	// DuplicateWindow: how long a Nats-Msg-Id is remembered. 0: 2 min.
	DuplicateWindow time.Duration
	// RolloverEntries, RolloverBytes, RolloverAge: close the open ledger
	// and open the next one when it has this many messages (not ledger
	// entries, which hold batches of messages: the name is historical),
	// this many bytes of messages (EncodedSize), or is this old (and holds
	// at least one message). 0: that limit is off. The open ledger also
	// rolls over at Config.CacheBytes/2 bytes, whatever RolloverBytes says
	// (its messages stay cached until it is closed; see the package doc).
	RolloverEntries, RolloverBytes int64
	RolloverAge                    time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.DuplicateWindow <= 0 {
		l.DuplicateWindow = DefaultDuplicateWindow
	}
	return l
}

// Config configures an ML (Open).
type Config struct {
	// Store is the region's metadata (required). Not closed by the ML.
	Store *meta.Store
	// Ledgers is the region's ledger client (required). Not closed by
	// the ML.
	Ledgers *ledger.Client
	// Ensemble, WriteQuorum, AckQuorum of the ledgers the ML creates
	// (E ≥ Qw ≥ Qa ≥ 1). 0: 3, 2, 2. Needs at least E writable bookies.
	Ensemble, WriteQuorum, AckQuorum int
	// Cond is the ownership condition every metadata write is made on
	// (e.g. Leadership.Cond()); a failed condition means ownership was
	// lost (ErrNotOwner). Required (Key not empty).
	Cond meta.Cond
	// Limits are the topic's retention and rollover limits.
	Limits Limits
	// Region is the local region's name (ARCHITECTURE §4): every local
	// publish (no PublishOptions.Origin) is stored with the origin
	// (Region, the topic's incarnation, the next local origin sequence,
	// its publish time), and replicated publishes naming Region are
	// refused. "": local publishes record no origin (and have no origin
	// sequence); set it wherever the topic may replicate. A token of
	// [A-Za-z0-9_-]+, like the topology's region names. A region's name
	// must not change while its topics exist: a message stored under the
	// old name would count as another region's. The first Open with a
	// Region records it as the topic's (TopicMeta.Region): local messages
	// are stored compact (their origin sequence alone) while the two
	// agree, and the stored ones keep the recorded name whatever this is
	// later; an ML whose Region differs stores its local messages with
	// full origins (about 50 bytes more each).
	Region string
	// CacheBytes bounds the memory held by recent confirmed messages
	// kept for reads, in bytes (encoded size plus ~64 bytes overhead
	// each); the open ledger's messages are always kept (see
	// Limits.RolloverBytes). A quarter more is used for read-ahead of
	// older messages, and up to an eighth more for the index of entries
	// (8 bytes per ledger entry of the ledgers read or written lately;
	// older ledgers' are learnt again by reading them in order). Default
	// 32 MiB.
	CacheBytes int
	// MaxEntrySize is the largest ledger entry the ML writes, in bytes: a
	// message whose entry alone would be larger (EncodedSize plus the
	// 13-byte entry header) is refused with ErrMsgTooBig. It must not
	// exceed the ledger client's MaxEntrySize. Default
	// ledger.DefaultMaxEntrySize.
	MaxEntrySize int
	// MaxInflightEntries (K) bounds the entries appended to the ledger and
	// not yet confirmed. While K are in flight, publishes queue; when one
	// is confirmed, everything queued goes out as one entry (within
	// MaxBatchBytes and MaxBatchMsgs). Default 4. Larger: more adds in
	// flight (more throughput while the bookies have spare capacity),
	// smaller batches; 1: one add at a time, the largest batches.
	MaxInflightEntries int
	// MaxBatchBytes bounds an entry that holds several messages, in bytes
	// (entry header included; a single larger message goes alone). Default
	// 1 MiB; never more than MaxEntrySize. Larger batches cost fewer adds
	// but more memory in flight and more to read back per entry.
	MaxBatchBytes int
	// MaxBatchMsgs bounds the messages in one entry. Default 1000.
	MaxBatchMsgs int
	// Linger and LingerGap gather a burst into one entry when the ledger
	// is idle: when a message is queued while no entry is in flight, it
	// waits until no further message was published for LingerGap, for at
	// most Linger from the first, or until a full entry (MaxBatchMsgs,
	// MaxBatchBytes) is queued. A burst of publishes after a pause (a
	// client's window of async publishes) then costs one bookie round trip
	// instead of two. While entries are in flight nothing lingers (the
	// entries in flight are the wait). Defaults 500 µs and 50 µs; a lone
	// publish on a quiet topic waits LingerGap. Linger < 0: no linger
	// (every message goes at once when fewer than MaxInflightEntries are
	// in flight).
	Linger, LingerGap time.Duration
	// MaxQueuedBytes bounds the messages (EncodedSize) published but not
	// yet appended to the ledger: beyond it Publish blocks until entries
	// are confirmed (back-pressure; one message is always admitted).
	// Default 16 MiB.
	MaxQueuedBytes int
	// AfterAnswers, if set, is called by the goroutine that answers
	// publishes (the one calling their done; one at a time) after each
	// run of answers,
	// before it waits for more: a caller whose done only buffers its reply
	// sends the buffer then, so a batch of answers leaves together. It
	// must not block. A done called inline by Publish (a refusal) is not
	// followed by it.
	AfterAnswers func()
	// MaintenanceInterval is how often the ML checks RolloverAge and
	// MaxAge and persists lazy changes (trims) to etcd. Default 1 s.
	// Shorter: trims reach etcd sooner, more etcd writes.
	MaintenanceInterval time.Duration
	// MaxSnapshotDedup bounds the Nats-Msg-Ids written in a snapshot (the
	// most recent ones): ids beyond it are forgotten by the next owner.
	// Default 10000 (about 0.5 MiB of etcd value with 40-byte ids).
	MaxSnapshotDedup int
	// Now is the clock for publish times, ages and the dedup window.
	// Default time.Now.
	Now func() time.Time
	// Tier is the region's tier for offloading closed ledgers (offload.go);
	// nil: none (offloaded ledgers of an earlier owner cannot be read
	// once their bookie copy is gone).
	Tier Tier
	// Offload is the namespace's offload policy; nil: offload only on
	// request (OffloadNow). Needs Tier.
	Offload *OffloadPolicy
	// WrapOffloadSource, when set, wraps the bookie reader an offload
	// copies from (tests inject read failures with it).
	WrapOffloadSource func(EntryReader) EntryReader
	// OnLost is called once when the ML stops by itself: ownership lost
	// (the error wraps ErrNotOwner) or its ledger writer failed. It runs
	// on the ML's goroutine after Done is closed and every pending done
	// has been called; it may call the ML's methods. Nil: nothing.
	OnLost func(error)
	// Logger; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the documented defaults; Store, Ledgers and Cond
// must still be set.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Ensemble == 0 && c.WriteQuorum == 0 && c.AckQuorum == 0 {
		c.Ensemble, c.WriteQuorum, c.AckQuorum = DefaultEnsemble, DefaultWriteQuorum, DefaultAckQuorum
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.MaxEntrySize <= 0 {
		c.MaxEntrySize = ledger.DefaultMaxEntrySize
	}
	if c.MaxInflightEntries <= 0 {
		c.MaxInflightEntries = DefaultMaxInflightEntries
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	c.MaxBatchBytes = min(c.MaxBatchBytes, c.MaxEntrySize)
	if c.MaxBatchMsgs <= 0 {
		c.MaxBatchMsgs = DefaultMaxBatchMsgs
	}
	if c.MaxQueuedBytes <= 0 {
		c.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.LingerGap <= 0 {
		c.LingerGap = DefaultLingerGap
	}
	c.LingerGap = min(c.LingerGap, max(c.Linger, 0))
	if c.MaintenanceInterval <= 0 {
		c.MaintenanceInterval = DefaultMaintenanceInterval
	}
	if c.MaxSnapshotDedup <= 0 {
		c.MaxSnapshotDedup = DefaultMaxSnapshotDedup
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.OnLost == nil {
		c.OnLost = func(error) {}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.Limits = c.Limits.withDefaults()
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("mledger: Config.Store is required"))
	}
	if c.Ledgers == nil {
		errs = append(errs, errors.New("mledger: Config.Ledgers is required"))
	}
	if c.Region != "" && !tenancy.ValidToken(c.Region) {
		errs = append(errs, fmt.Errorf("mledger: Config.Region %q is not a token of [A-Za-z0-9_-]+", c.Region))
	}
	if c.Cond.Key == "" {
		errs = append(errs, errors.New("mledger: Config.Cond.Key is required (the ownership condition)"))
	}
	if c.MaxEntrySize <= batchHeaderSize+minRecordSize {
		errs = append(errs, fmt.Errorf("mledger: Config.MaxEntrySize %d leaves no room for a message", c.MaxEntrySize))
	}
	if int64(c.MaxBatchMsgs) > maxBatchCount {
		errs = append(errs, fmt.Errorf("mledger: Config.MaxBatchMsgs %d is above %d", c.MaxBatchMsgs, maxBatchCount))
	}
	if !(c.Ensemble >= c.WriteQuorum && c.WriteQuorum >= c.AckQuorum && c.AckQuorum >= 1) {
		errs = append(errs, fmt.Errorf("mledger: need E ≥ Qw ≥ Qa ≥ 1, have E=%d Qw=%d Qa=%d", c.Ensemble, c.WriteQuorum, c.AckQuorum))
	}
	return errors.Join(errs...)
}
