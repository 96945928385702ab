package mledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// Ledger states in LedgerInfo.State.
const (
	LedgerOpen   = "open"
	LedgerClosed = "closed"
)

// TopicMeta is a topic's record in etcd at TopicKey(name) (JSON, snake_case).
type TopicMeta struct {
	// Spec is opaque to the ML: the caller's topic configuration (the
	// JetStream StreamConfig as JSON). Must be valid JSON when set.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Created is when the topic was created.
	Created time.Time `json:"created"`
	// Incarnation is the topic's incarnation (ARCHITECTURE §4): a UUID
	// made when the topic is created (Create), so that a topic deleted and
	// re-created, or a region rebuilt from an empty data dir, starts new
	// origin streams instead of colliding with old origin sequences. A
	// topic created before incarnations existed gets one at its next Open,
	// written with Open's conditioned write.
	Incarnation string `json:"incarnation,omitempty"`
	// Region is the region whose origin stream, with Incarnation, the
	// topic's compact records stand for (Local; entry.go flagLocalOrigin):
	// the Config.Region of the first Open that had one, written with that
	// Open's conditioned write (before any record), and never changed for
	// this incarnation; a re-created topic (a new incarnation) starts
	// without one. "" until then: no compact record was written.
	//
	// The rule: a compact record's origin is (Region, Incarnation) of the
	// TopicMeta of its topic, whatever the Config.Region of the ML that
	// reads it. A region renamed, or rebuilt under another name over the
	// same metadata, so reads its old local messages with the name they
	// were published under, never its new one; its ML (Config.Region ≠
	// Region) writes its own local messages with full origins
	// (flagOrigin), as it does replicated ones.
	Region string `json:"region,omitempty"`
	// FirstSeq is the logical first sequence: messages below it were
	// purged, trimmed or expired. Persisted lazily (package doc).
	FirstSeq uint64 `json:"first_seq"`
	// Ledgers, by increasing FirstSeq and id: closed ledgers, then at most
	// one open ledger (the owner's writer). Contiguous: each ledger's
	// FirstSeq is the previous one's FirstSeq + Msgs.
	Ledgers []LedgerInfo `json:"ledgers"`
	// Snapshot is the owner's state as of Snapshot.LastSeq, written with
	// every change of Ledgers; nil before the first Open.
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	// Trash are ledgers removed from Ledgers whose ledger metadata may
	// not have been deleted yet; the owner (and the next one) deletes
	// them.
	Trash []int64 `json:"trash,omitempty"`
	// TierTrash are tier copies (OffloadInfo.Base) of ledgers removed
	// from Ledgers, still to delete from the tier.
	TierTrash []string `json:"tier_trash,omitempty"`
	// Spare is a ledger the owner created ahead for its next rollover (0:
	// none). It is not in Ledgers: none of its entries was acknowledged,
	// and the next owner deletes it.
	Spare int64 `json:"spare,omitempty"`
}

// LedgerInfo is one ledger of a topic.
type LedgerInfo struct {
	// ID is the ledger id (bookie/ledger).
	ID int64 `json:"id"`
	// FirstSeq is the sequence of its first message (the first of entry
	// 0's batch).
	FirstSeq uint64 `json:"first_seq"`
	// Entries is its number of ledger entries once closed; -1 while open.
	Entries int64 `json:"entries"`
	// Msgs is its number of messages once closed (an entry holds a batch
	// of one or more: Msgs ≥ Entries); -1 while open. Records written
	// before entries held batches have no "msgs": each of their entries
	// held one message, and Msgs loads as Entries (UnmarshalJSON).
	Msgs int64 `json:"msgs"`
	// Bytes is the sum of its messages' sizes (EncodedSize) once closed (0
	// while open): its ledger length less the entry headers. (Records
	// written before batching counted whole single-message entries, a few
	// bytes more per message.)
	Bytes int64 `json:"bytes"`
	// FirstTime, LastTime are the publish times of its first and last
	// messages once closed (zero while open or empty).
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
	// LastOrigin is the topic's last local origin sequence as of its last
	// message once closed (cumulative: the local origin sequences it holds
	// are those above the previous ledger's LastOrigin, up to this one).
	// Records written before origins were recorded have none: 0, right for
	// them. SeqOfOrigin searches the list by it.
	LastOrigin uint64 `json:"last_origin,omitempty"`
	// State is LedgerOpen or LedgerClosed.
	State string `json:"state"`
	// Offload records the ledger's verified copy in the region's tier
	// (offload.go); nil while it has none.
	Offload *OffloadInfo `json:"offload,omitempty"`
}

