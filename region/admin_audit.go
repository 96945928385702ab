package region

import (
	"context"
	"errors"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/audit"
	"github.com/stratamesh/strata/tenancy"
)

// auditAdmin is the admin backend of `strata audit` and its test hooks.
type auditAdmin struct{ n *Node }

func (a auditAdmin) TopicOrigins(ctx context.Context, name tenancy.Name, q audit.Request) (*audit.Summary, error) {
	s, err := a.n.js.TopicOrigins(ctx, name, q)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, jetstream.ErrTopicNotFound):
		return nil, topicsAdmin(a).notFound(name)
	case errors.Is(err, audit.ErrBadRequest):
		return nil, admin.Errorf(admin.CodeInvalidField, "span", "%v", err)
	default:
		return nil, admin.Errorf(admin.CodeNoOwner, "", "%v", err)
	}
}

func (a auditAdmin) TestHook(ctx context.Context, name tenancy.Name, q admin.TestHookRequest) (string, error) {
	res, err := a.n.js.TestHook(ctx, name, jetstream.TestHookRequest{Action: q.Action, OriginRegion: q.OriginRegion, OriginSeq: q.OriginSeq, Remote: q.Remote})
	switch {
	case err == nil:
		return res.Done, nil
	case errors.Is(err, jetstream.ErrTestHooksOff):
		return "", admin.Errorf(admin.CodeTestHooksOff, "", "region %s: %v", a.n.cfg.Region, err)
	case errors.Is(err, jetstream.ErrTopicNotFound):
		return "", topicsAdmin(a).notFound(name)
	case errors.Is(err, jetstream.ErrBadHook):
		return "", admin.Errorf(admin.CodeInvalidBody, "", "%v", err)
	default:
		return "", admin.Errorf(admin.CodeNoOwner, "", "%v", err)
	}
}
