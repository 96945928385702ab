package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/tenancy"
)

// Test hooks of the audit (issue 26): only when Config.TestHooks (the
// node's STRATA_TEST_HOOKS=1), at the topic's owner, in memory only
// (gone when the topic moves or the broker restarts). They make the
// faults `strata audit` must find; nothing in the data path looks at
// them except one map lookup in mledger's Read and one flag per sent
// batch.

// ErrTestHooksOff: a test hook was asked for on a node without
// STRATA_TEST_HOOKS=1.
var ErrTestHooksOff = errors.New("jetstream: test hooks are off (start the node with STRATA_TEST_HOOKS=1)")

// ErrBadHook: a test hook request is malformed or names nothing here.
var ErrBadHook = errors.New("jetstream: bad test hook request")

// The test hooks' actions.
const (
	// HookRemoveMessage makes the message of origin (OriginRegion,
	// OriginSeq) read as gone in this region's copy only; nothing
	// replicates the removal.
	HookRemoveMessage = "remove-message"
	// HookFreezeReplicator makes the replicator cursor towards Remote
	// drop its sends and report no lag (the stalled-replication bug that
	// issue 26 cites); HookThawReplicator undoes it.
	HookFreezeReplicator = "freeze-replicator"
	HookThawReplicator   = "thaw-replicator"
)

// TestHookRequest is one test hook on one topic.
type TestHookRequest struct {
	Action       string `json:"action"`
	OriginRegion string `json:"origin_region,omitempty"`
	OriginSeq    uint64 `json:"origin_seq,omitempty"`
	Remote       string `json:"remote,omitempty"`
}

// Validate checks the request's fields for its action. Errors:
// ErrBadHook naming the field.
func (q *TestHookRequest) Validate() error {
	switch q.Action {
	case HookRemoveMessage:
		if q.OriginRegion == "" || q.OriginSeq == 0 {
			return fmt.Errorf("%w: %s needs origin_region and origin_seq (from 1)", ErrBadHook, q.Action)
		}
	case HookFreezeReplicator, HookThawReplicator:
		if q.Remote == "" {
			return fmt.Errorf("%w: %s needs remote (a region)", ErrBadHook, q.Action)
		}
	default:
		return fmt.Errorf("%w: action %q: want %s, %s or %s", ErrBadHook, q.Action, HookRemoveMessage, HookFreezeReplicator, HookThawReplicator)
	}
	return nil
}

// TestHookResult says what a hook did.
type TestHookResult struct {
	Done string `json:"done"`
	// Seq is the local sequence a removed message had.
	Seq uint64 `json:"seq,omitempty"`
}

// hookAdminPrefix is the internal request for a test hook at a topic's
// owner: $STRATA.ADMIN.HOOK.<tenant>.<namespace>.<topic>, body a
// TestHookRequest.
const hookAdminPrefix = "$STRATA.ADMIN.HOOK."

type hookReply struct {
	Result *TestHookResult `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Off    bool            `json:"off,omitempty"`
	Bad    bool            `json:"bad,omitempty"`
}

// TestHook applies a test hook at topic n's owner. Errors:
// ErrTestHooksOff (here or at the owner), ErrBadHook, ErrTopicNotFound,
// ctx's when no owner answers.
func (s *Service) TestHook(ctx context.Context, n tenancy.Name, q TestHookRequest) (*TestHookResult, error) {
	if !s.cfg.TestHooks {
		return nil, ErrTestHooksOff
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if s.reg.topic(n) == nil {
		return nil, ErrTopicNotFound
	}
	body, _ := json.Marshal(q)
	var rep hookReply
	if err := s.request(ctx, hookAdminPrefix+n.Tenant+"."+n.Namespace+"."+n.Topic, body, &rep); err != nil {
		return nil, err
	}
	switch {
	case rep.Off:
		return nil, ErrTestHooksOff
	case rep.Bad:
		return nil, fmt.Errorf("%w: %s", ErrBadHook, rep.Error)
	case rep.Error != "":
		return nil, errors.New(rep.Error)
	}
	return rep.Result, nil
}

func (s *Service) dispatchHookAdmin(m message) {
	n, err := tenancy.ParseName(strings.ReplaceAll(strings.TrimPrefix(m.subject, hookAdminPrefix), ".", "/"))
	if err != nil || s.reg.topic(n) == nil {
		return
	}
	reply := func(r hookReply) {
		b, _ := json.Marshal(r)
		s.respond(m.reply, b)
	}
	if !s.cfg.TestHooks {
		reply(hookReply{Off: true})
		return
	}
	var q TestHookRequest
	if err := json.Unmarshal(m.data, &q); err != nil {
		reply(hookReply{Error: err.Error(), Bad: true})
		return
	}
	if err := q.Validate(); err != nil {
		reply(hookReply{Error: err.Error(), Bad: true})
		return
	}
	s.toOwner(n, m, func(t *topic) {
		s.goAPI(func() {
			res, err := t.testHook(q)
			if err != nil {
				reply(hookReply{Error: err.Error(), Bad: errors.Is(err, ErrBadHook)})
				return
			}
			reply(hookReply{Result: res})
		})
	})
}

// testHook applies q at the owner.
func (t *topic) testHook(q TestHookRequest) (*TestHookResult, error) {
	switch q.Action {
	case HookFreezeReplicator, HookThawReplicator:
		for _, r := range t.replSenders() {
			if r.remote == q.Remote {
				r.frozen.Store(q.Action == HookFreezeReplicator)
				t.s.cfg.Logger.Warn("test hook", "action", q.Action, "topic", t.name.String(), "cursor", ReplCursorName(q.Remote))
				return &TestHookResult{Done: q.Action + " " + ReplCursorName(q.Remote)}, nil
			}
		}
		return nil, fmt.Errorf("%w: topic %s has no replicator cursor towards %s here", ErrBadHook, t.name, q.Remote)
	}
	ctx, cancel := context.WithTimeout(t.s.ctx, originsTimeout)
	defer cancel()
	st := t.ml.State()
	for seq := st.FirstSeq; seq <= st.LastSeq && seq != 0; seq++ {
		msg, err := t.ml.Read(ctx, seq)
		if errors.Is(err, mledger.ErrGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if msg.Origin.Region == q.OriginRegion && msg.Origin.Seq == q.OriginSeq {
			if err := t.ml.HideForTest(seq); err != nil {
				return nil, err
			}
			t.s.cfg.Logger.Warn("test hook: message removed from this region's copy", "topic", t.name.String(),
				"seq", seq, "origin", q.OriginRegion, "origin_seq", q.OriginSeq)
			return &TestHookResult{Done: fmt.Sprintf("removed seq %d (origin %s seq %d)", seq, q.OriginRegion, q.OriginSeq), Seq: seq}, nil
		}
	}
	return nil, fmt.Errorf("%w: topic %s holds no message of origin %s seq %d here", ErrBadHook, t.name, q.OriginRegion, q.OriginSeq)
}
