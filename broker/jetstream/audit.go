package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/audit"
	"github.com/stratamesh/strata/tenancy"
)

// The audit's server side (issue 26 item 3; internal/audit): a topic's
// owner reads its managed ledger once and answers, per origin stream,
// the origin sequences it holds and a checksum per span
// (audit.Summary). Only the summary leaves the owner.

// originsAdminPrefix is the internal request for a topic's origin
// summary at its owner: $STRATA.ADMIN.ORIGINS.<tenant>.<namespace>.<topic>,
// body an audit.Request.
const originsAdminPrefix = "$STRATA.ADMIN.ORIGINS."

// originsReply is the owner's answer.
type originsReply struct {
	Summary *audit.Summary `json:"summary,omitempty"`
	Error   string         `json:"error,omitempty"`
	Bad     bool           `json:"bad,omitempty"` // the request was refused (audit.ErrBadRequest)
}

// TopicOrigins asks topic n's owner for its summary of the origin
// streams it holds (audit.Request, normalised there). Errors:
// ErrTopicNotFound, audit.ErrBadRequest, the owner's read error, ctx's
// when no owner answers in time.
func (s *Service) TopicOrigins(ctx context.Context, n tenancy.Name, q audit.Request) (*audit.Summary, error) {
	if s.reg.topic(n) == nil {
		return nil, ErrTopicNotFound
	}
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(q)
	var rep originsReply
	if err := s.request(ctx, originsAdminPrefix+n.Tenant+"."+n.Namespace+"."+n.Topic, body, &rep); err != nil {
		return nil, err
	}
	switch {
	case rep.Bad:
		return nil, fmt.Errorf("%w: %s", audit.ErrBadRequest, rep.Error)
	case rep.Error != "":
		return nil, errors.New(rep.Error)
	case rep.Summary == nil:
		return nil, errors.New("jetstream: the topic's owner sent no summary")
	}
	return rep.Summary, nil
}

func (s *Service) dispatchOriginsAdmin(m message) {
	n, err := tenancy.ParseName(strings.ReplaceAll(strings.TrimPrefix(m.subject, originsAdminPrefix), ".", "/"))
	if err != nil || s.reg.topic(n) == nil {
		return
	}
	var q audit.Request
	if err := json.Unmarshal(m.data, &q); err != nil {
		b, _ := json.Marshal(originsReply{Error: "origins request: " + err.Error(), Bad: true})
		s.respond(m.reply, b)
		return
	}
	s.toOwner(n, m, func(t *topic) {
		s.goAPI(func() {
			ctx, cancel := context.WithTimeout(s.ctx, originsTimeout)
			defer cancel()
			sum, err := summarize(ctx, t.ml, s.cfg.Region, q)
			rep := originsReply{Summary: sum}
			if err != nil {
				rep = originsReply{Error: err.Error(), Bad: errors.Is(err, audit.ErrBadRequest)}
			}
			b, _ := json.Marshal(rep)
			s.respond(m.reply, b)
		})
	})
}

// originsTimeout bounds one summary's read of a managed ledger.
const originsTimeout = 2 * apiTimeout

// summarize reads ml's messages q.LocalFrom..q.LocalTo (clipped to what
// it stores; 0: all) once, in order, into a summary. A trim during the
// read skips what it removed.
func summarize(ctx context.Context, ml *mledger.ML, region string, q audit.Request) (*audit.Summary, error) {
	z, err := audit.NewSummarizer(region, q)
	if err != nil {
		return nil, err
	}
	st := ml.State()
	from, to := max(st.FirstSeq, q.LocalFrom), st.LastSeq
	if q.LocalTo != 0 {
		to = min(to, q.LocalTo)
	}
	for seq := from; seq <= to && seq != 0; seq++ {
		msg, err := ml.Read(ctx, seq)
		switch {
		case errors.Is(err, mledger.ErrGone):
			if f := ml.State().FirstSeq; f > seq+1 {
				seq = f - 1 // trimmed meanwhile: on from the new first
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("reading seq %d of %s: %w", seq, ml.Name(), err)
		}
		o := msg.Origin
		z.Add(audit.Origin{Region: o.Region, Incarnation: o.Incarnation}, o.Seq, seq, audit.Digest(o.Seq, msg.Header, msg.Data))
	}
	sum := z.Summary()
	return &sum, nil
}
