package consumer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/internal/ackset"
)

// Consumer is one durable pull consumer. See the package documentation.
type Consumer struct {
	cfg     jsapi.ConsumerConfig
	filters []string // nil: every subject matches
	literal bool     // every filter is a literal subject
	stream  string
	name    string
	src     Source
	created time.Time
	now     time.Time // the latest time passed in (Persisted has none)

	// The cursor. For every s in [1, delivered]: s is in acks XOR s is a
	// key of pending. Sequences above delivered are neither.
	acks      *ackset.Set
	delivered uint64
	pending   map[uint64]*pend
	rdq       seqHeap   // pending entries in stQueued (lazy: stale items skipped)
	timers    timerHeap // pending entries in stInFlight/stDelayed (lazy)
	look      lookahead // the last message loaded and not yet delivered

	// Delivery sequences: dseq is the last one handed out; reserved is
	// the reservation in the current state, persistedReserved the one
	// the driver has persisted (dispatch never goes above it); resv lists
	// the reservations not yet persisted, with the gen that carries them.
	dseq              uint64
	reserved          uint64
	persistedReserved uint64
	resv              []genValue
	block             uint64

	floorDSeq uint64 // ack_floor.consumer_seq (monotone; see ackFloorDSeq)

	waiting []*request
	noWaits bool // waiting may hold no_wait requests (endNoWait scans)

	// Priority groups (pin.go): the pin, and where pin ids come from.
	pin    pinState
	pinIDs func() string

	// key_shared (keyshared.go); ks is nil for other consumers. Every
	// key in keys has n >= 1 bound (in-flight) pending entries, all
	// delivered to its puller. held is ascending; every held sequence is
	// <= delivered, neither acked nor pending; heldKeys counts the held
	// messages per key (those whose key is known: all but heldUnkeyed).
	ks          *keySpec
	topic       string
	keys        map[string]*binding
	held        []heldMsg
	heldKeys    map[string]int
	heldUnkeyed int

	// Persistence: gen counts changes to the persisted state.
	gen, persistedGen uint64
	syncs             []syncWait

	lastDelivery, lastAck, lastActivity time.Time
	loadErr                             error
	stopped                             bool
	stopDesc                            string
	scratch                             []byte
}

type pstate uint8

const (
	stInFlight pstate = iota + 1 // delivered, its ack_wait running
	stQueued                     // waiting in rdq for redelivery
	stDelayed                    // NAKed with a delay, not yet due
)

// pend is a delivered, unacked message.
type pend struct {
	dseq  uint64 // of its latest delivery; 0 = unknown (restored)
	count uint32 // deliveries so far
	state pstate
	at    time.Time // stInFlight: ack deadline; stDelayed: when it is due
	ver   uint32    // bumped on every timer change (stale heap items)

	// key_shared: the puller of its latest delivery, its key (keyed: the
	// key is known; not yet after a restore), and whether it counts in
	// keys (bound: in flight with a known key).
	reply        string
	key          string
	keyed, bound bool
}

type lookahead struct {
	ok  bool
	msg Msg
}

type genValue struct{ gen, value uint64 }

type syncWait struct {
	reply string
	gen   uint64
}

