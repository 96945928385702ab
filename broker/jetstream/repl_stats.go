package jetstream

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// ReplicationStats is one replicator cursor of a topic (a topic's
// owner's view; ARCHITECTURE §4 "Lag"): its remote, health and lag.
type ReplicationStats struct {
	Topic  string `json:"topic"`  // tenant/namespace/topic
	Remote string `json:"remote"` // the region replicated to
	Cursor string `json:"cursor"` // __repl.<remote>
	// State is replicating, backing-off or stalled (a backlog and no
	// progress for the stall time; it keeps retrying).
	State string `json:"state"`
	// Position is the last local origin sequence the remote acknowledged
	// as stored; LastOriginSeq the last one published here.
	Position      uint64 `json:"position"`
	LastOriginSeq uint64 `json:"last_origin_seq"`
	// Lag: messages (LastOriginSeq - Position, read now), their stored
	// bytes (an estimate) and the age of the oldest, in seconds.
	LagMsgs    uint64  `json:"lag_msgs"`
	LagBytes   uint64  `json:"lag_bytes"`
	LagSeconds float64 `json:"lag_seconds"`
	InFlight   uint64  `json:"in_flight"`
	// LastSuccess is when the remote last acknowledged a batch.
	LastSuccess time.Time `json:"last_success,omitzero"`
	RetryAt     time.Time `json:"retry_at,omitzero"`
	Failures    int       `json:"failures,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	// Counters over the cursor's current life.
	Batches    uint64 `json:"batches"`
	Sent       uint64 `json:"sent"`
	Resent     uint64 `json:"resent,omitempty"`
	GapRecords uint64 `json:"gap_records,omitempty"`
	Timeouts   uint64 `json:"timeouts,omitempty"`
}

// OriginStats is one origin stream replicated into a topic: its
// high-water mark here and the messages gap records skipped (lost:
// trimmed at the origin before they were replicated).
type OriginStats struct {
	Region      string `json:"region"`
	Incarnation string `json:"incarnation"`
	HWM         uint64 `json:"hwm"`
	Lost        uint64 `json:"lost,omitempty"`
}

// TopicReplication is a topic's replication as its owner reports it.
type TopicReplication struct {
	Incarnation   string             `json:"incarnation"`
	LastOriginSeq uint64             `json:"last_origin_seq"`
	Cursors       []ReplicationStats `json:"cursors"`
	Origins       []OriginStats      `json:"origins"`
	OriginsLost   uint64             `json:"origins_lost"`
}

// ownerState is the owner's answer to a replication-state request: the
// replication state and its last attempt to apply the namespace's
// policies.
type ownerState struct {
	TopicReplication
	Policy PolicyStatus `json:"policy"`
}

// PolicyStatus is a topic's last attempt, at its owner, to apply its
// namespace's policies: Error is the step that keeps failing ("" once
// they are applied), Failures how many rounds in a row it failed
// (retried with a backoff doubling from 2 s to 1 min), Since the first.
type PolicyStatus struct {
	Error    string    `json:"error,omitempty"`
	Failures int       `json:"failures,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

// stats is the cursor's state now. The lag is read now, all of it at
// one moment (issue 26 item 7): messages are the managed ledger's last
// local origin sequence minus the sender's current position, bytes the
// same messages' estimated size, seconds the age of the oldest of them
// (its origin publish time), 0 when none; the rest comes from the
// sender's last status (at most a second old).
func (r *replSender) stats(now time.Time) ReplicationStats {
	r.mu.Lock()
	st, lastErr := r.status, r.err
	r.mu.Unlock()
	last := r.ml.LastOriginSeq()
	out := ReplicationStats{
		Topic: r.t.name.String(), Remote: r.remote, Cursor: ReplCursorName(r.remote),
		State: st.Health.String(), Position: st.Position, LastOriginSeq: last,
		InFlight: st.InFlight, LastSuccess: st.LastSuccess, Failures: st.Failures,
		Batches: st.Stats.Batches, Sent: st.Stats.Sent, Resent: st.Stats.Resent,
		GapRecords: st.Stats.GapRecords, Timeouts: st.Stats.Timeouts,
	}
	if st.Health == 0 {
		out.State = replicator.Replicating.String() // not reported yet
	}
	if now.Before(st.RetryAt) {
		out.RetryAt = st.RetryAt
	}
	if st.LastError != nil {
		out.LastError = st.LastError.Error()
		if st.Failures > 0 && strings.HasPrefix(lastErr, r.remote+": ") {
			out.LastError += ": " + lastErr // the remote's own reason (e.g. its storage quota)
		}
	} else if st.Failures > 0 {
		out.LastError = lastErr
	}
	pos := r.pos.Load()
	out.Position = pos
	ml := r.ml.State()
	var oldest time.Time
	if last > pos {
		ctx, cancel := context.WithTimeout(r.t.s.ctx, time.Second)
		if m, err := r.ml.ReadLocal(ctx, pos+1); err == nil {
			oldest = m.Origin.Time
		}
		cancel()
	}
	out.LagMsgs, out.LagBytes, out.LagSeconds = lagAt(now, pos, last, ml.Msgs, ml.Bytes, oldest, st.Lag.Age)
	if r.frozen.Load() {
		out.LagMsgs, out.LagBytes, out.LagSeconds = 0, 0, 0 // test hook: lies like the stalled sender of the issue
	}
	return out
}

// lagAt is a replicator cursor's lag at now, in messages, bytes and
// seconds, all of the same set: the local origin sequences after
// position up to last. Bytes estimate their size as their count times
// the topic's mean stored message size (msgs, bytes: the topic's
// state). Seconds are the age of the oldest (oldest: its origin publish
// time), or, when it could not be read (trimmed: a gap record is due),
// trimmedAge, the sender's time since the backlog last moved. All zero
// when nothing is unreplicated; never negative.
func lagAt(now time.Time, position, last, msgs, bytes uint64, oldest time.Time, trimmedAge time.Duration) (lagMsgs, lagBytes uint64, lagSeconds float64) {
	if last <= position {
		return 0, 0, 0
	}
	lagMsgs = last - position
	mean := uint64(0)
	if msgs > 0 {
		mean = bytes / msgs
	}
	lagBytes = lagMsgs * mean
	age := trimmedAge
	if !oldest.IsZero() {
		age = now.Sub(oldest)
	}
	return lagMsgs, lagBytes, max(age, 0).Seconds()
}

// replication is the topic's replication state (its owner's).
func (t *topic) replication() TopicReplication {
	now := time.Now()
	out := TopicReplication{Incarnation: t.ml.Incarnation(), LastOriginSeq: t.ml.LastOriginSeq(), Cursors: []ReplicationStats{}, Origins: []OriginStats{}}
	for _, r := range t.replSenders() {
		out.Cursors = append(out.Cursors, r.stats(now))
	}
	for _, o := range t.ml.Origins() {
		out.Origins = append(out.Origins, OriginStats{Region: o.Region, Incarnation: o.Incarnation, HWM: o.HWM, Lost: o.Lost})
		out.OriginsLost += o.Lost
	}
	return out
}

// Replication lists the replicator cursors of the topics this broker
// owns, sorted by topic and remote.
func (s *Service) Replication() []ReplicationStats {
	s.mu.Lock()
	topics := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		topics = append(topics, t)
	}
	s.mu.Unlock()
	now := time.Now()
	out := []ReplicationStats{}
	for _, t := range topics {
		if !t.isReady() {
			continue
		}
		for _, r := range t.replSenders() {
			out = append(out, r.stats(now))
		}
	}
	sortReplication(out)
	return out
}

