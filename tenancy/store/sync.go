package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// Subject is the NATS subject configuration batches are published on, at
// any broker of the receiving region.
const Subject = "$STRATA.CONFIG.SYNC"

// Defaults of SyncConfig.
const (
	DefaultInterval = 3 * time.Second
	// maxBatchBytes bounds one message's encoded records (NATS's default
	// max_payload is 1 MiB).
	maxBatchBytes = 256 << 10
)

// Batch is one push between regions: records, and whether they are the
// sender's whole State (then the receiver answers with what the sender
// lacks).
type Batch struct {
	From    string           `json:"from"`
	Full    bool             `json:"full,omitempty"`
	Records []tenancy.Record `json:"records"`
}

// SyncConfig configures a Syncer.
type SyncConfig struct {
	// Store is the region's configuration. Required.
	Store *Store
	// Region is this region. Required.
	Region string
	// Remotes returns the other regions of the mesh. Required.
	Remotes func() []string
	// Publish sends one encoded Batch to region (on Subject at one of its
	// brokers). It must not block for long; a failed push is repaired by
	// the next anti-entropy round. Required.
	Publish func(region string, data []byte) error
	// Key, when set, signs every batch (HMAC-SHA256) and refuses batches
	// not signed with it: with admin auth on, a NATS client that can
	// publish on Subject must not be able to write configuration (an admin
	// token, say). Every region must use the same key (region uses the
	// mesh superuser token's hash, which only the operator configures).
	Key []byte
	// Interval is how often the whole State goes to every other region.
	// Default 3 s: a region back from a partition converges within about
	// this long.
	Interval time.Duration
	Logger   *slog.Logger
}

// Syncer ships this region's configuration records to the other regions
// and merges theirs.
type Syncer struct {
	cfg SyncConfig

	mu      sync.Mutex
	pending map[string]tenancy.Record // changed records not yet pushed
	kick    chan struct{}
	inbox   chan []byte

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// StartSync starts a Syncer. Errors: a missing field.
func StartSync(cfg SyncConfig) (*Syncer, error) {
	if cfg.Store == nil || cfg.Region == "" || cfg.Remotes == nil || cfg.Publish == nil {
		return nil, errors.New("store: SyncConfig.Store, Region, Remotes and Publish are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Syncer{cfg: cfg, pending: map[string]tenancy.Record{}, kick: make(chan struct{}, 1),
		inbox: make(chan []byte, 64), stop: make(chan struct{})}
	cfg.Store.OnChange(s.changed)
	s.wg.Add(2)
	go s.pushLoop()
	go s.mergeLoop()
	return s, nil
}

// Close stops the Syncer and waits for its goroutines. Idempotent.
func (s *Syncer) Close() {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
}

func (s *Syncer) changed(recs []tenancy.Record) {
	s.mu.Lock()
	for _, r := range recs {
		s.pending[r.ID()] = r
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Receive hands in one message from another region (the Subject's
// handler). It never blocks: when the inbox is full the message is
// dropped, and the next anti-entropy round repairs it.
func (s *Syncer) Receive(data []byte) {
	select {
	case s.inbox <- data:
	default:
		s.cfg.Logger.Debug("configuration sync inbox full: dropped a batch")
	}
}

func (s *Syncer) pushLoop() {
	defer s.wg.Done()
	full := time.NewTicker(s.cfg.Interval)
	defer full.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			s.mu.Lock()
			recs := make([]tenancy.Record, 0, len(s.pending))
			for _, r := range s.pending {
				recs = append(recs, r)
			}
			s.pending = map[string]tenancy.Record{}
			s.mu.Unlock()
			failed := false
			for _, remote := range s.cfg.Remotes() {
				if !s.push(remote, recs, false) {
					failed = true
				}
			}
			if failed {
				// A link not up yet (or down): try the changes again soon
				// rather than wait for the next anti-entropy round.
				s.retryLater(recs)
			}
		case <-full.C:
			recs := s.cfg.Store.Records()
			for _, remote := range s.cfg.Remotes() {
				s.push(remote, recs, true)
			}
		}
	}
}

// push sends recs to remote in batches of at most maxBatchBytes. Every
// batch of a full State is marked Full: the receiver answers each with the
// records it holds newer than that batch's.
func (s *Syncer) push(remote string, recs []tenancy.Record, full bool) bool {
	for _, data := range encodeBatches(s.cfg.Region, recs, full) {
		data = sign(s.cfg.Key, data)
		if err := s.cfg.Publish(remote, data); err != nil {
			s.cfg.Logger.Debug("configuration push failed", "remote", remote, "err", err)
			return false
		}
	}
	return true
}

// retryDelay is how soon changed records whose push failed are pushed
// again (to every region: pushes are idempotent).
const retryDelay = 250 * time.Millisecond

func (s *Syncer) retryLater(recs []tenancy.Record) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-s.stop:
		case <-time.After(retryDelay):
			s.mu.Lock()
			for _, r := range recs {
				if cur, ok := s.pending[r.ID()]; !ok || r.Newer(cur) {
					s.pending[r.ID()] = r
				}
			}
			s.mu.Unlock()
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}()
}

// encodeBatches splits recs into encoded Batches of at most about
// maxBatchBytes each (one record larger than that goes alone).
func encodeBatches(from string, recs []tenancy.Record, full bool) [][]byte {
	var out [][]byte
	var cur []tenancy.Record
	size := 0
	flush := func() {
		b, _ := json.Marshal(Batch{From: from, Full: full, Records: cur})
		out = append(out, b)
		cur, size = nil, 0
	}
	for _, r := range recs {
		n := len(r.Value) + len(r.Key) + 96
		if size+n > maxBatchBytes && len(cur) > 0 {
			flush()
		}
		cur = append(cur, r)
		size += n
	}
	if len(cur) > 0 || full {
		flush()
	}
	return out
}

// DecodeBatch parses one pushed message. Errors: malformed JSON, a
// missing sender, or a record that fails tenancy's Check.
func DecodeBatch(data []byte) (Batch, error) {
	var b Batch
	if err := json.Unmarshal(data, &b); err != nil {
		return Batch{}, err
	}
	if !tenancy.ValidToken(b.From) {
		return Batch{}, errors.New("store: batch without a valid sending region")
	}
	for _, r := range b.Records {
		if err := r.Check(); err != nil {
			return Batch{}, err
		}
	}
	return b, nil
}

func (s *Syncer) mergeLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case data := <-s.inbox:
			s.merge(data)
		}
	}
}

