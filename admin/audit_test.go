package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stratamesh/strata/internal/audit"
	"github.com/stratamesh/strata/tenancy"
)

// AuditBackend: topic t1/ns1/tp holds origin r1/i1 seqs 1-10; hooks
// are on.
func (f *fake) TopicOrigins(_ context.Context, name tenancy.Name, q audit.Request) (*audit.Summary, error) {
	f.record("TopicOrigins " + name.String())
	if name.Topic != "tp" {
		return nil, Errorf(CodeTopicNotFound, "topic", "region r1 has no topic %s", name)
	}
	return &audit.Summary{Region: "r1", From: q.From, To: q.To, Span: q.Span, Scanned: 10, Origins: []audit.OriginSummary{{
		Origin: audit.Origin{Region: "r1", Incarnation: "i1"}, Held: []audit.Range{{From: 1, To: 10}},
		Spans: []audit.Span{{From: 1, To: q.Span, Count: 10, Sum: 42, LocalFirst: 1, LocalLast: 10}}}}}, nil
}

func (f *fake) TestHook(_ context.Context, name tenancy.Name, q TestHookRequest) (string, error) {
	f.record("TestHook " + name.String() + " " + q.Action)
	return q.Action + " done", nil
}

// TestAuditRoutes: the origins route parses its query (bad values are
// 400 invalid_field naming the parameter); the test hook route checks
// its body.
func TestAuditRoutes(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	const base = "/admin/v1/topics/t1/ns1/"
	const hooks = "/admin/v1/testhooks/topics/t1/ns1/"
	for _, c := range []struct {
		method, path, body string
		status             int
		code               Code
		field              string
	}{
		{http.MethodGet, base + "tp/origins", "", 200, "", ""},
		{http.MethodGet, base + "tp/origins?from=5&to=9&span=2&origin_region=r1&origin_incarnation=i1&local_from=3&local_to=8", "", 200, "", ""},
		{http.MethodGet, base + "tp/origins?from=x", "", 400, CodeInvalidField, "from"},
		{http.MethodGet, base + "tp/origins?span=-1", "", 400, CodeInvalidField, "span"},
		{http.MethodGet, base + "tp/origins?to=18446744073709551616", "", 400, CodeInvalidField, "to"},
		{http.MethodGet, base + "tp/origins?from=9&to=2", "", 400, CodeInvalidField, "span"},
		{http.MethodGet, base + "tp/origins?origin_region=r1", "", 400, CodeInvalidField, "origin_region"},
		{http.MethodGet, base + "tp/origins?local_from=zz", "", 400, CodeInvalidField, "local_from"},
		{http.MethodGet, base + "gone/origins", "", 404, CodeTopicNotFound, "topic"},
		{http.MethodPost, hooks + "tp", `{"action": "remove-message", "origin_region": "r1", "origin_seq": 3}`, 200, "", ""},
		{http.MethodPost, hooks + "tp", `{"action": "freeze-replicator", "remote": "r2"}`, 200, "", ""},
		{http.MethodPost, hooks + "tp", `{"action": "remove-message", "origin_region": "r1"}`, 400, CodeInvalidBody, "origin_seq"},
		{http.MethodPost, hooks + "tp", `{"action": "remove-message", "origin_seq": 3}`, 400, CodeInvalidBody, "origin_region"},
		{http.MethodPost, hooks + "tp", `{"action": "thaw-replicator"}`, 400, CodeInvalidBody, "remote"},
		{http.MethodPost, hooks + "tp", `{"action": "boom"}`, 400, CodeInvalidBody, "action"},
		{http.MethodPost, hooks + "tp", `{"action": "freeze-replicator", "remote": "r2", "x": 1}`, 400, CodeInvalidBody, "x"},
		{http.MethodPost, hooks + "tp", `{"action": "remove-message", "origin_region": "r1", "origin_seq": -3}`, 400, CodeInvalidBody, "origin_seq"},
		{http.MethodPost, hooks + "tp", ``, 400, CodeInvalidBody, ""},
	} {
		what := c.method + " " + c.path + " " + c.body
		w := serve(t, routes, nil, c.method, c.path, "", c.body)
		e := checkShape(t, what, w)
		if w.Code != c.status {
			t.Errorf("%s: %d %s, want %d", what, w.Code, w.Body, c.status)
			continue
		}
		if c.code != "" && (e == nil || e.Code != c.code || e.Field != c.field) {
			t.Errorf("%s: %s, want %s naming %q", what, w.Body, c.code, c.field)
		}
	}
	w := serve(t, routes, nil, http.MethodGet, base+"tp/origins?span=16", "", "")
	var a OriginsAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || a.Topic != "t1/ns1/tp" || a.Summary == nil || a.Summary.Span != 16 || len(a.Summary.Origins) != 1 {
		t.Fatalf("origins answer: %d %s", w.Code, w.Body)
	}
}

func FuzzParseOriginsQuery(f *testing.F) {
	f.Add("from=1&to=10&span=2")
	f.Add("origin_region=r1&origin_incarnation=i&local_from=1&local_to=0")
	f.Add("span=0&to=18446744073709551615")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, e := ParseOriginsQuery(v)
		if e != nil {
			if e.Code != CodeInvalidField || e.Field == "" {
				t.Fatalf("%q: error %+v without a field", raw, e)
			}
			return
		}
		if q.From == 0 || q.Span == 0 || q.To < q.From {
			t.Fatalf("%q: accepted an invalid request %+v", raw, q)
		}
	})
}

func FuzzTestHookBody(f *testing.F) {
	f.Add(`{"action": "remove-message", "origin_region": "r1", "origin_seq": 3}`)
	f.Add(`{"action": "freeze-replicator", "remote": "r2"}`)
	f.Add(`{"action": 1}`)
	f.Fuzz(func(t *testing.T, body string) {
		var q TestHookRequest
		if e := decode(strings.NewReader(body), &q, false); e != nil {
			if e.Code != CodeInvalidBody && e.Code != CodeBodyTooLarge {
				t.Fatalf("%q: code %s", body, e.Code)
			}
			return
		}
		if q.validate() != nil {
			t.Fatalf("%q: decoded a request its own check refuses", body)
		}
	})
}