// UnmarshalJSON decodes a LedgerInfo, also as written before entries
// held batches (no "msgs": one message per entry).
func (l *LedgerInfo) UnmarshalJSON(b []byte) error {
	type plain LedgerInfo // without this method
	var v struct {
		plain
		Msgs *int64 `json:"msgs"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = LedgerInfo(v.plain)
	l.Msgs = l.Entries
	if v.Msgs != nil {
		l.Msgs = *v.Msgs
	}
	return nil
}

// Local is the origin stream the topic's compact records stand for:
// Region and Incarnation (see Region). What DecodeBatch needs to decode
// its entries.
func (tm *TopicMeta) Local() Local { return Local{Region: tm.Region, Incarnation: tm.Incarnation} }

// end is the last sequence a closed ledger holds (FirstSeq-1 if empty).
func (l LedgerInfo) end() uint64 { return l.FirstSeq + uint64(max(l.Msgs, 0)) - 1 }

// Snapshot is what a new owner needs beyond the ledger list to go on
// exactly where the last one stopped: it rebuilds its state from this
// plus the entries after LastSeq.
type Snapshot struct {
	// LastSeq, LastTime: the last confirmed message when written.
	LastSeq  uint64    `json:"last_seq"`
	LastTime time.Time `json:"last_time"`
	// LastMsgID is that message's Nats-Msg-Id ("" if none), for
	// Nats-Expected-Last-Msg-Id.
	LastMsgID string `json:"last_msg_id,omitempty"`
	// Bytes, Msgs of live data (Bytes approximate; package doc).
	Bytes uint64 `json:"bytes"`
	Msgs  uint64 `json:"msgs"`
	// Subjects: per exact subject, its last sequence and message count.
	// The counts include every message from SubjectsFrom (≤ FirstSeq: the
	// trimmed messages in between are still to be subtracted).
	Subjects     map[string]SubjectState `json:"subjects,omitempty"`
	SubjectsFrom uint64                  `json:"subjects_from,omitempty"`
	// Dedup: the Nats-Msg-Ids still within the duplicate window, oldest
	// first (at most Config.MaxSnapshotDedup, the most recent).
	Dedup []DedupEntry `json:"dedup,omitempty"`
	// LastOriginSeq is the last local origin sequence (Config.Region, the
	// topic's incarnation) among the messages up to LastSeq.
	LastOriginSeq uint64 `json:"last_origin_seq,omitempty"`
	// Origins are the high-water marks of the origin streams replicated
	// into the topic (replicator.ReceiverState's streams, sorted), as of
	// LastSeq and the gap records accepted (SkipOrigin) up to then.
	Origins []replicator.StreamState `json:"origins,omitempty"`
}

// SubjectState is one subject's entry in the subject index.
type SubjectState struct {
	Last  uint64 `json:"last"`
	Count uint64 `json:"count"`
}

// DedupEntry is one remembered Nats-Msg-Id.
type DedupEntry struct {
	ID   string    `json:"id"`
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// Create writes a new topic's metadata: spec (opaque JSON, may be nil),
// created at now, a new incarnation, no ledgers, FirstSeq 1. ErrExists if
// the key exists (a CAS on revision 0). It is not ownership-conditioned:
// the first Open takes the topic over.
func Create(ctx context.Context, st *meta.Store, name tenancy.Name, spec []byte, now time.Time) error {
	if err := name.Validate(); err != nil {
		return err
	}
	if spec != nil && !json.Valid(spec) {
		return fmt.Errorf("mledger: create %s: spec is not valid JSON", name)
	}
	tm := TopicMeta{Spec: spec, Created: now.UTC(), Incarnation: newIncarnation(), FirstSeq: 1, Ledgers: []LedgerInfo{}}
	if _, err := meta.CASJSON(ctx, st, TopicKey(name), tm, 0); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("%w: %s", ErrExists, name)
		}
		return fmt.Errorf("mledger: create %s: %w", name, err)
	}
	return nil
}

// Load reads a topic's metadata and its mod revision. ErrNotFound if
// absent.
func Load(ctx context.Context, st *meta.Store, name tenancy.Name) (TopicMeta, int64, error) {
	tm, kv, err := meta.GetJSON[TopicMeta](ctx, st, TopicKey(name))
	if err != nil {
		if errors.Is(err, meta.ErrNotFound) {
			return TopicMeta{}, 0, fmt.Errorf("%w: topic %s", ErrNotFound, name)
		}
		return TopicMeta{}, 0, fmt.Errorf("mledger: load %s: %w", name, err)
	}
	return tm, kv.ModRevision, nil
}

// List returns every topic with metadata in st, sorted by key.
func List(ctx context.Context, st *meta.Store) ([]tenancy.Name, error) {
	kvs, err := st.List(ctx, TopicsPrefix)
	if err != nil {
		return nil, fmt.Errorf("mledger: list topics: %w", err)
	}
	names := make([]tenancy.Name, 0, len(kvs))
	for _, kv := range kvs {
		if n, ok := ParseTopicKey(kv.Key); ok {
			names = append(names, n)
		}
	}
	return names, nil
}

// newIncarnation makes a topic incarnation: a random (version 4) UUID.
func newIncarnation() string { return uuid.NewString() }
