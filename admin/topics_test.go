package admin

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestTopicWrites: PUT and DELETE of a topic, and a subscription PUT
// with reset_to: bad input is 400 naming the field or parameter, a
// non-empty topic is 409 not_empty without force, unknown objects 404.
func TestTopicWrites(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	const base = "/admin/v1/topics/t1/ns1/"
	for _, c := range []struct {
		method, path, body string
		status             int
		code               Code
		field              string
	}{
		{http.MethodPut, base + "new", "", 201, "", ""},
		{http.MethodPut, base + "new", `{"partitions": 0}`, 201, "", ""},
		{http.MethodPut, base + "tp", "", 200, "", ""},
		{http.MethodPut, base + "new", `{"partitions": 4}`, 400, CodeInvalidBody, "partitions"},
		{http.MethodPut, base + "new", `{"partitions": -1}`, 400, CodeInvalidBody, "partitions"},
		{http.MethodPut, base + "new", `{"partitions": "4"}`, 400, CodeInvalidBody, "partitions"},
		{http.MethodPut, base + "new", `{"shards": 4}`, 400, CodeInvalidBody, "shards"},
		{http.MethodPut, base + "bad.name", "", 400, CodeInvalidField, "topic"},
		{http.MethodPut, "/admin/v1/topics/t1/nons/new", "", 404, CodeNamespaceNotFound, "ns"},

		{http.MethodDelete, base + "empty", "", 200, "", ""},
		{http.MethodDelete, base + "tp", "", 409, CodeNotEmpty, "force"},
		{http.MethodDelete, base + "msgs", "", 409, CodeNotEmpty, "force"},
		{http.MethodDelete, base + "msgs?force=false", "", 409, CodeNotEmpty, "force"},
		{http.MethodDelete, base + "tp?force=true", "", 200, "", ""},
		{http.MethodDelete, base + "tp?force=yes", "", 400, CodeInvalidField, "force"},
		{http.MethodDelete, base + "gone", "", 404, CodeTopicNotFound, "topic"},
		{http.MethodDelete, base + "gone?force=true", "", 404, CodeTopicNotFound, "topic"},
		{http.MethodDelete, "/admin/v1/topics/t1/n$/tp", "", 400, CodeInvalidField, "ns"},

		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {"seq": 3}}`, 200, "", ""},
		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {"time": "2025-01-02T15:04:05Z"}, "replicated": true}`, 200, "", ""},
		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {}}`, 400, CodeInvalidBody, "reset_to"},
		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {"seq": 3, "time": "2025-01-02T15:04:05Z"}}`, 400, CodeInvalidBody, "reset_to"},
		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {"seq": 0}}`, 400, CodeInvalidBody, "reset_to.seq"},
		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {"seq": -1}}`, 400, CodeInvalidBody, "reset_to.seq"},
		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {"time": "yesterday"}}`, 400, CodeInvalidBody, "reset_to.time"},
		{http.MethodPut, base + "tp/subscriptions/s1", `{"reset_to": {"offset": 3}}`, 400, CodeInvalidBody, "offset"},
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

	// What the answers carry, and what reached the backend.
	w := serve(t, routes, nil, http.MethodPut, base+"new", "", "")
	var tc TopicCreated
	if err := json.Unmarshal(w.Body.Bytes(), &tc); err != nil || !tc.Created || tc.Region != "r1" || tc.Topic == nil || tc.Topic.Topic != "new" {
		t.Errorf("PUT new topic: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodDelete, base+"tp?force=true", "", "")
	var td TopicDeleted
	if err := json.Unmarshal(w.Body.Bytes(), &td); err != nil || !td.Deleted || !td.Forced || td.Topic != "t1/ns1/tp" || !slices.Equal(td.Subscriptions, []string{"s1"}) {
		t.Errorf("DELETE tp forced: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodDelete, base+"tp", "", "")
	if e := checkShape(t, "DELETE tp", w); e == nil || !containsAll(e.Message, "1 subscriptions (s1)", "force=true") {
		t.Errorf("DELETE tp: %s: the message should say what it holds", w.Body)
	}
	deletes := 0
	for _, c := range f.calls {
		if c == "DeleteTopic t1/ns1/tp" || c == "DeleteTopic t1/ns1/empty" {
			deletes++
		}
	}
	if deletes != 3 { // empty, tp?force=true twice
		t.Errorf("DeleteTopic called %d times, want 3 (refused deletes must not reach the backend): %v", deletes, f.calls)
	}
	serve(t, routes, nil, http.MethodPut, base+"tp/subscriptions/s1", "", `{"reset_to": {"seq": 3}}`)
	if rt := f.lastSub.ResetTo; rt == nil || rt.Seq == nil || *rt.Seq != 3 {
		t.Errorf("reset_to seq 3 reached the backend as %+v", f.lastSub)
	}
	serve(t, routes, nil, http.MethodPut, base+"tp/subscriptions/s1", "", `{"reset_to": {"time": "2025-01-02T15:04:05Z"}}`)
	if rt := f.lastSub.ResetTo; rt == nil || rt.Seq != nil || rt.At().IsZero() || rt.At().Year() != 2025 {
		t.Errorf("reset_to time reached the backend as %+v", f.lastSub)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