func (s *Syncer) merge(data []byte) {
	data, err := verify(s.cfg.Key, data)
	if err != nil {
		s.cfg.Logger.Warn("refused a configuration batch", "err", err)
		return
	}
	b, err := DecodeBatch(data)
	if err != nil {
		s.cfg.Logger.Warn("refused a configuration batch", "err", err)
		return
	}
	if b.From == s.cfg.Region {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.Merge(ctx, b.Records); err != nil {
		s.cfg.Logger.Warn("merging configuration from another region failed", "from", b.From, "err", err)
	}
	if !b.Full {
		return
	}
	// Answer with what this batch shows the sender lacks or holds older.
	theirs := make(map[string]tenancy.HLC, len(b.Records))
	for _, r := range b.Records {
		theirs[r.ID()] = r.Stamp
	}
	var back []tenancy.Record
	for _, r := range s.cfg.Store.Records() {
		if st, ok := theirs[r.ID()]; ok && r.Stamp.Compare(st) > 0 {
			back = append(back, r)
		}
	}
	if len(back) > 0 {
		s.push(b.From, back, false)
	}
}

// macPrefix starts a signed batch: "hmac-sha256=<64 hex> " then the
// batch's JSON.
const macPrefix = "hmac-sha256="

// sign prefixes data with its HMAC-SHA256 under key (data as is when
// key is empty).
func sign(key, data []byte) []byte {
	if len(key) == 0 {
		return data
	}
	m := hmac.New(sha256.New, key)
	m.Write(data)
	out := make([]byte, 0, len(macPrefix)+65+len(data))
	out = append(out, macPrefix...)
	out = hex.AppendEncode(out, m.Sum(nil))
	out = append(out, ' ')
	return append(out, data...)
}

// errUnsigned: a batch without a valid signature under the mesh's key.
var errUnsigned = errors.New("store: configuration batch not signed with the mesh's key")

// verify checks and strips sign's prefix. With an empty key a signed
// batch is taken as is (its signature unchecked) and an unsigned one
// too; with a key, only a batch signed with it.
func verify(key, data []byte) ([]byte, error) {
	rest, signed := bytes.CutPrefix(data, []byte(macPrefix))
	if !signed {
		if len(key) > 0 {
			return nil, errUnsigned
		}
		return data, nil
	}
	macHex, body, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return nil, errUnsigned
	}
	if len(key) == 0 {
		return body, nil
	}
	got := make([]byte, hex.DecodedLen(len(macHex)))
	if _, err := hex.Decode(got, macHex); err != nil {
		return nil, errUnsigned
	}
	m := hmac.New(sha256.New, key)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return nil, errUnsigned
	}
	return body, nil
}
