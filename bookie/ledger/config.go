package ledger

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/internal/meta"
)

// Defaults of Config.
const (
	DefaultAddTimeout     = 5 * time.Second
	DefaultOpTimeout      = 5 * time.Second
	DefaultReplaceTimeout = 30 * time.Second
	// DefaultBookieQuarantine is longer than a bookie's default
	// registration TTL (bookie.DefaultRegistrationTTL, 10 s), so that a
	// bookie killed outright has left etcd before its quarantine ends,
	// and shorter than DefaultReplaceTimeout, so that a writer whose only
	// candidate is a bookie that failed and came back can still place it
	// before giving up.
	DefaultBookieQuarantine = 20 * time.Second
	DefaultMaxPendingBytes  = 64 << 20
	// DefaultMaxEntrySize is the bookie's default limit less the frame
	// header, so that a default bookie accepts every entry a default
	// client accepts.
	DefaultMaxEntrySize = bookie.DefaultMaxEntrySize - FrameHeaderSize
)

// PlacementFunc chooses n bookies among candidates (registered bookies,
// sorted by id: first those out of the Client's quarantine, and, when
// they are too few, again with the quarantined ones for the rest; see
// Config.BookieQuarantine), none of whose ids is in exclude. It returns
// exactly n distinct registrations, or an error wrapping
// ErrNotEnoughBookies. It is called for Create (exclude empty) and for
// each ensemble change (exclude: the ensemble, the replacements already
// chosen and the bookies that failed the writer lately), from a goroutine of the client, and must not block
// for long.
type PlacementFunc func(candidates []bookie.Registration, n int, exclude []string) ([]bookie.Registration, error)

// Config configures a Client. Start from DefaultConfig and set Store.
type Config struct {
	// Store is the region's metadata (required). The Client does not
	// close it.
	Store *meta.Store
	// Logger receives the client's logs (ensemble changes, recovery
	// retries, failing bookies); nil discards.
	Logger *slog.Logger
	// AddTimeout: an add a bookie has not answered within this counts as
	// that bookie failing, which starts an ensemble change. Shorter
	// replaces a stalled (e.g. SIGSTOPped) bookie sooner; too short
	// replaces bookies that are merely slow (a journal fsync stall).
	// Default 5 s.
	AddTimeout time.Duration
	// OpTimeout bounds each fence, read, ReadLAC and metadata request.
	// Default 5 s.
	OpTimeout time.Duration
	// ReplaceTimeout is how long a writer keeps looking for replacement
	// bookies (retrying placement with backoff) before it gives up with
	// ErrNotEnoughBookies; its unconfirmed appends fail and the ledger
	// stays OPEN for recovery. It runs from the first bookie failure
	// until an entry is confirmed again (or none is pending), across the
	// ensemble changes in between: replacements that fail in turn do
	// not restart it. Default 30 s.
	ReplaceTimeout time.Duration
	// BookieQuarantine is how long a bookie that failed an add of a
	// writer of this Client (no answer within AddTimeout, unavailable,
	// wrong instance, read-only) stays out of placement
	// (BookKeeper's bookieQuarantineTime), even while its registration
	// lives on in etcd until its lease expires: that writer's ensemble
	// changes never place it back in the period (so two bookies that die
	// together are never swapped for each other, one metadata write
	// after another); every other placement of the Client (other
	// writers' ensemble changes, recoveries, Create) prefers bookies out
	// of quarantine and places quarantined ones only when too few others
	// remain. A writer with no candidate left keeps retrying placement
	// with backoff, without writing metadata, until one is free or
	// ReplaceTimeout ends it with ErrNotEnoughBookies. Each new failure
	// restarts the period. A new instance at the same id (a wiped disk)
	// is not in the Client's quarantine. Default DefaultBookieQuarantine
	// (20 s).
	BookieQuarantine time.Duration
	// MaxPendingBytes bounds a Writer's appended but unconfirmed payload
	// bytes: AppendAsync blocks beyond it until earlier entries complete
	// (back-pressure; one entry is always admitted). Default 64 MiB.
	MaxPendingBytes int64
	// MaxEntrySize is the largest payload an append accepts, in bytes;
	// larger ones fail with ErrEntryTooLarge and the writer goes on. The
	// bookies' Limits.MaxEntrySize must be at least this plus
	// FrameHeaderSize. Default DefaultMaxEntrySize (5 MiB − 12 bytes).
	MaxEntrySize int
	// Transport reaches bookies. Nil: GRPCTransport{} (bookie.Dial to the
	// address in the bookie's registration, with gRPC keepalive and fast
	// reconnects). Tests inject faults through it.
	Transport Transport
	// Placement chooses bookies for new ensembles and replacements. Nil:
	// DefaultPlacement (writable bookies, chosen at random).
	Placement PlacementFunc
}

// DefaultConfig returns the documented defaults; Store must still be set.
func DefaultConfig() Config {
	return Config{
		AddTimeout: DefaultAddTimeout, OpTimeout: DefaultOpTimeout, ReplaceTimeout: DefaultReplaceTimeout,
		BookieQuarantine: DefaultBookieQuarantine, MaxPendingBytes: DefaultMaxPendingBytes, MaxEntrySize: DefaultMaxEntrySize,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.AddTimeout == 0 {
		c.AddTimeout = d.AddTimeout
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = d.OpTimeout
	}
	if c.ReplaceTimeout == 0 {
		c.ReplaceTimeout = d.ReplaceTimeout
	}
	if c.BookieQuarantine == 0 {
		c.BookieQuarantine = d.BookieQuarantine
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = d.MaxPendingBytes
	}
	if c.MaxEntrySize == 0 {
		c.MaxEntrySize = d.MaxEntrySize
	}
	if c.Transport == nil {
		c.Transport = GRPCTransport{}
	}
	if c.Placement == nil {
		c.Placement = DefaultPlacement
	}
	return c
}

// Validate reports every problem with c (after defaults are applied),
// each wrapping ErrInvalidOptions.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if c.Store == nil {
		bad("Config.Store is required")
	}
	if c.AddTimeout < 0 {
		bad("AddTimeout %v is negative", c.AddTimeout)
	}
	if c.OpTimeout < 0 {
		bad("OpTimeout %v is negative", c.OpTimeout)
	}
	if c.ReplaceTimeout < 0 {
		bad("ReplaceTimeout %v is negative", c.ReplaceTimeout)
	}
	if c.BookieQuarantine < 0 {
		bad("BookieQuarantine %v is negative", c.BookieQuarantine)
	}
	if c.MaxPendingBytes < 0 {
		bad("MaxPendingBytes %d is negative", c.MaxPendingBytes)
	}
	if c.MaxEntrySize < 0 || c.MaxEntrySize > bookie.MaxMessageSize-(64<<10)-FrameHeaderSize {
		bad("MaxEntrySize %d outside 0..%d", c.MaxEntrySize, bookie.MaxMessageSize-(64<<10)-FrameHeaderSize)
	}
	return errors.Join(errs...)
}