// New returns a consumer for cfg reading src. The StreamName option is
// required (ack subjects carry it); cfg must be named (name or
// durable_name: the driver names ephemerals). With st nil it is a fresh
// cursor positioned by deliver_policy; otherwise it restores st, and
// every message delivered but not acked in st is pending redelivery (its
// delivery count kept). cfg gets SetDefaults and Validate; st.Config is
// ignored. Nothing is delivered until the driver has persisted a Snapshot
// and called Persisted (the dseq reservation).
func New(cfg jsapi.ConsumerConfig, st *State, now time.Time, src Source, opts ...Option) (*Consumer, error) {
	o := options{block: DefaultDSeqBlock}
	for _, opt := range opts {
		opt.apply(&o)
	}
	switch {
	case src == nil:
		return nil, errors.New("consumer: nil Source")
	case o.stream == "":
		return nil, errors.New("consumer: the StreamName option is required")
	case cfg.EffectiveName() == "":
		return nil, fmt.Errorf("%w: no name or durable_name", ErrInvalidConfig)
	}
	cfg.SetDefaults()
	if err := checkConfig(&cfg); err != nil {
		return nil, err
	}
	if cfg.PriorityPolicy == jsapi.PriorityPinned && o.pinIDs == nil {
		return nil, errors.New("consumer: a pinned_client consumer needs the PinIDs option")
	}
	c := &Consumer{
		stream:   o.stream,
		name:     cfg.EffectiveName(),
		src:      src,
		now:      now,
		pending:  make(map[uint64]*pend),
		block:    o.block,
		pinIDs:   o.pinIDs,
		topic:    o.topic,
		keys:     make(map[string]*binding),
		heldKeys: make(map[string]int),
	}
	c.setConfig(cfg)
	if st == nil {
		start, err := c.startSeq()
		if err != nil {
			return nil, err
		}
		c.created = now
		c.delivered = start - 1
		c.acks = ackset.New(start - 1)
		c.gen = 1 // never persisted
	} else if err := c.restore(st, now); err != nil {
		return nil, err
	}
	c.reserve()
	return c, nil
}

// checkConfig validates a defaulted config for the pull core.
func checkConfig(cfg *jsapi.ConsumerConfig) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	var bad []string
	switch {
	case cfg.DeliverSubject != "" || cfg.DeliverGroup != "" || cfg.FlowControl || cfg.IdleHeartbeat > 0:
		bad = append(bad, "deliver_subject (push consumer)")
	}
	if cfg.AckPolicy == jsapi.AckFlowControl {
		bad = append(bad, "ack_policy flow_control")
	}
	if cfg.DeliverPolicy == jsapi.DeliverLastPerSubject {
		bad = append(bad, "deliver_policy last_per_subject")
	}
	if cfg.ReplayPolicy == jsapi.ReplayOriginal {
		bad = append(bad, "replay_policy original")
	}
	unsupported, err := checkPriority(cfg)
	if err != nil {
		return err
	}
	bad = append(bad, unsupported...)
	if cfg.HeadersOnly {
		bad = append(bad, "headers_only")
	}
	if cfg.RateLimit > 0 {
		bad = append(bad, "rate_limit_bps")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %v", ErrUnsupported, bad)
	}
	for _, f := range filterList(cfg) {
		if !validFilter(f) {
			return fmt.Errorf("%w: filter subject %q", ErrInvalidConfig, f)
		}
	}
	_, err = parseKeyShared(cfg)
	return err
}

// setConfig applies a checked config.
func (c *Consumer) setConfig(cfg jsapi.ConsumerConfig) {
	c.cfg = cfg
	c.filters, c.literal = compileFilters(filterList(&cfg))
	c.ks, _ = parseKeyShared(&cfg)
}

// startSeq is the first sequence a fresh cursor reads.
func (c *Consumer) startSeq() (uint64, error) {
	var start uint64
	switch c.cfg.DeliverPolicy {
	case jsapi.DeliverNew:
		start = c.src.LastSeq() + 1
	case jsapi.DeliverLast:
		last, err := c.lastMatching()
		if err != nil {
			return 0, err
		}
		start = last
		if start == 0 {
			start = c.src.LastSeq() + 1
		}
	case jsapi.DeliverByStartSeq:
		start = c.cfg.OptStartSeq
	case jsapi.DeliverByStartTime:
		seq, err := c.src.SeqAtTime(*c.cfg.OptStartTime)
		if err != nil {
			return 0, fmt.Errorf("consumer: opt_start_time: %w", err)
		}
		start = seq
	default: // all
		start = c.src.FirstSeq()
	}
	return max(start, 1), nil
}

// lastScanLimit bounds the backward scan for deliver_policy last with a
// wildcard filter.
const lastScanLimit = 10000

