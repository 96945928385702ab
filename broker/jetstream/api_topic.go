package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/stratamesh/strata/broker/consumer"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/replicator/wire"
)

// api handles a stream-scoped API request at the topic's owner. Pulls go
// straight to the consumer's mailbox (a missing consumer: the
// no-responders 503, as the reference has no handler there); everything
// else runs on an API goroutine once the publishes that reached the topic
// before it are answered, so a client sees its own earlier publishes.
func (t *topic) api(req jsapi.APIRequest, m message) {
	if req.Kind == jsapi.KindConsumerNext {
		r := t.runner(req.Consumer)
		if r == nil {
			t.s.noResponders(m)
			return
		}
		r.pull(m.origin, m.reply, m.data)
		return
	}
	mark := t.fence.mark()
	t.s.goAPI(func() { t.handleAPI(req, m, mark) })
}

func (t *topic) handleAPI(req jsapi.APIRequest, m message, mark uint64) {
	s := t.s
	ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
	defer cancel()
	fctx, fcancel := context.WithTimeout(ctx, fenceTimeout)
	_ = t.fence.wait(fctx, mark) // past it, answer from what is confirmed
	fcancel()
	typ := jsapi.Response{Type: req.Kind.ResponseType()}
	fail := func(e *jsapi.APIError) { s.replyError(m.reply, req.Kind, e) }
	switch req.Kind {
	case jsapi.KindStreamCreate, jsapi.KindStreamUpdate:
		cfg, e := s.parseStreamConfig(req, m.data)
		if e != nil {
			fail(e)
			return
		}
		cur := t.stream()
		cfg.Name = cur.stream // also when addressed by its qualified name
		if req.Kind == jsapi.KindStreamCreate {
			if !sameConfig(&cur.config, cfg) {
				fail(jsapi.ErrStreamNameInUse())
				return
			}
			// The reference says did_create again for an identical CREATE.
			s.replyJSON(m.reply, jsapi.StreamCreateResponse{Response: typ, StreamInfo: t.info(""), DidCreate: true})
			return
		}
		if e := t.update(ctx, cur, cfg); e != nil {
			fail(e)
			return
		}
		spec, _ := json.Marshal(topicSpec{Stream: cfg.Name, Config: *cfg})
		if err := s.queueDefinition(ctx, t.name, wire.TombUpdate, spec); err != nil {
			s.cfg.Logger.Warn("stream updated here; queueing the change for the other regions failed", "topic", t.name.String(), "err", err)
		}
		s.replyJSON(m.reply, jsapi.StreamCreateResponse{Response: typ, StreamInfo: t.info("")})
	case jsapi.KindStreamInfo:
		var body jsapi.StreamInfoRequest
		if err := jsapi.DecodeRequest(m.data, &body); err != nil {
			fail(jsapi.ErrInvalidJSON(err))
			return
		}
		info := t.info(body.SubjectsFilter)
		paged := pageSubjects(info, body.Offset)
		s.replyJSON(m.reply, jsapi.StreamInfoResponse{Response: typ, Paged: paged, StreamInfo: info})
	case jsapi.KindStreamDelete:
		if err := t.deleteStream(ctx, true); err != nil {
			fail(jsapi.ErrStreamStoreFailed(err))
			return
		}
		s.replyJSON(m.reply, jsapi.SuccessResponse{Response: typ, Success: true})
	case jsapi.KindStreamPurge:
		var body jsapi.StreamPurgeRequest
		if err := jsapi.DecodeRequest(m.data, &body); err != nil {
			fail(jsapi.ErrInvalidJSON(err))
			return
		}
		if body.Filter != "" || body.Sequence != 0 || body.Keep != 0 {
			fail(jsapi.ErrStreamInvalidConfig(errors.New("strata purges whole streams only (no filter, seq or keep yet)")))
			return
		}
		if t.stream().config.DenyPurge {
			fail(jsapi.ErrStreamInvalidConfig(errors.New("stream denies purge")))
			return
		}
		n, err := t.ml.Purge(ctx)
		if err != nil {
			fail(jsapi.ErrStreamStoreFailed(err))
			return
		}
		// A purge is mesh-wide: every region's copy is purged (its own
		// queue retries until each remote has it).
		if err := t.queueTombstones(ctx, wire.TombPurge); err != nil {
			fail(jsapi.ErrStreamStoreFailed(fmt.Errorf("purged here; replicating the purge failed: %w", err)))
			return
		}
		s.replyJSON(m.reply, jsapi.StreamPurgeResponse{Response: typ, Success: true, Purged: n})
	case jsapi.KindConsumerCreate:
		ci, e := t.createConsumer(ctx, req, m)
		if e != nil {
			fail(e)
			return
		}
		s.replyJSON(m.reply, jsapi.ConsumerInfoResponse{Response: typ, ConsumerInfo: ci})
	case jsapi.KindConsumerInfo:
		r := t.runner(req.Consumer)
		if r == nil {
			fail(jsapi.ErrConsumerNotFound())
			return
		}
		ci, err := r.info(ctx)
		if err != nil {
			fail(jsapi.ErrConsumerNotFound())
			return
		}
		s.replyJSON(m.reply, jsapi.ConsumerInfoResponse{Response: typ, ConsumerInfo: ci})
	case jsapi.KindConsumerDelete:
		r := t.runner(req.Consumer)
		if r == nil {
			fail(jsapi.ErrConsumerNotFound())
			return
		}
		t.subsMu.Lock()
		err := t.deleteConsumer(ctx, req.Consumer, r)
		if err == nil {
			if err = t.replicateConsumerDelete(ctx, r); err != nil {
				err = fmt.Errorf("deleted here; replicating the deletion failed: %w", err)
			}
		}
		t.subsMu.Unlock()
		if err != nil {
			fail(jsapi.ErrStreamStoreFailed(err))
			return
		}
		s.replyJSON(m.reply, jsapi.SuccessResponse{Response: typ, Success: true})
	case jsapi.KindConsumerNames, jsapi.KindConsumerList:
		var body jsapi.ConsumerNamesRequest
		if err := jsapi.DecodeRequest(m.data, &body); err != nil {
			fail(jsapi.ErrInvalidJSON(err))
			return
		}
		rs := t.runners()
		limit := 1024
		if req.Kind == jsapi.KindConsumerList {
			limit = 256
		}
		off := min(max(body.Offset, 0), len(rs))
		page := rs[off:min(off+limit, len(rs))]
		paged := jsapi.Paged{Total: len(rs), Offset: off, Limit: limit}
		if req.Kind == jsapi.KindConsumerNames {
			names := make([]string, 0, len(page))
			for _, r := range page {
				names = append(names, r.name)
			}
			s.replyJSON(m.reply, jsapi.ConsumerNamesResponse{Response: typ, Paged: paged, Consumers: names})
			return
		}
		infos := make([]*jsapi.ConsumerInfo, 0, len(page))
		for _, r := range page {
			if ci, err := r.info(ctx); err == nil {
				infos = append(infos, ci)
			}
		}
		s.replyJSON(m.reply, jsapi.ConsumerListResponse{Response: typ, Paged: paged, Consumers: infos})
	case jsapi.KindConsumerUnpin:
		if e := t.unpin(ctx, req, m); e != nil {
			fail(e)
			return
		}
		s.replyJSON(m.reply, typ)
	default:
		fail(jsapi.ErrBadRequest())
	}
}

