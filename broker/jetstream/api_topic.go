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
	"github.com/stratamesh/strata/broker/natsproto"
)

// api handles a stream-scoped API request at the topic's owner. Pulls go
// straight to the consumer's mailbox; everything else runs on an API
// goroutine.
func (t *topic) api(req jsapi.APIRequest, m message) {
	if req.Kind == jsapi.KindConsumerNext {
		r := t.runner(req.Consumer)
		if r == nil {
			t.s.deliver(m.origin, m.reply, m.reply, "",
				natsproto.AppendStatusHeader(nil, jsapi.StatusConflict, jsapi.DescConsumerDeleted), nil)
			return
		}
		r.pull(m.origin, m.reply, m.data)
		return
	}
	t.s.goAPI(func() { t.handleAPI(req, m) })
}

func (t *topic) handleAPI(req jsapi.APIRequest, m message) {
	s := t.s
	ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
	defer cancel()
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
		if req.Kind == jsapi.KindStreamCreate {
			if !sameConfig(&cur.config, cfg) {
				fail(jsapi.ErrStreamNameInUse())
				return
			}
			s.replyJSON(m.reply, jsapi.StreamCreateResponse{Response: typ, StreamInfo: t.info("")})
			return
		}
		if e := t.update(ctx, cur, cfg); e != nil {
			fail(e)
			return
		}
		s.replyJSON(m.reply, jsapi.StreamCreateResponse{Response: typ, StreamInfo: t.info("")})
	case jsapi.KindStreamInfo:
		var body jsapi.StreamInfoRequest
		if len(m.data) > 0 {
			if err := json.Unmarshal(m.data, &body); err != nil {
				fail(jsapi.ErrInvalidJSON(err))
				return
			}
		}
		s.replyJSON(m.reply, jsapi.StreamInfoResponse{Response: typ, StreamInfo: t.info(body.SubjectsFilter)})
	case jsapi.KindStreamDelete:
		if err := t.deleteStream(ctx); err != nil {
			fail(jsapi.ErrStreamStoreFailed(err))
			return
		}
		s.replyJSON(m.reply, jsapi.SuccessResponse{Response: typ, Success: true})
	case jsapi.KindStreamPurge:
		var body jsapi.StreamPurgeRequest
		if len(m.data) > 0 {
			if err := json.Unmarshal(m.data, &body); err != nil {
				fail(jsapi.ErrInvalidJSON(err))
				return
			}
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
		if err := t.deleteConsumer(ctx, req.Consumer, r); err != nil {
			fail(jsapi.ErrStreamStoreFailed(err))
			return
		}
		s.replyJSON(m.reply, jsapi.SuccessResponse{Response: typ, Success: true})
	case jsapi.KindConsumerNames, jsapi.KindConsumerList:
		var body jsapi.ConsumerNamesRequest
		if len(m.data) > 0 {
			if err := json.Unmarshal(m.data, &body); err != nil {
				fail(jsapi.ErrInvalidJSON(err))
				return
			}
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
		state.FirstTime, state.LastTime = ms.FirstTime.UTC(), ms.LastTime.UTC()
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
		return jsapi.ErrStreamInvalidConfig(errors.New("stream storage can not be changed"))
	}
	if cfg.Retention != cur.config.Retention {
		return jsapi.ErrStreamInvalidConfig(errors.New("stream retention can not be changed"))
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
// metadata; then the topic is no longer served here.
func (t *topic) deleteStream(ctx context.Context) error {
	if t.stream().config.DenyDelete {
		return errors.New("stream denies delete")
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
	t.s.reg.remove(t.name)
	t.s.stopCampaign(t.name)
	return nil
}

// createConsumer answers CONSUMER.CREATE at the owner (spec §2.5).
func (t *topic) createConsumer(ctx context.Context, req jsapi.APIRequest, m message) (*jsapi.ConsumerInfo, *jsapi.APIError) {
	var creq jsapi.CreateConsumerRequest
	if err := json.Unmarshal(m.data, &creq); err != nil {
		return nil, jsapi.ErrInvalidJSON(err)
	}
	st := t.stream()
	if creq.Stream != "" && creq.Stream != st.stream {
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
	c, err := consumer.New(cfg, nil, t.s.cfg.Now(), &mlSource{ml: t.ml, ctx: t.s.ctx}, consumer.StreamName(st.stream))
	if err != nil {
		return nil, jsapi.ErrConsumerCreate(err)
	}
	if durable {
		cs, _, _ := c.Snapshot()
		if err := t.writeCursor(ctx, name, &cs); err != nil {
			return nil, jsapi.ErrConsumerCreate(fmt.Errorf("persisting the cursor: %w", err))
		}
	}
	r := t.startRunner(name, cfg, c, durable)
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

var _ = sort.Strings
