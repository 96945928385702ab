package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/tenancy"
)

// offloadAdminPrefix is the internal request a broker sends a topic's
// owner for its offload status or to start an offload:
// $STRATA.ADMIN.OFFLOAD.<tenant>.<namespace>.<topic>, body an
// OffloadRequest (empty: status only).
const offloadAdminPrefix = "$STRATA.ADMIN.OFFLOAD."

// OffloadRequest asks a topic's owner to offload closed ledgers until at
// most KeepBytes of its data are not offloaded (Offload false: report
// only). The admin API's POST …/offload body.
type OffloadRequest struct {
	Offload   bool  `json:"offload"`
	KeepBytes int64 `json:"keep_bytes"`
}

// offloadReply is the owner's answer.
type offloadReply struct {
	Status *mledger.OffloadStatus `json:"status,omitempty"`
	Error  string                 `json:"error,omitempty"`
	NoTier bool                   `json:"no_tier,omitempty"`
}

// ErrNoTier: an offload was requested in a region without a tier.
var ErrNoTier = errors.New("jetstream: the region has no tier")

// TopicOffload reports topic n's offload status at its owner, after
// starting an offload when req.Offload. Errors: ErrTopicNotFound,
// ErrNoTier, ctx's when no owner answers.
func (s *Service) TopicOffload(ctx context.Context, n tenancy.Name, req OffloadRequest) (*mledger.OffloadStatus, error) {
	if s.reg.topic(n) == nil {
		return nil, ErrTopicNotFound
	}
	body, _ := json.Marshal(req)
	var rep offloadReply
	if err := s.request(ctx, offloadAdminPrefix+n.Tenant+"."+n.Namespace+"."+n.Topic, body, &rep); err != nil {
		return nil, err
	}
	switch {
	case rep.NoTier:
		return nil, ErrNoTier
	case rep.Error != "":
		return nil, errors.New(rep.Error)
	}
	return rep.Status, nil
}

func (s *Service) dispatchOffloadAdmin(m message) {
	n, err := tenancy.ParseName(strings.ReplaceAll(strings.TrimPrefix(m.subject, offloadAdminPrefix), ".", "/"))
	if err != nil || s.reg.topic(n) == nil {
		return
	}
	var req OffloadRequest
	if len(m.data) > 0 {
		if err := json.Unmarshal(m.data, &req); err != nil {
			b, _ := json.Marshal(offloadReply{Error: "offload request: " + err.Error()})
			s.respond(m.reply, b)
			return
		}
	}
	s.toOwner(n, m, func(t *topic) {
		s.goAPI(func() {
			var rep offloadReply
			if req.Offload {
				ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
				err := t.ml.OffloadNow(ctx, req.KeepBytes)
				cancel()
				switch {
				case errors.Is(err, mledger.ErrNoTier):
					rep.NoTier = true
				case err != nil:
					rep.Error = err.Error()
				}
			}
			if !rep.NoTier && rep.Error == "" {
				st := t.ml.OffloadStatus()
				rep.Status = &st
			}
			b, _ := json.Marshal(rep)
			s.respond(m.reply, b)
		})
	})
}