// OriginLoss is an origin stream of a topic this broker owns with the
// messages gap records skipped (trimmed at their origin before they were
// replicated here).
type OriginLoss struct {
	Topic       string `json:"topic"`
	Region      string `json:"region"`
	Incarnation string `json:"incarnation"`
	Lost        uint64 `json:"lost"`
}

// OriginLosses lists the origin streams with losses of the topics this
// broker owns.
func (s *Service) OriginLosses() []OriginLoss {
	s.mu.Lock()
	topics := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		topics = append(topics, t)
	}
	s.mu.Unlock()
	out := []OriginLoss{}
	for _, t := range topics {
		if !t.isReady() {
			continue
		}
		for _, o := range t.ml.Origins() {
			if o.Lost > 0 {
				out = append(out, OriginLoss{Topic: t.name.String(), Region: o.Region, Incarnation: o.Incarnation, Lost: o.Lost})
			}
		}
	}
	return out
}

func sortReplication(rs []ReplicationStats) {
	for i := 1; i < len(rs); i++ { // insertion sort: short lists
		for j := i; j > 0 && replLess(rs[j], rs[j-1]); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func replLess(a, b ReplicationStats) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Remote < b.Remote
}

// replAdminPrefix is the internal request a broker sends a topic's owner
// for its replication state: "$STRATA.ADMIN.REPL.<t>.<ns>.<topic>".
const replAdminPrefix = "$STRATA.ADMIN.REPL."

// dispatchReplAdmin answers a replication-state request at the topic's
// owner.
func (s *Service) dispatchReplAdmin(m message) {
	n, err := tenancy.ParseName(strings.ReplaceAll(strings.TrimPrefix(m.subject, replAdminPrefix), ".", "/"))
	if err != nil || s.reg.topic(n) == nil {
		return
	}
	s.toOwner(n, m, func(t *topic) {
		st := ownerState{TopicReplication: t.replication()}
		st.Policy.Error, st.Policy.Failures, st.Policy.Since = t.policy.status()
		b, _ := json.Marshal(st)
		t.s.respond(m.reply, b)
	})
}
