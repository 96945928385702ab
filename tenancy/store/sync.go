package store

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
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
	// Key, when set, seals every batch (AES-256-GCM: encrypted and
	// authenticated) and refuses batches not sealed with it: with admin
	// auth on, a NATS client that can publish or subscribe on Subject must
	// not be able to write configuration (an admin token, say) or read it
	// (token hashes, other tenants'). Every region must use the same key
	// (region uses the mesh superuser token's hash, which only the
	// operator configures).
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
	// refusedN counts refused batches since refusedAt, when one was last
	// logged.
	refusedN  int
	refusedAt time.Time

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
		data = Seal(s.cfg.Key, data)
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

// refused logs a refused batch: the first at once, then at most one line
// every refusedLogEvery with the count (anyone who can publish on
// Subject could otherwise fill the log).
func (s *Syncer) refused(err error) {
	s.mu.Lock()
	s.refusedN++
	now := time.Now()
	if now.Sub(s.refusedAt) < refusedLogEvery {
		s.mu.Unlock()
		return
	}
	n := s.refusedN
	s.refusedN, s.refusedAt = 0, now
	s.mu.Unlock()
	s.cfg.Logger.Warn("refused configuration batches", "count", n, "last_err", err)
}

const refusedLogEvery = 10 * time.Second

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
	data, err := Unseal(s.cfg.Key, data)
	if err != nil {
		s.refused(err)
		return
	}
	b, err := DecodeBatch(data)
	if err != nil {
		s.refused(err)
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

// sealMagic starts a sealed message: "strata-sealed-1 " then the
// 12-byte nonce and the AES-256-GCM ciphertext (with its tag) of the
// message.
const sealMagic = "strata-sealed-1 "

// sealKey derives the AES-256 key of a mesh key.
func sealKey(key []byte) []byte {
	sum := sha256.Sum256(append([]byte("strata config sync v1\x00"), key...))
	return sum[:]
}

// Seal encrypts and authenticates data under key (AES-256-GCM, the
// standard library's), so that only holders of the mesh's key can read
// or forge it; data as is when key is empty (auth off).
func Seal(key, data []byte) []byte {
	if len(key) == 0 {
		return data
	}
	block, _ := aes.NewCipher(sealKey(key))
	aead, _ := cipher.NewGCM(block)
	out := make([]byte, 0, len(sealMagic)+aead.NonceSize()+len(data)+aead.Overhead())
	out = append(out, sealMagic...)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, data, []byte(sealMagic))
}

// errUnsealed: a message not sealed with the mesh's key.
var errUnsealed = errors.New("store: message not sealed with the mesh's key")

// Unseal is Seal's inverse: with a key, only a message sealed with it
// opens; without one, only an unsealed message is taken.
func Unseal(key, data []byte) ([]byte, error) {
	rest, sealed := bytes.CutPrefix(data, []byte(sealMagic))
	if len(key) == 0 {
		if sealed {
			return nil, errors.New("store: a sealed message, and this region has no key (auth off here, on elsewhere?)")
		}
		return data, nil
	}
	if !sealed {
		return nil, errUnsealed
	}
	block, _ := aes.NewCipher(sealKey(key))
	aead, _ := cipher.NewGCM(block)
	if len(rest) < aead.NonceSize() {
		return nil, errUnsealed
	}
	out, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(sealMagic))
	if err != nil {
		return nil, errUnsealed
	}
	return out, nil
}
