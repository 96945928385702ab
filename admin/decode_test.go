package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

// bodyRoute is a route with a request body and how to tell that its
// backend got the request.
type bodyRoute struct {
	method, path string
	call         string // the fake's call the route makes once the body is accepted
	emptyOK      bool
	valid        string // a valid body
	unknown      string // a body with an unknown field "bogus"
	wrongType    string // a body whose field typeField has the wrong type
	typeField    string
	big          func(n int) string // a valid body of at least n bytes
}

var bodyRoutes = []bodyRoute{
	{
		method: http.MethodPut, path: "/admin/v1/bookie/read-only", call: "SetReadOnly",
		valid: `{"read_only": true}`, unknown: `{"read_only": true, "bogus": 1}`,
		wrongType: `{"read_only": "yes"}`, typeField: "read_only",
		big: func(n int) string { return `{"read_only": true, "bookie": "` + strings.Repeat("k", n) + `"}` },
	},
	{
		method: http.MethodPost, path: "/admin/v1/topics/t1/ns1/tp/offload", call: "Offload", emptyOK: true,
		valid: `{"keep_bytes": 1048576}`, unknown: `{"keep_bytes": 1, "bogus": 2}`,
		wrongType: `{"keep_bytes": "1MiB"}`, typeField: "keep_bytes",
		big: func(n int) string { return `{"keep_bytes": 1` + strings.Repeat(" ", n) + `}` },
	},
	{
		method: http.MethodPut, path: "/admin/v1/topics/t1/ns1/tp/subscriptions/s1", call: "PutSubscription", emptyOK: true,
		valid: `{"replicated": true, "filter_subject": "t1.ns1.tp"}`, unknown: `{"bogus": {"seq": 1}}`,
		wrongType: `{"replicated": "yes"}`, typeField: "replicated",
		big: func(n int) string { return `{"filter_subject": "` + strings.Repeat("a", n) + `"}` },
	},
	{
		method: http.MethodPost, path: "/admin/v1/bundles/t1/ns1/0x00000000_0xffffffff/unload", call: "Unload", emptyOK: true,
		valid: `{"to": "b2"}`, unknown: `{"to": "b2", "bogus": true}`,
		wrongType: `{"to": 2}`, typeField: "to",
		big: func(n int) string { return `{"to": "` + strings.Repeat("b", n) + `"}` },
	},
	{
		method: http.MethodPut, path: "/admin/v1/tenants/t1", call: "PutTenant", emptyOK: true,
		valid:     `{"admins": ["al"], "quotas": {"topics": 10, "publish_rate": 100, "regions": {"r1": {"publish_rate": 60}}}}`,
		unknown:   `{"quotas": {"topics": 1, "regions": {"r1": {"bogus": 2}}}}`,
		wrongType: `{"quotas": {"topics": "ten"}}`, typeField: "quotas.topics",
		big: func(n int) string { return `{"admins": ["al"]` + strings.Repeat(" ", n) + `}` },
	},
	{
		method: http.MethodPut, path: "/admin/v1/namespaces/t1/ns1", call: "PutNamespace", emptyOK: true,
		valid: `{"policies": {"bundles": 8}}`, unknown: `{"policies": {"bundles": 8}, "bogus": 1}`,
		wrongType: `{"policies": 5}`, typeField: "policies",
		big: func(n int) string { return `{"policies": {"replication": ["` + strings.Repeat("r", n) + `"]}}` },
	},
	{
		method: http.MethodPost, path: "/admin/v1/tenants/t1/users", call: "AddUser",
		valid:     `{"name": "u2", "pub": {"allow": ["t1.>"], "deny": ["t1.x"]}, "sub": {"allow": ["t1.>", "_INBOX.>"]}, "expiry": "720h"}`,
		unknown:   `{"name": "u2", "pub": {"allow": [], "bogus": []}}`,
		wrongType: `{"name": "u2", "expiry": 720}`, typeField: "expiry",
		big: func(n int) string { return `{"name": "u2"` + strings.Repeat(" ", n) + `}` },
	},
	{
		method: http.MethodPost, path: "/admin/v1/tokens", call: "CreateToken", emptyOK: true,
		valid: `{"tenant": "t1", "description": "ci"}`, unknown: `{"tenant": "t1", "bogus": "admin"}`,
		wrongType: `{"tenant": 5}`, typeField: "tenant",
		big: func(n int) string { return `{"tenant": "t1"` + strings.Repeat(" ", n) + `}` },
	},
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// endless repeats b forever.
type endless struct{ b []byte }

func (e endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], e.b)
	}
	return n, nil
}