// info is the stream's live StreamInfo; subjectsFilter selects
// per-subject counts (spec §2.2 STREAM.INFO).
func (t *topic) info(subjectsFilter string) *jsapi.StreamInfo {
	st := t.stream()
	now := t.s.cfg.Now().UTC()
	ms := t.ml.State()
	state := jsapi.StreamState{
		Msgs: ms.Msgs, Bytes: ms.Bytes, FirstSeq: ms.FirstSeq, LastSeq: ms.LastSeq,
		NumSubjects: uint64(ms.NumSubjects), Consumers: len(t.runners()),
	}
	if ms.Msgs > 0 {
		state.FirstTime = ms.FirstTime.UTC()
	}
	if ms.LastSeq > 0 {
		state.LastTime = ms.LastTime.UTC() // kept after a purge, as on the reference
	}
	if ms.LastSeq == 0 {
		state.FirstSeq = 0
	}
	if subjectsFilter != "" {
		state.Subjects = map[string]uint64{}
		for subj, n := range t.ml.Subjects() {
			if subjectMatches(subjectsFilter, subj) {
				state.Subjects[subj] = n
			}
		}
	}
	return &jsapi.StreamInfo{Config: st.config, Created: st.created.UTC(), State: state, TimeStamp: now}
}

// snapshotState is a stream's state as of its metadata's snapshot (for
// brokers that do not own it).
func snapshotState(tm mledger.TopicMeta) jsapi.StreamState {
	var st jsapi.StreamState
	if sn := tm.Snapshot; sn != nil {
		st.LastSeq = sn.LastSeq
		st.FirstSeq = max(tm.FirstSeq, 1)
		if sn.LastSeq >= st.FirstSeq {
			st.Msgs = sn.LastSeq - st.FirstSeq + 1
		}
		st.NumSubjects = uint64(len(sn.Subjects))
	}
	if st.LastSeq == 0 {
		st.FirstSeq = 0
	}
	return st
}

