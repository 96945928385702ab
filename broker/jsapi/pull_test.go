package jsapi

import (
	"errors"
	"testing"
	"time"
)

func TestParsePullRequest(t *testing.T) {
	for _, tc := range []struct {
		body string
		want PullRequest
	}{
		{"", PullRequest{Batch: 1}},
		{"  ", PullRequest{Batch: 1}},
		{"10", PullRequest{Batch: 10}},
		{"junk", PullRequest{Batch: 1}}, // the reference's fallback
		// What nats.go sends (spec §2.5, [seen]).
		{`{"expires":30000000000,"batch":7,"idle_heartbeat":5000000000}`, PullRequest{Batch: 7, Expires: 30 * time.Second, IdleHeartbeat: 5 * time.Second}},
		{`{"batch":3,"no_wait":true}`, PullRequest{Batch: 3, NoWait: true}},
		{`{"expires":30000000000,"batch":1000000,"max_bytes":4096}`, PullRequest{Batch: 1000000, Expires: 30 * time.Second, MaxBytes: 4096}},
		{`{"expires":30000000000,"batch":500,"idle_heartbeat":15000000000}`, PullRequest{Batch: 500, Expires: 30 * time.Second, IdleHeartbeat: 15 * time.Second}},
		{`{"batch":1,"group":"g","id":"pin","min_pending":5,"min_ack_pending":2,"priority":9,"unknown":1}`,
			PullRequest{Batch: 1, Group: "g", ID: "pin", MinPending: 5, MinAckPending: 2, Priority: 9}},
	} {
		got, err := ParsePullRequest([]byte(tc.body))
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v %v, want %+v", tc.body, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ body, detail string }{
		{`{"batch":`, "unexpected end of JSON input"},
		{`{"batch":-1}`, "batch must not be negative"},
		{`{"expires":-1}`, "negative value"},
		{`{"expires":1000,"idle_heartbeat":501}`, "heartbeat value too large"},
		{`{"idle_heartbeat":1}`, "heartbeat value too large"},
		{`{"priority":10}`, "Priority must be between 0 and 9"},
	} {
		_, err := ParsePullRequest([]byte(tc.body))
		var bad *BadPullRequestError
		if !errors.As(err, &bad) || bad.Detail != tc.detail {
			t.Errorf("%q: %v", tc.body, err)
			continue
		}
		if d := DescBadRequest(bad.Detail); d != "Bad Request - "+tc.detail {
			t.Errorf("desc %q", d)
		}
	}
	if _, err := ParsePullRequest([]byte(`{"expires":1000,"idle_heartbeat":500}`)); err != nil {
		t.Errorf("heartbeat = expires/2 is allowed: %v", err)
	}
}

func TestRequiredAPILevel(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "0": true, "3": true, "4": false, "x": false} {
		if RequiredAPILevelOK(v) != ok {
			t.Errorf("%q", v)
		}
	}
}
