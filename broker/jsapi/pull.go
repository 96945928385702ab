package jsapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// PullRequest is the body of CONSUMER.MSG.NEXT (and of "+NXT" acks),
// spec §2.5.
type PullRequest struct {
	// Batch is the number of messages wanted (default 1).
	Batch int `json:"batch,omitempty"`
	// Expires ends the request after this long; 0 = never.
	Expires time.Duration `json:"expires,omitempty"`
	// NoWait asks for 404 instead of waiting when nothing is there.
	NoWait bool `json:"no_wait,omitempty"`
	// MaxBytes caps the bytes delivered for this request; 0 = none.
	MaxBytes int `json:"max_bytes,omitempty"`
	// IdleHeartbeat: send "100 Idle Heartbeat" after this much silence.
	// More than Expires/2 is a 400.
	IdleHeartbeat time.Duration `json:"idle_heartbeat,omitempty"`
	// Priority-group fields.
	Group         string `json:"group,omitempty"`
	ID            string `json:"id,omitempty"` // pin id
	MinPending    int64  `json:"min_pending,omitempty"`
	MinAckPending int64  `json:"min_ack_pending,omitempty"`
	Priority      int    `json:"priority,omitempty"` // 0–9, lowest first
}

// BadPullRequestError is a pull request ParsePullRequest rejects. The
// broker answers it with the status DescBadRequest(e.Detail), i.e.
// "400 Bad Request - <detail>", as the reference does.
type BadPullRequestError struct{ Detail string }

func (e *BadPullRequestError) Error() string { return "jsapi: bad pull request: " + e.Detail }

func badPull(format string, args ...any) error {
	return &BadPullRequestError{Detail: fmt.Sprintf(format, args...)}
}

// ParsePullRequest decodes a pull request body as the reference does: empty
// means batch 1; a body starting with '{' is JSON (unknown fields ignored);
// anything else is a batch size, and a batch that does not parse means 1.
// Batch 0 becomes 1. It rejects bad JSON, negative values, an
// idle_heartbeat above expires/2 (so a heartbeat needs an expiry) and a
// priority outside 0–9. Limits that depend on the consumer (max_batch,
// max_expires, max_bytes, max_waiting, priority groups) are the broker's.
func ParsePullRequest(body []byte) (PullRequest, error) {
	var r PullRequest
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
	case body[0] == '{':
		if err := json.Unmarshal(body, &r); err != nil {
			return PullRequest{}, badPull("%v", err)
		}
	default:
		if n, err := strconv.Atoi(string(body)); err == nil {
			r.Batch = n
		}
	}
	if r.Batch == 0 {
		r.Batch = 1
	}
	switch {
	case r.Batch < 0:
		return PullRequest{}, badPull("batch must not be negative")
	case r.Expires < 0, r.MaxBytes < 0, r.IdleHeartbeat < 0, r.MinPending < 0, r.MinAckPending < 0:
		return PullRequest{}, badPull("negative value")
	case r.IdleHeartbeat > 0 && r.IdleHeartbeat > r.Expires/2:
		return PullRequest{}, badPull("heartbeat value too large")
	case r.Priority < 0 || r.Priority > 9:
		return PullRequest{}, badPull("Priority must be between 0 and 9")
	}
	return r, nil
}