// sameConfig compares two stream configurations after defaults, as the
// reference does for a repeated CREATE.
func sameConfig(a, b *jsapi.StreamConfig) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// update applies a STREAM.UPDATE at the owner.
func (t *topic) update(ctx context.Context, cur *stream, cfg *jsapi.StreamConfig) *jsapi.APIError {
	if cfg.Storage != cur.config.Storage {
		return jsapi.ErrStreamInvalidConfig(errors.New("stream configuration update can not change storage type"))
	}
	if cfg.Retention != cur.config.Retention {
		return jsapi.ErrStreamInvalidConfig(errors.New("stream retention can not be changed"))
	}
	if apiErr := t.s.foreignSubjects(cur.name.Tenant, cfg.Subjects); apiErr != nil {
		return apiErr
	}
	if other := t.s.reg.overlapping(cur.name.Tenant, cur.stream, cfg.Subjects); other != "" {
		return jsapi.ErrStreamSubjectOverlap()
	}
	spec, _ := json.Marshal(topicSpec{Stream: cur.stream, Config: *cfg})
	if err := t.ml.SetLimits(ctx, t.s.cfg.limits(cfg), spec); err != nil {
		return jsapi.ErrStreamStoreFailed(err)
	}
	next := &stream{name: cur.name, stream: cur.stream, config: *cfg, created: cur.created}
	t.mu.Lock()
	t.st = next
	t.mu.Unlock()
	t.s.reg.put(next)
	return nil
}

// deleteStream deletes the topic: consumers, cursors, ledgers and
// metadata, replicator positions; then the topic is no longer served
// here. replicate queues the deletion's tombstones for the other regions
// first (not when the deletion is one of theirs).
func (t *topic) deleteStream(ctx context.Context, replicate bool) error {
	if t.stream().config.DenyDelete {
		return errors.New("stream denies delete")
	}
	if replicate {
		if err := t.queueTombstones(ctx, wire.TombDelete); err != nil {
			return fmt.Errorf("queueing the deletion for the other regions: %w", err)
		}
	}
	t.deleted.Store(true)
	for _, r := range t.runners() {
		if err := t.deleteConsumer(ctx, r.name, r); err != nil {
			return err
		}
	}
	if err := t.ml.DeleteTopic(ctx); err != nil {
		return err
	}
	t.forgetReplication(ctx)
	t.s.reg.remove(t.name)
	t.s.topicRemoved(t.name)
	return nil
}