// do sends body (with Content-Length unknown unless length ≥ 0) to
// route and returns the answer and the calls the fake saw.
func (br bodyRoute) do(t *testing.T, body io.Reader, length int64) (*httptest.ResponseRecorder, []string) {
	t.Helper()
	f, mux := fakeMux()
	req := httptest.NewRequest(br.method, br.path, body)
	req.ContentLength = length
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	checkShape(t, br.path, w)
	return w, f.calls
}

func (br bodyRoute) send(t *testing.T, body string) (*httptest.ResponseRecorder, *Error, bool) {
	t.Helper()
	w, calls := br.do(t, strings.NewReader(body), -1)
	var eb ErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &eb)
	called := len(calls) > 0 && calls[0] == br.call
	if w.Code >= 400 && called {
		t.Errorf("%s %s: the backend was called for a refused body", br.method, br.path)
	}
	return w, &eb.Error, called
}

// TestBodyDecoders: every route with a body refuses malformed bodies with
// 400 naming the field, over-limit bodies with 413 before reading them
// whole, and accepts valid ones of any size under the limit.
func TestBodyDecoders(t *testing.T) {
	for _, br := range bodyRoutes {
		t.Run(br.path, func(t *testing.T) {
			if w, _, called := br.send(t, br.valid); w.Code >= 300 || !called {
				t.Errorf("valid body %s: %d %s", br.valid, w.Code, w.Body)
			}
			// Whitespace around the value is fine.
			if w, _, called := br.send(t, "\n\t "+br.valid+strings.Repeat(" ", 70<<10)+"\r\n"); w.Code >= 300 || !called {
				t.Errorf("valid body in whitespace: %d %s", w.Code, w.Body)
			}
			// A valid body over 64 KiB (the old silent cut) is accepted.
			if w, _, called := br.send(t, br.big(100<<10)); w.Code >= 300 || !called {
				t.Errorf("valid 100 KiB body: %d %.300s", w.Code, w.Body)
			}
			if w, e, _ := br.send(t, ""); br.emptyOK != (w.Code < 300) || (!br.emptyOK && e.Code != CodeInvalidBody) {
				t.Errorf("empty body: %d %s (empty allowed: %v)", w.Code, w.Body, br.emptyOK)
			}
			for _, c := range []struct{ name, body, field string }{
				{"garbage after 64 KiB of spaces", br.valid + strings.Repeat(" ", 1<<16) + "x", ""},
				{"a second value", br.valid + " {}", ""},
				{"a closing brace after", br.valid + "}", ""},
				{"not JSON", "{", ""},
				{"cut short", br.valid[:len(br.valid)-1], ""},
				{"an array", "[]", ""},
				{"a string", `"x"`, ""},
				{"garbage after 64 KiB of spaces, first", strings.Repeat(" ", 1<<16) + "x", ""},
				{"an unknown field", br.unknown, "bogus"},
				{"a wrong type", br.wrongType, br.typeField},
			} {
				w, e, _ := br.send(t, c.body)
				if w.Code != 400 || e.Code != CodeInvalidBody || e.Field != c.field {
					t.Errorf("%s: %d %s; want 400 invalid_body naming field %q", c.name, w.Code, w.Body, c.field)
				}
			}
			// Over the limit: refused once MaxBodyBytes are read, whatever
			// follows (an endless body of spaces, or of a string).
			for _, fill := range []string{" ", "a"} {
				prefix := ""
				if fill == "a" {
					prefix = `{"x": "`
				}
				cr := &countingReader{r: io.MultiReader(strings.NewReader(prefix), endless{[]byte(fill)})}
				w, _ := br.do(t, cr, -1)
				var eb ErrorBody
				_ = json.Unmarshal(w.Body.Bytes(), &eb)
				if w.Code != 413 || eb.Error.Code != CodeBodyTooLarge || !strings.Contains(eb.Error.Message, "1048576") {
					t.Errorf("endless %q body: %d %s, want 413 body_too_large naming the limit", fill, w.Code, w.Body)
				}
				if cr.n > MaxBodyBytes+1 {
					t.Errorf("endless %q body: %d bytes read, more than MaxBodyBytes+1", fill, cr.n)
				}
			}
			// A Content-Length over the limit is refused unread.
			cr := &countingReader{r: strings.NewReader(br.big(MaxBodyBytes))}
			if w, _ := br.do(t, cr, MaxBodyBytes+100); w.Code != 413 || cr.n != 0 {
				t.Errorf("Content-Length over the limit: %d, %d bytes read; want 413 and none", w.Code, cr.n)
			}
			// Exactly at the limit is fine.
			body := br.big(MaxBodyBytes - len(br.big(0)))
			if len(body) != MaxBodyBytes {
				t.Fatalf("test body %d bytes", len(body))
			}
			if w, _, called := br.send(t, body); w.Code >= 300 || !called {
				t.Errorf("body of exactly MaxBodyBytes: %d %.200s", w.Code, w.Body)
			}
			if w, e, _ := br.send(t, body+" "); w.Code != 413 || e.Code != CodeBodyTooLarge {
				t.Errorf("body of MaxBodyBytes+1: %d %.200s", w.Code, w.Body)
			}
		})
	}
}

