package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/broker/natsproto"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy"
)

// maxStreamName is the longest stream name, in bytes (the reference's
// limit).
const maxStreamName = 255

// ownerInfoTimeout bounds asking a stream's owner for its state on behalf
// of a list; past it the list shows the last snapshot in etcd.
const ownerInfoTimeout = 2 * time.Second

// apiTimeout bounds one API request's etcd and owner work.
const apiTimeout = 10 * time.Second

// replyJSON answers an API request with v.
func (s *Service) replyJSON(reply string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.cfg.Logger.Error("encoding an API reply", "err", err)
		return
	}
	s.respond(reply, b)
}

// replyError answers an API request of kind k with e.
func (s *Service) replyError(reply string, k jsapi.Kind, e *jsapi.APIError) {
	s.apiErrors.Add(1)
	s.replyJSON(reply, jsapi.ErrorResponse(k, e))
}

// foreignSubjects refuses, with tenant accounts (Config.AccountSpaces),
// stream subjects whose first token is another tenant's name: nats-wire
// §4, the tenant is the subject's first token and a connection's must be
// its own.
func (s *Service) foreignSubjects(tenant string, subjects []string) *jsapi.APIError {
	if !s.cfg.AccountSpaces {
		return nil
	}
	for _, subj := range subjects {
		first, _, _ := strings.Cut(subj, ".")
		if first != tenant && tenancy.ValidToken(first) && s.cfg.Policies.Tenant(first) {
			return jsapi.ErrStreamInvalidConfig(fmt.Errorf("subject %s belongs to tenant %s: a stream of tenant %s captures its own subjects only", subj, first, tenant))
		}
	}
	return nil
}

// apiRegion answers the requests any broker answers from the registry:
// account info, stream names and stream list.
func (s *Service) apiRegion(req jsapi.APIRequest, m message) {
	ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
	defer cancel()
	tenant := s.tenantOf(m)
	switch req.Kind {
	case jsapi.KindAccountInfo:
		streams := s.reg.streams(tenant, "")
		ai := &jsapi.AccountInfo{
			Streams: len(streams), Consumers: countCursors(ctx, s.cfg.Store, tenant),
			Limits: jsapi.UnlimitedAccountLimits(),
			API:    jsapi.APIStats{Level: jsapi.APILevel, Total: s.apiTotal.Load(), Errors: s.apiErrors.Load()},
		}
		if m.account != "" {
			// The counts are the broker's, all tenants together: a tenant
			// is not told how busy the others are (no per-account counts
			// are kept).
			ai.API.Total, ai.API.Errors = 0, 0
		}
		for _, st := range streams {
			ai.Store += s.streamInfo(ctx, st, "").State.Bytes
		}
		s.replyJSON(m.reply, jsapi.AccountInfoResponse{Response: jsapi.Response{Type: req.Kind.ResponseType()}, AccountInfo: ai})
	case jsapi.KindStreamNames, jsapi.KindStreamList:
		var body jsapi.StreamNamesRequest
		if err := jsapi.DecodeRequest(m.data, &body); err != nil {
			s.replyError(m.reply, req.Kind, jsapi.ErrInvalidJSON(err))
			return
		}
		all := s.reg.streams(tenant, body.Subject)
		limit := 1024
		if req.Kind == jsapi.KindStreamList {
			limit = 256
		}
		off := min(max(body.Offset, 0), len(all))
		page := all[off:min(off+limit, len(all))]
		paged := jsapi.Paged{Total: len(all), Offset: off, Limit: limit}
		if req.Kind == jsapi.KindStreamNames {
			var names []string // null when there are none, as on the reference
			for _, st := range page {
				names = append(names, st.stream)
			}
			s.replyJSON(m.reply, jsapi.StreamNamesResponse{Response: jsapi.Response{Type: req.Kind.ResponseType()}, Paged: paged, Streams: names})
			return
		}
		infos := make([]*jsapi.StreamInfo, 0, len(page))
		for _, st := range page {
			infos = append(infos, s.streamInfo(ctx, st, ""))
		}
		s.replyJSON(m.reply, jsapi.StreamListResponse{Response: jsapi.Response{Type: req.Kind.ResponseType()}, Paged: paged, Streams: infos})
	}
}