// createConsumer answers CONSUMER.CREATE at the owner (spec §2.5).
func (t *topic) createConsumer(ctx context.Context, req jsapi.APIRequest, m message) (*jsapi.ConsumerInfo, *jsapi.APIError) {
	var creq jsapi.CreateConsumerRequest
	if err := jsapi.DecodeRequest(m.data, &creq); err != nil {
		return nil, jsapi.ErrInvalidJSON(err)
	}
	st := t.stream()
	if creq.Stream != req.Stream { // also an empty body, as on the reference (req.Stream names this topic)
		return nil, jsapi.ErrStreamMismatch()
	}
	cfg := creq.Config
	if cfg.DeliverSubject != "" {
		return nil, jsapi.ErrConsumerCreate(errors.New("push consumers are not supported by Strata: create a pull consumer (no deliver_subject)"))
	}
	if cfg.FilterSubject != "" && len(cfg.FilterSubjects) > 0 {
		return nil, jsapi.ErrConsumerDuplicateFilterSubjects()
	}
	if req.Filter != "" && (cfg.FilterSubject != req.Filter || len(cfg.FilterSubjects) > 0) {
		return nil, jsapi.ErrConsumerFilterSubjectMismatch()
	}
	name := cfg.EffectiveName()
	if req.Consumer != "" {
		if name != "" && name != req.Consumer {
			return nil, jsapi.ErrConsumerNameNotMatchSubject()
		}
		name = req.Consumer
	}
	if name == "" {
		name = randomName()
	}
	cfg.Name = name
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, jsapi.ErrConsumerCreate(err)
	}
	durable := cfg.Durable != ""
	if r := t.runner(name); r != nil {
		if creq.Action == jsapi.ActionCreate && !reflect.DeepEqual(r.cfg, cfg) {
			return nil, jsapi.ErrConsumerAlreadyExists()
		}
		if !reflect.DeepEqual(r.cfg, cfg) {
			var uerr error
			if err := r.call(ctx, func(time.Time) {
				if uerr = r.c.UpdateConfig(cfg); uerr == nil {
					r.cfg = cfg
				}
			}); err != nil {
				return nil, jsapi.ErrConsumerCreate(err)
			}
			if uerr != nil {
				return nil, jsapi.ErrConsumerCreate(uerr)
			}
		}
		ci, err := r.info(ctx)
		if err != nil {
			return nil, jsapi.ErrConsumerCreate(err)
		}
		return ci, nil
	}
	if creq.Action == jsapi.ActionUpdate {
		return nil, jsapi.ErrConsumerDoesNotExist()
	}
	if max := st.config.MaxConsumers; max > 0 && len(t.runners()) >= max {
		return nil, jsapi.ErrMaximumConsumersLimit()
	}
	if ns, ok := t.s.namespace(t.name.Tenant, t.name.Namespace); ok && ns.MaxConsumers > 0 && len(t.runners()) >= ns.MaxConsumers {
		return nil, withDesc(jsapi.ErrMaximumConsumersLimit(), fmt.Sprintf(
			"maximum consumers limit reached: namespace %s/%s allows %d consumers per topic (policy max_consumers)",
			t.name.Tenant, t.name.Namespace, ns.MaxConsumers))
	}
	if apiErr := t.s.consumerQuota(t.name.Tenant); apiErr != nil { // quota_gate.go
		return nil, apiErr
	}
	var persisted []byte // a replicated subscription deleted before: its tombstone
	if isReplicated(&cfg) {
		if kv, err := t.s.cfg.Store.Get(ctx, rsubKey(t.name, name)); err == nil {
			persisted = kv.Value
		}
	}
	src, rs := t.consumerSource(name, &cfg, persisted)
	c, err := consumer.New(cfg, nil, t.s.cfg.Now(), src, t.s.consumerOptions(st)...)
	if err != nil {
		return nil, jsapi.ErrConsumerCreate(err)
	}
	cs, gen, _ := c.Snapshot()
	if durable {
		if err := t.writeCursor(ctx, name, &cs); err != nil {
			return nil, jsapi.ErrConsumerCreate(fmt.Errorf("persisting the cursor: %w", err))
		}
	}
	c.Persisted(gen) // nothing waits yet: no output
	r := t.startRunner(name, cfg, c, durable, rs)
	t.mu.Lock()
	if old := t.consumers[name]; old != nil { // a concurrent create won
		t.mu.Unlock()
		r.stop(false, jsapi.DescConsumerDeleted)
		ci, err := old.info(ctx)
		if err != nil {
			return nil, jsapi.ErrConsumerCreate(err)
		}
		return ci, nil
	}
	t.consumers[name] = r
	t.mu.Unlock()
	ci, err := r.info(ctx)
	if err != nil {
		return nil, jsapi.ErrConsumerCreate(err)
	}
	return ci, nil
}

