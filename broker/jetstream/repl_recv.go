package jetstream

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy"
)

// The receiving side of replication (ARCHITECTURE §4; issue 8): a batch
// from another region's replicator cursor arrives as a request on
// $STRATA.REPL.<t>.<ns>.<topic> at any broker of this region, goes to the
// topic's owner like a publish, and is stored there by the managed
// ledger's receiver rule (high-water mark per origin stream, persisted
// with the topic: only HWM+1 is stored, at or below is a duplicate, above
// is refused as a gap). The answer is sent once the messages are
// durable.

// Headers a replicated copy is delivered with (never stored: the origin
// is in the entry's envelope).
const (
	HdrOrigin            = "Strata-Origin"
	HdrOriginSeq         = "Strata-Origin-Seq"
	HdrOriginTime        = "Strata-Origin-Time"
	HdrOriginIncarnation = "Strata-Origin-Incarnation"
)

// originHeaders returns hdr with the Strata-Origin* headers of o.
func originHeaders(hdr []byte, o *replicator.Origin) []byte {
	hdr = withHeader(hdr, HdrOrigin, o.Region)
	hdr = withHeader(hdr, HdrOriginSeq, strconv.FormatUint(o.Seq, 10))
	hdr = withHeader(hdr, HdrOriginTime, o.Time.UTC().Format(time.RFC3339Nano))
	return withHeader(hdr, HdrOriginIncarnation, o.Incarnation)
}

// dispatchRepl routes a replication batch to its topic's owner, creating
// the topic first from the definition the batch carries when this region
// does not have it yet.
func (s *Service) dispatchRepl(m message) {
	id, err := wire.ParseSubject(m.subject)
	if err != nil {
		s.cfg.Logger.Warn("dropping a malformed replication request", "subject", m.subject, "err", err)
		return
	}
	name := tenancy.Name{Tenant: id.Tenant, Namespace: id.Namespace, Topic: id.Topic}
	if s.reg.topic(name) != nil {
		s.toOwner(name, m, func(t *topic) { t.receive(m) })
		return
	}
	s.goAPI(func() {
		if b, _, err := wire.DecodeBatch(id, m.data); err == nil && s.tombstoned(s.ctx, name, b.Stream) {
			s.dropTombstoned(m, &b)
			return
		}
		if err := s.createReplicated(name, m); err != nil {
			s.replFailed(m, err)
			return
		}
		s.toOwner(name, m, func(t *topic) { t.receive(m) })
	})
}

// createReplicated creates topic n as the batch in m defines it (a
// topic another region replicates here). Errors: a malformed batch, a
// namespace this region's topology lacks, etcd's.
func (s *Service) createReplicated(n tenancy.Name, m message) error {
	if _, ok := s.namespace(n.Tenant, n.Namespace); !ok {
		return errors.New("namespace " + n.Tenant + "/" + n.Namespace + " does not exist in region " + s.cfg.Region)
	}
	_, def, err := wire.DecodeBatch(n, m.data)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
	defer cancel()
	if err := mledger.Create(ctx, s.cfg.Store, n, def, s.cfg.Now().UTC()); err != nil && !errors.Is(err, mledger.ErrExists) {
		return err
	}
	tm, _, err := mledger.Load(ctx, s.cfg.Store, n)
	if err != nil {
		return err
	}
	if s.reg.put(decodeStream(n, tm)) {
		s.topicAdded(n)
	}
	return nil
}

// dropTombstoned acknowledges, without storing it, a batch of an origin
// stream deleted in its region (a late batch must not re-create the
// topic): the sender, if it still runs, moves on.
func (s *Service) dropTombstoned(m message, b *replicator.Batch) {
	s.respond(m.reply, wire.EncodeAnswer(wire.Answer{Answer: replicator.Answer{Batch: b.ID, Kind: replicator.Duplicate, HWM: b.Last}}))
}

// replFailed answers a batch that could not be handled with Failed.
func (s *Service) replFailed(m message, err error) {
	var id uint64
	if b, _, derr := wire.DecodeBatch(tenancy.Name{Tenant: "x", Namespace: "x", Topic: "x"}, m.data); derr == nil {
		id = b.ID
	}
	s.respond(m.reply, wire.EncodeAnswer(wire.Answer{Answer: replicator.Answer{Batch: id, Kind: replicator.Failed}, Error: err.Error()}))
}