// streamInfo is a stream's info: live from the managed ledger when this
// broker owns the topic, else from the snapshot in its metadata (as of
// the owner's last metadata write).
func (s *Service) streamInfo(ctx context.Context, st *stream, subjectsFilter string) *jsapi.StreamInfo {
	s.mu.Lock()
	t := s.topics[st.name]
	s.mu.Unlock()
	if t.isReady() {
		return t.info(subjectsFilter)
	}
	// Ask the owner, over the internal link, for the live state.
	rctx, cancel := context.WithTimeout(ctx, ownerInfoTimeout)
	defer cancel()
	var resp jsapi.StreamInfoResponse
	if err := s.request(rctx, jsapi.APIPrefix+"STREAM.INFO."+qualifiedStream(st), nil, &resp); err == nil && resp.Error == nil && resp.StreamInfo != nil {
		return resp.StreamInfo
	}
	info := &jsapi.StreamInfo{Config: st.config, Created: st.created.UTC(), TimeStamp: s.cfg.Now().UTC()}
	if tm, _, err := mledger.Load(ctx, s.cfg.Store, st.name); err == nil {
		info.State = snapshotState(tm)
	}
	return info
}

// createStream answers STREAM.CREATE for a stream the registry does not
// know (spec §2.3): the config is checked, the topic created in etcd,
// and this broker campaigns to own it.
func (s *Service) createStream(req jsapi.APIRequest, m message) {
	cfg, apiErr := s.parseStreamConfig(req, m.data)
	if apiErr != nil {
		s.replyError(m.reply, req.Kind, apiErr)
		return
	}
	tenant := s.tenantOf(m)
	name, apiErr := s.streamTopic(tenant, cfg)
	if apiErr != nil {
		s.replyError(m.reply, req.Kind, apiErr)
		return
	}
	if apiErr := s.foreignSubjects(tenant, cfg.Subjects); apiErr != nil {
		s.replyError(m.reply, req.Kind, apiErr)
		return
	}
	if other := s.reg.overlapping(tenant, cfg.Name, cfg.Subjects); other != "" {
		s.replyError(m.reply, req.Kind, jsapi.ErrStreamSubjectOverlap())
		return
	}
	if apiErr := s.topicQuota(name.Tenant); apiErr != nil { // quota_gate.go
		s.replyError(m.reply, req.Kind, apiErr)
		return
	}
	spec, _ := json.Marshal(topicSpec{Stream: cfg.Name, Config: *cfg})
	ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
	defer cancel()
	now := s.cfg.Now().UTC()
	if err := mledger.Create(ctx, s.cfg.Store, name, spec, now); err != nil {
		if errors.Is(err, mledger.ErrExists) {
			// Created meanwhile (by another broker): the owner compares.
			if tm, _, err := mledger.Load(ctx, s.cfg.Store, name); err == nil {
				st := decodeStream(name, tm)
				s.reg.put(st)
				s.topicAdded(name)
				s.toOwner(name, m, func(t *topic) { t.api(req, m) })
				return
			}
		}
		s.replyError(m.reply, req.Kind, jsapi.ErrStreamStoreFailed(err))
		return
	}
	st := &stream{name: name, stream: cfg.Name, config: *cfg, created: now}
	s.reg.put(st)
	s.topicAdded(name)
	if err := s.queueDefinition(ctx, name, wire.TombCreate, spec); err != nil {
		s.cfg.Logger.Warn("stream created here; queueing it for the other regions failed (they create it with its first message)", "topic", name.String(), "err", err)
	}
	info := &jsapi.StreamInfo{Config: *cfg, Created: now, TimeStamp: now}
	s.replyJSON(m.reply, jsapi.StreamCreateResponse{Response: jsapi.Response{Type: req.Kind.ResponseType()}, StreamInfo: info, DidCreate: true})
}