// deleteConsumer stops a consumer (waiting pulls get 409 Consumer
// Deleted) and deletes its cursor.
func (t *topic) deleteConsumer(ctx context.Context, name string, r *runner) error {
	t.removeRunner(name, r)
	r.stop(false, jsapi.DescConsumerDeleted)
	if r.durable {
		return t.deleteCursor(ctx, name)
	}
	return nil
}

// info is the consumer's ConsumerInfo, computed on its goroutine.
func (r *runner) info(ctx context.Context) (*jsapi.ConsumerInfo, error) {
	var ci jsapi.ConsumerInfo
	if err := r.call(ctx, func(now time.Time) { ci = r.c.Info(now) }); err != nil {
		return nil, err
	}
	if ci.Stream == "" {
		ci.Stream = r.t.stream().stream
	}
	if ci.Name == "" {
		ci.Name = r.name
	}
	return &ci, nil
}

// randomName is an 8-character ephemeral consumer name.
func randomName() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// maxSubjectDetails is how many subjects one STREAM.INFO reply lists at
// most with subjects_filter (the reference's JSMaxSubjectDetails).
const maxSubjectDetails = 100_000

// pageSubjects cuts info's per-subject counts to the page from offset
// and returns the paging block the reference sends with them: zero when
// no subject matched (or none were asked for).
func pageSubjects(info *jsapi.StreamInfo, offset int) jsapi.Paged {
	subj := info.State.Subjects
	if len(subj) == 0 {
		return jsapi.Paged{}
	}
	offset = max(offset, 0)
	paged := jsapi.Paged{Total: len(subj), Offset: offset, Limit: maxSubjectDetails}
	if offset == 0 && len(subj) <= maxSubjectDetails {
		return paged
	}
	names := make([]string, 0, len(subj))
	for k := range subj {
		names = append(names, k)
	}
	sort.Strings(names)
	from := min(offset, len(names))
	to := min(from+maxSubjectDetails, len(names))
	var page map[string]uint64
	if to > from {
		page = make(map[string]uint64, to-from)
		for _, k := range names[from:to] {
			page[k] = subj[k]
		}
	}
	info.State.Subjects = page
	return paged
}

// unpin answers CONSUMER.UNPIN with the reference's checks, in its order,
// and ends the group's pin, if any: the next message goes to the oldest
// waiting request without a pin id (broker/consumer pin.go).
func (t *topic) unpin(ctx context.Context, req jsapi.APIRequest, m message) *jsapi.APIError {
	var body jsapi.ConsumerUnpinRequest
	if err := json.Unmarshal(m.data, &body); err != nil { // not DecodeRequest: the reference uses json.Unmarshal here
		return jsapi.ErrInvalidJSON(err)
	}
	if body.Group == "" {
		return jsapi.ErrInvalidJSON(errors.New("consumer group not specified"))
	}
	if !jsapi.ValidPriorityGroup(body.Group) {
		return jsapi.ErrConsumerInvalidGroupName()
	}
	r := t.runner(req.Consumer)
	if r == nil {
		return jsapi.ErrConsumerNotFound()
	}
	var uerr error
	if err := r.call(ctx, func(now time.Time) {
		var outs []consumer.Out
		outs, uerr = r.c.Unpin(now, body.Group)
		r.emit(outs)
	}); err != nil {
		return jsapi.ErrConsumerNotFound()
	}
	if uerr != nil {
		return jsapi.ErrConsumerInvalidPriorityGroup()
	}
	return nil
}