// TestRequestChecks: the checks a body's type makes after decoding.
func TestRequestChecks(t *testing.T) {
	for _, c := range []struct {
		body  string
		v     any
		field string
	}{
		{`{}`, &ReadOnlyRequest{}, "read_only"},
		{`{"read_only": null}`, &ReadOnlyRequest{}, "read_only"},
		{`{"keep_bytes": -1}`, &OffloadRequest{}, "keep_bytes"},
		{`{"keep_bytes": 1.5}`, &OffloadRequest{}, "keep_bytes"},
		{`{"keep_bytes": 1e30}`, &OffloadRequest{}, "keep_bytes"},
		{`{"read_only": true, "read_only": []}`, &ReadOnlyRequest{}, "read_only"},
		{`{}`, &UserRequest{}, "name"},
		{`{"name": "a.b"}`, &UserRequest{}, "name"},
		{`{"name": "u", "expiry": "-5s"}`, &UserRequest{}, "expiry"},
		{`{"name": "u", "expiry": "5 parsecs"}`, &UserRequest{}, "expiry"},
		{`{"name": "u", "pub": {"allow": ["t1.>.x"]}}`, &UserRequest{}, "pub.allow[0]"},
		{`{"name": "u", "sub": {"deny": ["ok", "t1..x"]}}`, &UserRequest{}, "sub.deny[1]"},
		{`{"name": "u", "pub": {"allow": "t1.>"}}`, &UserRequest{}, "pub.allow"},
		{`{"name": "u", "Pub": {}}`, &UserRequest{}, "Pub"},
		{`{"name": "u", "pub": null, "sub": {"allow": [""]}}`, &UserRequest{}, "sub.allow[0]"},
	} {
		e := decode(strings.NewReader(c.body), c.v, true)
		if e == nil || e.Code != CodeInvalidBody || e.Field != c.field || e.Status() != 400 {
			t.Errorf("%s: %v, want invalid_body naming %q", c.body, e, c.field)
		}
	}
	var q OffloadRequest
	if e := decode(strings.NewReader(`{"keep_bytes": 0}`), &q, true); e != nil || q.KeepBytes == nil || *q.KeepBytes != 0 {
		t.Errorf("keep_bytes 0: %v %+v", e, q)
	}
}