// parseStreamConfig decodes and checks a STREAM.CREATE/UPDATE body.
func (s *Service) parseStreamConfig(req jsapi.APIRequest, body []byte) (*jsapi.StreamConfig, *jsapi.APIError) {
	var cfg jsapi.StreamConfig
	if len(body) == 0 {
		return nil, jsapi.ErrInvalidJSON(errors.New("empty request"))
	}
	if err := jsapi.DecodeRequest(body, &cfg); err != nil {
		return nil, jsapi.ErrInvalidJSON(err)
	}
	if cfg.Name == "" {
		cfg.Name = req.Stream
	}
	if cfg.Name != req.Stream {
		return nil, jsapi.ErrStreamMismatch()
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, jsapi.ErrStreamInvalidConfig(err)
	}
	if u := cfg.Unsupported(); len(u) > 0 {
		return nil, jsapi.ErrStreamInvalidConfig(fmt.Errorf("strata does not support %v", u))
	}
	if cfg.MaxMsgsPerSubject > 0 {
		return nil, jsapi.ErrStreamInvalidConfig(errors.New("strata does not support max_msgs_per_subject yet"))
	}
	if len(cfg.Name) > maxStreamName {
		return nil, jsapi.ErrStreamInvalidConfig(fmt.Errorf("stream name is too long, maximum allowed is %d", maxStreamName))
	}
	for _, subj := range cfg.Subjects {
		if !natsproto.ValidSubscribeSubject([]byte(subj)) {
			return nil, jsapi.ErrStreamInvalidConfig(fmt.Errorf("invalid subject %q", subj))
		}
		if subj[0] == '$' || subj == ">" {
			return nil, jsapi.ErrStreamInvalidConfig(fmt.Errorf("subject %q cannot be captured by a stream", subj))
		}
	}
	return &cfg, nil
}

// streamTopic maps a JetStream stream onto its topic in tenant and checks
// that its namespace exists.
func (s *Service) streamTopic(tenant string, cfg *jsapi.StreamConfig) (tenancy.Name, *jsapi.APIError) {
	if tenant == "" {
		return tenancy.Name{}, jsapi.ErrStreamInvalidConfig(errors.New("the topology sets no defaults.jetstream tenant and namespace for streams created through the JetStream API"))
	}
	name, ok := topicForStream(tenant, s.cfg.DefaultNamespace, cfg.Name, cfg.Metadata)
	if !ok {
		return name, jsapi.ErrStreamInvalidConfig(fmt.Errorf("stream name %q is not a valid Strata topic name (letters, digits, '-' and '_'; or <namespace>:<topic>)", cfg.Name))
	}
	if _, ok := s.namespace(tenant, name.Namespace); !ok {
		return name, jsapi.ErrStreamInvalidConfig(fmt.Errorf("namespace %s/%s does not exist", tenant, name.Namespace))
	}
	return name, nil
}

// autoCreate creates topic n of a namespace that allows it, with the
// namespace's retention (spec §4), and returns its registry entry.
func (s *Service) autoCreate(n tenancy.Name, ns Namespace) (*stream, error) {
	cfg := nsStreamConfig(n, ns)
	spec, _ := json.Marshal(topicSpec{Stream: cfg.Name, Config: cfg})
	ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
	defer cancel()
	now := s.cfg.Now().UTC()
	if err := mledger.Create(ctx, s.cfg.Store, n, spec, now); err != nil && !errors.Is(err, mledger.ErrExists) {
		return nil, err
	}
	tm, _, err := mledger.Load(ctx, s.cfg.Store, n)
	if err != nil {
		return nil, err
	}
	st := decodeStream(n, tm)
	s.reg.put(st)
	s.topicAdded(n)
	return s.reg.topic(n), nil
}