// lastMatching is the last sequence matching the filters (the last one
// when unfiltered), 0 if none is found. Literal filters ask the Source;
// wildcard filters scan back at most lastScanLimit messages.
func (c *Consumer) lastMatching() (uint64, error) {
	last := c.src.LastSeq()
	if c.filters == nil {
		return last, nil
	}
	var best uint64
	wild := false
	for _, f := range c.filters {
		if isLiteral(f) {
			best = max(best, c.src.LastForSubject(f))
		} else {
			wild = true
		}
	}
	if !wild {
		return best, nil
	}
	low := max(best+1, c.src.FirstSeq())
	for s, n := last, 0; s >= low && s > 0 && n < lastScanLimit; s, n = s-1, n+1 {
		m, err := c.src.Load(s)
		if errors.Is(err, ErrGone) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("consumer: deliver_policy last: %w", err)
		}
		if c.matches(m.Subject) {
			return s, nil
		}
	}
	return best, nil
}

// restore loads a persisted cursor.
func (c *Consumer) restore(st *State, now time.Time) error {
	c.acks = ackset.New(st.MarkDelete)
	if len(st.AckedAbove) > 0 {
		var s ackset.Set
		if err := s.UnmarshalBinary(st.AckedAbove); err != nil {
			return fmt.Errorf("%w: acked_above: %w", ErrBadState, err)
		}
		s.AckUpTo(st.MarkDelete)
		c.acks = &s
	}
	c.created = st.Created
	if c.created.IsZero() {
		c.created = now
	}
	c.delivered = max(st.Delivered, c.acks.MarkDelete())
	c.dseq = st.DSeqReserved
	c.reserved, c.persistedReserved = st.DSeqReserved, st.DSeqReserved
	c.floorDSeq = st.AckFloorDSeq
	if c.cfg.AckPolicy == jsapi.AckNone {
		if c.acks.AckUpTo(c.delivered) > 0 {
			c.gen++
		}
		return nil
	}
	held := c.heldSet(st)
	for s := c.acks.NextUnacked(c.acks.MarkDelete()); s != 0 && s <= c.delivered; s = c.acks.NextUnacked(s) {
		if held[s] {
			c.restoreHeld(s) // read past, never delivered
			continue
		}
		p := &pend{count: max(st.Redelivered[s], 1)}
		c.pending[s] = p
		if c.maxDelivered(p) {
			// Its last delivery may still be acked: give it an ack_wait.
			c.setTimer(s, p, stInFlight, now.Add(c.ackWait(p.count)))
		} else {
			p.state = stQueued
			c.rdq.push(seqItem{seq: s, ver: p.ver})
		}
	}
	return nil
}

// reserve raises the dseq reservation by a block when dispatch is within
// half a block of it.
func (c *Consumer) reserve() {
	if c.dseq+c.block/2 < c.reserved {
		return
	}
	c.reserved = c.dseq + c.block
	c.gen++
	c.resv = append(c.resv, genValue{c.gen, c.reserved})
}

func (c *Consumer) observe(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
}

// Snapshot returns the state to persist, the generation that identifies
// it, and whether it differs from the last generation passed to
// Persisted.
func (c *Consumer) Snapshot() (st State, gen uint64, dirty bool) {
	st = State{
		Config:       c.cfg,
		Created:      c.created,
		MarkDelete:   c.acks.MarkDelete(),
		Delivered:    c.delivered,
		DSeqReserved: c.reserved,
		AckFloorDSeq: c.ackFloorDSeq(),
	}
	if c.acks.Len() > 0 {
		st.AckedAbove, _ = c.acks.MarshalBinary()
	}
	for s, p := range c.pending {
		if p.count > 1 {
			if st.Redelivered == nil {
				st.Redelivered = make(map[uint64]uint32)
			}
			st.Redelivered[s] = p.count
		}
	}
	for _, h := range c.held {
		st.Held = append(st.Held, h.seq)
	}
	return st, c.gen, c.gen != c.persistedGen
}

// Dirty reports whether the state changed since the generation last
// passed to Persisted (what Snapshot's dirty says, without building the
// snapshot).
func (c *Consumer) Dirty() bool { return c.gen != c.persistedGen }

// NeedsReservation reports whether the delivery counter's reserved block
// grew beyond what was persisted: deliveries stall at the persisted
// reservation, so the driver should persist without waiting for its
// batch interval.
func (c *Consumer) NeedsReservation() bool { return c.reserved > c.persistedReserved }