// TestPathParams: malformed path parameters are 400 naming the
// parameter, before any backend is asked.
func TestPathParams(t *testing.T) {
	f, mux := fakeMux()
	for _, c := range []struct {
		method, path, field string
		code                Code
	}{
		{"GET", "/admin/v1/topics/t.1", "t", CodeInvalidField},
		{"GET", "/admin/v1/topics/t1/n%20s", "ns", CodeInvalidField},
		{"GET", "/admin/v1/topics/t1/ns1/a*b/stats", "topic", CodeInvalidField},
		{"GET", "/admin/v1/topics/%C3%A9/ns1/tp", "t", CodeInvalidField},
		{"GET", "/admin/v1/topics/t1/ns1/tp/subscriptions/s.1", "sub", CodeInvalidSubscription},
		{"PUT", "/admin/v1/topics/t1/ns1/tp/subscriptions/s%3E", "sub", CodeInvalidSubscription},
		{"DELETE", "/admin/v1/topics/t1/ns%2A/tp/subscriptions/s1", "ns", CodeInvalidField},
		{"POST", "/admin/v1/topics/t1/ns1/t%3Ep/offload", "topic", CodeInvalidField},
		{"GET", "/admin/v1/topics/t1/ns1/t%3Ep/offload", "topic", CodeInvalidField},
		{"GET", "/admin/v1/bundles/t%3E", "t", CodeInvalidField},
		{"GET", "/admin/v1/bundles/t1/n%3E", "ns", CodeInvalidField},
		{"POST", "/admin/v1/bundles/t1/ns1/0x1_0x2/unload", "range", CodeInvalidBundle},
		{"POST", "/admin/v1/bundles/t1/ns1/0x40000000_0x00000000/unload", "range", CodeInvalidBundle},
		{"POST", "/admin/v1/bundles/t%3E/ns1/0x00000000_0x40000000/unload", "t", CodeInvalidField},
		{"GET", "/admin/v1/operations/a.b", "id", CodeInvalidField},
		{"GET", "/admin/v1/operations/" + strings.Repeat("a", 65), "id", CodeInvalidField},
		{"GET", "/admin/v1/ledgers/01", "id", CodeBadLedgerID},
		{"GET", "/admin/v1/ledgers/+1", "id", CodeBadLedgerID},
		{"GET", "/admin/v1/ledgers/-1", "id", CodeBadLedgerID},
		{"GET", "/admin/v1/ledgers/99999999999999999999", "id", CodeBadLedgerID},
		{"GET", "/admin/v1/ledgers/x/entries", "id", CodeBadLedgerID},
		{"GET", "/admin/v1/ledgers/7/entries?from=x", "from", CodeBadFrom},
		{"GET", "/admin/v1/ledgers/7/entries?to=1.5", "to", CodeBadTo},
		{"GET", "/admin/v1/ledgers/7/entries?from=5&to=4", "from", CodeBadRange},
		{"GET", "/admin/v1/ledgers/7/entries?from=-1", "from", CodeBadRange},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		e := checkShape(t, c.path, w)
		if w.Code != 400 || e == nil || e.Code != c.code || e.Field != c.field {
			t.Errorf("%s %s: %d %s; want 400 %s naming %q", c.method, c.path, w.Code, w.Body, c.code, c.field)
		}
	}
	if len(f.calls) > 0 {
		t.Errorf("backends asked for bad paths: %v", f.calls)
	}
}

