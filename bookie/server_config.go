package bookie

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stratamesh/strata/bookie/storage"
)

// MaxMessageSize is the largest gRPC message the bookie protocol sends or
// receives (both directions, server and Client). An add's payload
// (MaxEntrySize) and a read's answer (MaxReadBytes, or one entry) must fit
// in it with room for the envelope.
const MaxMessageSize = 8 << 20

// envelopeRoom is what MaxMessageSize keeps free beyond payload bytes.
const envelopeRoom = 64 << 10

// Defaults of Limits.
const (
	DefaultMaxEntrySize    = 5 << 20
	DefaultMaxReadBytes    = 4 << 20
	DefaultMaxAddsInFlight = 4096
	DefaultMaxLongPoll     = 10 * time.Second
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Storage is the engine behind the service (required). The Server
	// does not close it: whoever opened it does, after the Server.
	Storage storage.Storage
	// BookieID is the bookie's stable id, as ensembles name it (required).
	BookieID string
	// Instance is the bookie's instance UUID, from its cookie (required).
	// Requests naming another instance are refused (CODE_WRONG_INSTANCE).
	Instance string
	// Address is the host:port the bookie advertises; Info reports it.
	Address string
	// Logger receives the service's warnings; nil discards them.
	Logger *slog.Logger
	// Limits bound requests and streams; zero fields take defaults.
	Limits
}

// Limits are the service's bounds on requests and streams.
type Limits struct {
	// MaxEntrySize is the largest payload an add may carry, in bytes;
	// larger adds get CODE_INVALID. Default 5 MiB (BookKeeper's frame
	// limit); at most MaxMessageSize - 64 KiB.
	MaxEntrySize int
	// MaxReadBytes caps the payload bytes of one range read (a request's
	// max_bytes of 0 means this; larger values are lowered to it). A
	// range read still returns its first entry when that alone is larger.
	// Each entry counts 32 bytes of envelope on top of its payload.
	// Default 4 MiB; at most MaxMessageSize - 64 KiB.
	MaxReadBytes int
	// MaxAddsInFlight bounds, per Add stream, the adds (entries, however
	// many each request carries) received and not yet answered. At the
	// bound the server stops handing entries to the engine, and reading
	// the stream, until a response has been sent, so a client that sends
	// faster than the disk absorbs, or that does not read its responses,
	// is held back by gRPC flow control instead of growing the server's
	// memory: memory per stream is at most MaxAddsInFlight adds (payloads
	// included) plus the request being handed in. Default 4096.
	MaxAddsInFlight int
	// MaxLongPoll caps how long a ReadLAC long poll waits. Default 10 s.
	MaxLongPoll time.Duration
}

// withDefaults fills zero fields.
func (c ServerConfig) withDefaults() ServerConfig {
	c.Limits = c.Limits.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Limits) withDefaults() Limits {
	if c.MaxEntrySize == 0 {
		c.MaxEntrySize = DefaultMaxEntrySize
	}
	if c.MaxReadBytes == 0 {
		c.MaxReadBytes = DefaultMaxReadBytes
	}
	if c.MaxAddsInFlight == 0 {
		c.MaxAddsInFlight = DefaultMaxAddsInFlight
	}
	if c.MaxLongPoll == 0 {
		c.MaxLongPoll = DefaultMaxLongPoll
	}
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c ServerConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Storage == nil {
		errs = append(errs, errors.New("bookie: ServerConfig.Storage is required"))
	}
	if err := ValidateID(c.BookieID); err != nil {
		errs = append(errs, err)
	}
	if c.Instance == "" {
		errs = append(errs, errors.New("bookie: ServerConfig.Instance is required"))
	}
	errs = append(errs, c.Limits.validate()...)
	return errors.Join(errs...)
}

func (c Limits) validate() []error {
	c = c.withDefaults()
	var errs []error
	if c.MaxEntrySize < 0 || c.MaxEntrySize > MaxMessageSize-envelopeRoom {
		errs = append(errs, fmt.Errorf("bookie: MaxEntrySize %d outside 0..%d", c.MaxEntrySize, MaxMessageSize-envelopeRoom))
	}
	if c.MaxReadBytes < 0 || c.MaxReadBytes > MaxMessageSize-envelopeRoom {
		errs = append(errs, fmt.Errorf("bookie: MaxReadBytes %d outside 0..%d", c.MaxReadBytes, MaxMessageSize-envelopeRoom))
	}
	if c.MaxAddsInFlight < 0 {
		errs = append(errs, fmt.Errorf("bookie: MaxAddsInFlight %d is negative", c.MaxAddsInFlight))
	}
	if c.MaxLongPoll < 0 {
		errs = append(errs, fmt.Errorf("bookie: MaxLongPoll %v is negative", c.MaxLongPoll))
	}
	return errs
}

// ValidateID checks a bookie id: 1 to 128 characters from [A-Za-z0-9._-]
// (it is part of etcd keys and file contents).
func ValidateID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("bookie: bookie id %q must have 1 to 128 characters", id)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("bookie: bookie id %q: only letters, digits, '.', '_' and '-' are allowed", id)
		}
	}
	return nil
}
