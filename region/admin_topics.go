package region

import (
	"context"
	"errors"
	"net/http"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/tenancy"
)

// The topic writes of topicsAdmin (admin.TopicsBackend): PUT and DELETE
// of /admin/v1/topics/{t}/{ns}/{topic}.

func (a topicsAdmin) CreateTopic(ctx context.Context, name tenancy.Name) (bool, error) {
	created, err := a.n.js.CreateTopic(ctx, name)
	switch {
	case err == nil:
		return created, nil
	case errors.Is(err, jetstream.ErrNamespaceNotFound):
		return false, admin.Errorf(admin.CodeNamespaceNotFound, "ns", "tenant %s has no namespace %s", name.Tenant, name.Namespace)
	case errors.Is(err, jetstream.ErrSubjectOverlap):
		return false, admin.Errorf(admin.CodeConflict, "topic", "topic %s: %v", name, err)
	default:
		return false, a.n.metadataError(err)
	}
}

func (a topicsAdmin) DeleteTopic(ctx context.Context, name tenancy.Name) error {
	err := a.n.js.DeleteTopic(ctx, name)
	var apiErr *jsapi.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrTopicNotFound), errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		return a.notFound(name)
	case errors.As(err, &apiErr):
		return admin.Errorf(admin.CodeInternal, "", "deleting topic %s: %s", name, apiErr.Description)
	default:
		return admin.Errorf(admin.CodeNoOwner, "", "%v", err)
	}
}