// FuzzDecodeRequests: any body, for any request type, either decodes to a
// value that passes the type's checks, from a body that is one JSON value
// in whitespace, or is refused with invalid_body (400) or body_too_large
// (413); never a panic. The request types are those of every route that
// takes a body.
func FuzzDecodeRequests(f *testing.F) {
	for _, br := range bodyRoutes {
		for i, b := range []string{br.valid, br.unknown, br.wrongType, br.valid + " x", "", "{"} {
			f.Add(uint8(i), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		var v any
		emptyOK := true
		switch kind % 8 {
		case 0:
			v, emptyOK = &ReadOnlyRequest{}, false
		case 1:
			v = &OffloadRequest{}
		case 2:
			v = &SubscriptionRequest{}
		case 3:
			v = &UnloadRequest{}
		case 4:
			v = &TenantRequest{}
		case 5:
			v = &NamespaceRequest{}
		case 6:
			v = &TokenRequest{}
		case 7:
			v, emptyOK = &UserRequest{}, false
		}
		e := decode(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), MaxBodyBytes), v, emptyOK)
		if e != nil {
			if (e.Code != CodeInvalidBody && e.Code != CodeBodyTooLarge) || e.Message == "" {
				t.Fatalf("refused with %+v", e)
			}
			if e.Code == CodeBodyTooLarge && len(body) <= MaxBodyBytes {
				t.Fatalf("a body of %d bytes refused as too large", len(body))
			}
			return
		}
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 {
			if !emptyOK {
				t.Fatal("empty body accepted")
			}
			return
		}
		if !json.Valid(trimmed) {
			t.Fatalf("accepted %q, which is not one JSON value", body)
		}
		switch q := v.(type) {
		case *ReadOnlyRequest:
			if q.ReadOnly == nil {
				t.Fatal("read_only missing but accepted")
			}
		case *OffloadRequest:
			if q.KeepBytes != nil && *q.KeepBytes < 0 {
				t.Fatalf("keep_bytes %d accepted", *q.KeepBytes)
			}
		case *UserRequest:
			u := tenancy.User{Tenant: "t", Name: q.Name, Pub: q.Pub, Sub: q.Sub}
			if q.Expiry < 0 || u.Validate() != nil {
				t.Fatalf("user request %+v accepted: %v", q, u.Validate())
			}
		}
		// What was accepted survives a round trip.
		again, _ := json.Marshal(v)
		v2 := newLike(v)
		if e := decode(bytes.NewReader(again), v2, emptyOK); e != nil {
			t.Fatalf("re-decoding %s: %v", again, e)
		}
	})
}

// newLike is a new zero value of v's request type.
func newLike(v any) any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }

// FuzzPathParams: the path-parameter checks accept exactly the canonical
// forms.
func FuzzPathParams(f *testing.F) {
	for _, s := range []string{"0", "7", "01", "+1", "-1", "t1", "a.b", "", "0x00000000_0xffffffff", "0x1_0x2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if id, e := ParseLedgerID(s); e == nil {
			if id < 0 || strings.TrimLeft(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
				t.Fatalf("ledger id %q accepted as %d", s, id)
			}
		} else if e.Field != "id" || e.Status() != 400 {
			t.Fatalf("ledger id %q: %+v", s, e)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.SetPathValue("t", s)
		r.SetPathValue("ns", "ns1")
		r.SetPathValue("range", s)
		if tok, e := Token(r, "t"); e == nil {
			if tok == "" || strings.ContainsAny(tok, "./*> \t") {
				t.Fatalf("token %q accepted", s)
			}
		} else if e.Field != "t" || e.Code != CodeInvalidField {
			t.Fatalf("token %q: %+v", s, e)
		}
		r.SetPathValue("t", "t1")
		if id, e := BundleID(r); e == nil {
			if id.Range.Lo >= id.Range.Hi || !strings.EqualFold(id.Range.String(), s) {
				t.Fatalf("range %q accepted as %v", s, id.Range)
			}
		} else if e.Field != "range" || e.Code != CodeInvalidBundle {
			t.Fatalf("range %q: %+v", s, e)
		}
	})
}

// TestExactKeys: encoding/json would take "Admins" for admins and a
// null body for an empty object; the decoder refuses both, naming the
// field.
func TestExactKeys(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"Admins": ["a"]}`, "Admins"},
		{`{"quotas": {"Topics": 1}}`, "quotas.Topics"},
		{`null`, ""},
	} {
		var req TenantRequest
		e := decode(strings.NewReader(c.body), &req, true)
		if e == nil || e.Code != CodeInvalidBody || e.Field != c.field {
			t.Errorf("%s: %+v, want invalid_body naming %q", c.body, e, c.field)
		}
	}
	var req TenantRequest
	if e := decode(strings.NewReader(`{"admins": ["a"], "quotas": {"topics": 1}}`), &req, true); e != nil || req.Quotas.Topics != 1 {
		t.Errorf("a valid body: %+v %+v", e, req)
	}
}

// fakeMux is the admin routes over a fake backend, without auth.
func fakeMux() (*fake, *http.ServeMux) {
	f := &fake{}
	mux := http.NewServeMux()
	Mount(mux, Routes(f.backends()), nil)
	return f, mux
}
