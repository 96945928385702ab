package admin

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/stratamesh/strata/internal/audit"
	"github.com/stratamesh/strata/tenancy"
)

// The audit's routes (issue 26 item 3; `strata audit`): a topic's
// origin summary from its owner, and the test hooks that make the
// faults an audit must find.

// AuditTimeout bounds an origin summary: its owner reads the topic's
// managed ledger once (about a million small messages in seconds).
const AuditTimeout = 30 * time.Second

// OriginsAnswer is GET …/origins: the region's summary of the topic's
// origin streams (audit.Summary: per origin, held origin-sequence
// ranges and per-span count and checksum).
type OriginsAnswer struct {
	Region  string         `json:"region"`
	Topic   string         `json:"topic"` // tenant/namespace/topic
	Summary *audit.Summary `json:"summary"`
}

// TestHookRequest is the body of POST /admin/v1/testhooks/topics/…
// (a test hook, served only by nodes started with STRATA_TEST_HOOKS=1):
// action remove-message (origin_region, origin_seq: that message reads
// as gone in this region's copy only), freeze-replicator or
// thaw-replicator (remote: the topic's replicator cursor towards that
// region drops its sends and reports no lag, or works again).
type TestHookRequest struct {
	Action       string `json:"action"`
	OriginRegion string `json:"origin_region,omitempty"`
	OriginSeq    uint64 `json:"origin_seq,omitempty"`
	Remote       string `json:"remote,omitempty"`
}

func (q *TestHookRequest) validate() *Error {
	switch q.Action {
	case "remove-message":
		if q.OriginRegion == "" {
			return Errorf(CodeInvalidBody, "origin_region", "request body: remove-message needs origin_region")
		}
		if q.OriginSeq == 0 {
			return Errorf(CodeInvalidBody, "origin_seq", "request body: remove-message needs origin_seq (from 1)")
		}
	case "freeze-replicator", "thaw-replicator":
		if q.Remote == "" {
			return Errorf(CodeInvalidBody, "remote", "request body: %s needs remote (a region)", q.Action)
		}
	default:
		return Errorf(CodeInvalidBody, "action", "request body: action %q: want remove-message, freeze-replicator or thaw-replicator", q.Action)
	}
	return nil
}

// TestHookAnswer is what a test hook did.
type TestHookAnswer struct {
	Region string `json:"region"`
	Done   string `json:"done"`
}

// AuditBackend serves the audit's routes (brokers).
type AuditBackend interface {
	// TopicOrigins is the topic's origin summary from its owner. Errors:
	// topic_not_found, invalid_field (the request), no_owner.
	TopicOrigins(ctx context.Context, name tenancy.Name, q audit.Request) (*audit.Summary, error)
	// TestHook applies a test hook at the topic's owner. Errors:
	// test_hooks_off, topic_not_found, invalid_body, no_owner.
	TestHook(ctx context.Context, name tenancy.Name, q TestHookRequest) (string, error)
}

// ParseOriginsQuery reads an origins request from query parameters:
// from, to (origin sequences; 0 or absent: from the first, to the
// last), span (origin sequences per checksum; default 4096),
// origin_region and origin_incarnation (one origin stream; both or
// neither), local_from, local_to (the topic sequences to read; a hint
// from an earlier answer). Errors: invalid_field naming the parameter.
func ParseOriginsQuery(v url.Values) (audit.Request, *Error) {
	var q audit.Request
	for _, f := range []struct {
		name string
		dst  *uint64
	}{{"from", &q.From}, {"to", &q.To}, {"span", &q.Span}, {"local_from", &q.LocalFrom}, {"local_to", &q.LocalTo}} {
		s := v.Get(f.name)
		if s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, Errorf(CodeInvalidField, f.name, "%s=%s: want a decimal integer from 0 to 2^64-1", f.name, strconv.Quote(s))
		}
		*f.dst = n
	}
	region, inc := v.Get("origin_region"), v.Get("origin_incarnation")
	switch {
	case region != "" && inc != "":
		q.Origin = &audit.Origin{Region: region, Incarnation: inc}
	case region != "" || inc != "":
		return q, Errorf(CodeInvalidField, "origin_region", "origin_region and origin_incarnation go together (one origin stream)")
	}
	if err := q.Normalize(); err != nil {
		return q, Errorf(CodeInvalidField, "span", "%v", err)
	}
	return q, nil
}

func (b Backends) auditRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/topics/{t}/{ns}/{topic}/origins", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			name, e := TopicName(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			q, e := ParseOriginsQuery(r.URL.Query())
			if e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), AuditTimeout)
			defer cancel()
			sum, err := b.Audit.TopicOrigins(ctx, name, q)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, OriginsAnswer{Region: b.Region, Topic: name.String(), Summary: sum})
		}},
		{http.MethodPost, "/admin/v1/testhooks/topics/{t}/{ns}/{topic}", Superuser, func(w http.ResponseWriter, r *http.Request) {
			name, e := TopicName(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			var req TestHookRequest
			if e := DecodeBody(w, r, &req, false); e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), AuditTimeout)
			defer cancel()
			done, err := b.Audit.TestHook(ctx, name, req)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, TestHookAnswer{Region: b.Region, Done: done})
		}},
	}
}
