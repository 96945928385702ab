package region

import (
	"encoding/json"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/broker/mledger"
)

// Conversions from the node's domain values to the admin API's wire
// types. Field for field: the JSON is the one the routes always served.

func ledgerView(md core.Metadata) admin.LedgerView {
	v := admin.LedgerView{
		LedgerID: md.LedgerID, EnsembleSize: md.EnsembleSize, WriteQuorum: md.WriteQuorum, AckQuorum: md.AckQuorum,
		State: md.State.String(), LastEntryID: md.LastEntryID, Length: md.Length, DigestType: md.DigestType,
		Segments: make([]admin.LedgerSegment, len(md.Segments)),
	}
	for i, s := range md.Segments {
		v.Segments[i] = ledgerSegment(s)
	}
	if s := md.FencedSegment; s != nil {
		fs := ledgerSegment(*s)
		v.FencedSegment = &fs
	}
	return v
}

func ledgerSegment(s core.Segment) admin.LedgerSegment {
	out := admin.LedgerSegment{FirstEntry: s.FirstEntry, Ensemble: make([]string, len(s.Ensemble)), Instances: s.Instances}
	for i, b := range s.Ensemble {
		out.Ensemble[i] = string(b)
	}
	return out
}

func topicSummary(t jetstream.TopicSummary) admin.TopicSummary {
	return admin.TopicSummary{Tenant: t.Tenant, Namespace: t.Namespace, Topic: t.Topic, Stream: t.Stream, Subjects: t.Subjects, Owner: t.Owner}
}

func topicStats(st *jetstream.TopicStats) *admin.TopicStats {
	out := &admin.TopicStats{
		TopicSummary: topicSummary(st.TopicSummary),
		Retention:    st.Retention, Messages: st.Messages, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq,
		FirstTime: st.FirstTime, LastTime: st.LastTime, NumSubjects: st.NumSubjects,
		Offload: offloadStatus(st.Offload),
	}
	if p := st.Policy; p != nil {
		out.Policy = &admin.PolicyStatus{Error: p.Error, Failures: p.Failures, Since: p.Since}
	}
	if cfg, err := json.Marshal(st.Config); err == nil {
		out.Config = cfg
	}
	for _, l := range st.Ledgers {
		tl := admin.TopicLedger{ID: l.ID, FirstSeq: l.FirstSeq, Entries: l.Entries, Msgs: l.Msgs, Bytes: l.Bytes,
			FirstTime: l.FirstTime, LastTime: l.LastTime, LastOrigin: l.LastOrigin, State: l.State}
		if o := l.Offload; o != nil {
			tl.Offload = &admin.TierCopy{Base: o.Base, Bytes: o.Bytes, Time: o.Time, BookieDeleted: o.BookieDeleted}
		}
		out.Ledgers = append(out.Ledgers, tl)
	}
	for _, s := range st.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, admin.SubscriptionStats{
			Name: s.Name, AckFloor: s.AckFloor, Delivered: s.Delivered, NumAckPending: s.NumAckPending,
			NumRedelivered: s.NumRedelivered, NumWaiting: s.NumWaiting, Backlog: s.Backlog, AckPolicy: s.AckPolicy,
			Created: s.Created, Replicated: s.Replicated,
		})
	}
	if r := st.Replication; r != nil {
		tr := &admin.TopicReplication{Incarnation: r.Incarnation, LastOriginSeq: r.LastOriginSeq, OriginsLost: r.OriginsLost,
			Cursors: make([]admin.ReplicationStats, len(r.Cursors)), Origins: make([]admin.OriginStats, len(r.Origins))}
		for i, c := range r.Cursors {
			tr.Cursors[i] = replicationStats(c)
		}
		for i, o := range r.Origins {
			tr.Origins[i] = admin.OriginStats{Region: o.Region, Incarnation: o.Incarnation, HWM: o.HWM, Lost: o.Lost}
		}
		out.Replication = tr
	}
	return out
}

func replicationStats(c jetstream.ReplicationStats) admin.ReplicationStats {
	return admin.ReplicationStats{
		Topic: c.Topic, Remote: c.Remote, Cursor: c.Cursor, State: c.State, Position: c.Position, LastOriginSeq: c.LastOriginSeq,
		LagMsgs: c.LagMsgs, LagBytes: c.LagBytes, LagSeconds: c.LagSeconds, InFlight: c.InFlight,
		LastSuccess: c.LastSuccess, RetryAt: c.RetryAt, Failures: c.Failures, LastError: c.LastError,
		Batches: c.Batches, Sent: c.Sent, Resent: c.Resent, GapRecords: c.GapRecords, Timeouts: c.Timeouts,
	}
}

func offloadStatus(st *mledger.OffloadStatus) *admin.OffloadStatus {
	if st == nil {
		return nil
	}
	out := &admin.OffloadStatus{
		Tier: st.Tier, Threshold: st.Threshold, DeletionLag: st.DeletionLag,
		Ledgers:          make([]admin.LedgerOffload, len(st.Ledgers)),
		OffloadedLedgers: st.OffloadedLedgers, OffloadedBytes: st.OffloadedBytes, BookieBytes: st.BookieBytes,
		Requested: st.Requested, LastError: st.LastError, LastErrorAt: st.LastErrorAt, NextRetry: st.NextRetry, Completed: st.Completed,
	}
	for i, l := range st.Ledgers {
		out.Ledgers[i] = admin.LedgerOffload{ID: l.ID, FirstSeq: l.FirstSeq, Msgs: l.Msgs, Bytes: l.Bytes, Where: l.Where, Object: l.Object, TierSize: l.TierSize, At: l.At}
	}
	if r := st.Running; r != nil {
		out.Running = &admin.OffloadRunning{Ledger: r.Ledger, Entries: r.Entries, Bytes: r.Bytes, Total: r.Total}
	}
	return out
}