// Persisted tells the core that the driver persisted Snapshot generation
// gen. It answers the AckSync requests whose acks that generation holds,
// and, if it raised the persisted dseq reservation, dispatches to waiting
// requests (at the latest time passed to any method). After Stop it only
// answers AckSyncs.
func (c *Consumer) Persisted(gen uint64) []Out {
	gen = min(gen, c.gen)
	if gen <= c.persistedGen {
		return nil
	}
	c.persistedGen = gen
	var outs []Out
	i := 0
	for ; i < len(c.syncs) && c.syncs[i].gen <= gen; i++ {
		outs = append(outs, Out{Kind: AckReply, Reply: c.syncs[i].reply})
	}
	c.syncs = c.syncs[i:]
	grew := false
	for len(c.resv) > 0 && c.resv[0].gen <= gen {
		c.persistedReserved = max(c.persistedReserved, c.resv[0].value)
		c.resv = c.resv[1:]
		grew = true
	}
	if grew && !c.stopped && len(c.waiting) > 0 {
		outs = c.dispatch(c.now, outs)
	}
	return outs
}

// MarkDelete is the mark-delete position (ack_floor.stream_seq), for
// interest and workqueue retention.
func (c *Consumer) MarkDelete() uint64 { return c.acks.MarkDelete() }

// LoadErr is the Source error that stopped the last dispatch round, nil
// if it was not stopped by one. The driver retries with Dispatch.
func (c *Consumer) LoadErr() error { return c.loadErr }

// LastActivity is the latest time a request, an ack or a delivery
// happened (zero if none), for inactive_threshold.
func (c *Consumer) LastActivity() time.Time { return c.lastActivity }

// Config returns the configuration in force (defaults filled in).
func (c *Consumer) Config() jsapi.ConsumerConfig { return c.cfg }

// Stop answers every waiting request with "409 <desc>" (e.g.
// jsapi.DescLeadershipChange or jsapi.DescConsumerDeleted) and its
// pending headers. Afterwards pulls get the same status, acks are
// ignored and nothing is dispatched; Persisted still answers AckSyncs
// already waiting.
func (c *Consumer) Stop(now time.Time, desc string) []Out {
	c.observe(now)
	var outs []Out
	for _, r := range c.waiting {
		outs = append(outs, r.status(jsapi.StatusConflict, desc))
	}
	c.waiting = nil
	c.stopped, c.stopDesc = true, desc
	return outs
}

// UpdateConfig applies an edited configuration. Editable: description,
// ack_wait, max_deliver, backoff, filter_subject(s), max_waiting,
// max_ack_pending, max_batch, max_expires, max_bytes,
// inactive_threshold, num_replicas, metadata (but its strata.subscription
// and strata.key), sample_freq, pause_until, priority_timeout (from the
// next pull of the pinned client).
// New ack_wait/backoff values apply from the next delivery or +WPI. The
// caller should Dispatch afterwards (limits may have grown).
func (c *Consumer) UpdateConfig(cfg jsapi.ConsumerConfig) error {
	cfg.SetDefaults()
	if err := checkConfig(&cfg); err != nil {
		return err
	}
	old := &c.cfg
	var bad []string
	diff := func(name string, changed bool) {
		if changed {
			bad = append(bad, name)
		}
	}
	diff("name", cfg.EffectiveName() != c.name)
	diff("deliver_policy", cfg.DeliverPolicy != old.DeliverPolicy)
	diff("opt_start_seq", cfg.OptStartSeq != old.OptStartSeq)
	diff("opt_start_time", !timePtrEqual(cfg.OptStartTime, old.OptStartTime))
	diff("ack_policy", cfg.AckPolicy != old.AckPolicy)
	diff("replay_policy", cfg.ReplayPolicy != old.ReplayPolicy)
	diff("mem_storage", cfg.MemoryStorage != old.MemoryStorage)
	diff("priority_policy", cfg.PriorityPolicy != old.PriorityPolicy)
	diff("priority_groups", !slices.Equal(cfg.PriorityGroups, old.PriorityGroups))
	for _, k := range []string{MetaSubscription, MetaKey} {
		diff("metadata "+strconv.Quote(k), cfg.Metadata[k] != old.Metadata[k])
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %v", ErrImmutable, bad)
	}
	c.setConfig(cfg)
	c.gen++
	return nil
}

func timePtrEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