// receive stores a batch at the topic's owner and answers it.
func (t *topic) receive(m message) {
	id := t.name
	b, _, err := wire.DecodeBatch(id, m.data)
	if err != nil {
		t.s.replFailed(m, err)
		return
	}
	if b.Stream.Region == t.s.cfg.Region && t.s.cfg.Region != "" {
		t.s.replFailed(m, errors.New("a batch of this region's own origin"))
		return
	}
	if slices.Contains(t.tombs, streamKey(b.Stream)) {
		t.s.dropTombstoned(m, &b)
		return
	}
	if b.Gap {
		t.s.goRun(func() { t.receiveGap(m, &b) })
		return
	}
	if t.replStorageRefused(m, &b) { // answered Failed: the sender resends (backlog_repl.go)
		return
	}
	rc := &receipt{t: t, m: m, b: &b, left: len(b.Msgs)}
	for i := range b.Msgs {
		msg := &b.Msgs[i]
		o := msg.Origin
		t.fence.issue()
		t.ml.Publish(msg.Subject, msg.Header, msg.Data, mledger.PublishOptions{Origin: &o}, func(r mledger.PubResult, err error) {
			t.fence.answer()
			rc.done(i, r, err)
		})
	}
}

// receiveGap applies a gap record and answers it.
func (t *topic) receiveGap(m message, b *replicator.Batch) {
	ctx, cancel := context.WithTimeout(t.s.ctx, apiTimeout)
	defer cancel()
	res, err := t.ml.SkipOrigin(ctx, b.Stream, b.First, b.Last)
	var gap *mledger.OriginGapError
	a := wire.Answer{Answer: replicator.Answer{Batch: b.ID}}
	switch {
	case errors.As(err, &gap):
		a.Kind, a.HWM = replicator.GapRefused, gap.Expected-1
	case err != nil:
		a.Kind, a.Error = replicator.Failed, err.Error()
	default:
		a.Kind, a.HWM, a.Lost = replicator.Stored, res.HWM, res.Lost
		a.Marks = t.replMarks(b.Stream.Region)
		if res.Duplicate {
			a.Kind = replicator.Duplicate
		}
		if res.Lost > 0 {
			t.s.cfg.Logger.Warn("replicated messages lost: trimmed at their origin before they were replicated",
				"topic", t.name.String(), "origin", b.Stream.Region, "first", b.First, "last", b.Last, "lost", res.Lost)
		}
	}
	t.s.respond(m.reply, wire.EncodeAnswer(a))
}

// receipt collects the outcomes of one batch's publishes.
type receipt struct {
	t    *topic
	m    message
	b    *replicator.Batch
	mu   sync.Mutex
	left int
	err  error // the first message's failure, by index
	at   int
	dup  int
	new  []int // messages stored now (not duplicates)
}

func (rc *receipt) done(i int, r mledger.PubResult, err error) {
	rc.mu.Lock()
	if err != nil && (rc.err == nil || i < rc.at) {
		rc.err, rc.at = err, i
	}
	if err == nil && r.Duplicate {
		rc.dup++
	} else if err == nil {
		rc.new = append(rc.new, i)
	}
	rc.left--
	last := rc.left == 0
	rc.mu.Unlock()
	if last {
		rc.answer()
	}
}

// answer replies once every message of the batch has its outcome, and
// delivers the newly stored copies to this region's core subscribers.
func (rc *receipt) answer() {
	t, b := rc.t, rc.b
	a := wire.Answer{Answer: replicator.Answer{Batch: b.ID}}
	var gap *mledger.OriginGapError
	switch {
	case rc.err != nil && errors.As(rc.err, &gap) && rc.at == 0:
		a.Kind, a.HWM = replicator.GapRefused, gap.Expected-1
	case rc.err != nil && (errors.Is(rc.err, mledger.ErrNotOwner) || errors.Is(rc.err, mledger.ErrClosed)):
		return // the topic moved: no answer, the sender's timeout resends to the new owner
	case rc.err != nil:
		a.Kind, a.Error = replicator.Failed, rc.err.Error()
	default:
		a.Kind, a.HWM = replicator.Stored, t.ml.OriginHWM(b.Stream)
		a.Marks = t.replMarks(b.Stream.Region)
		if rc.dup == len(b.Msgs) {
			a.Kind = replicator.Duplicate
		}
	}
	t.s.respond(rc.m.reply, wire.EncodeAnswer(a))
	if rc.err != nil {
		return
	}
	slices.Sort(rc.new)
	for _, i := range rc.new {
		msg := &b.Msgs[i]
		t.s.srv.PublishInternal(t.s.space(t.name.Tenant, msg.Subject), nil, originHeaders(msg.Header, &msg.Origin), msg.Data)
	}
}
