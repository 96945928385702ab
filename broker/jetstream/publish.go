package jetstream

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/broker/natsproto"
)

// publish stores a client's message in the topic (JetStream publish,
// spec §2.4) and answers its reply subject with the PubAck once the
// ledger add completed at the ack quorum, or with the error. When the
// topic was lost meanwhile (fenced), nothing is answered: the client
// times out and retries, and Nats-Msg-Id dedup makes the retry safe.
// reservedHeaderPrefix starts the headers only Strata sets.
const reservedHeaderPrefix = "Strata-"

func (t *topic) publish(m message) {
	st := t.stream()
	var o mledger.PublishOptions
	if len(m.hdr) > 0 {
		// Strata-* headers are the mesh's own (ARCHITECTURE §4: a
		// replicated copy's Strata-Origin* headers); a client may not set
		// them, or a message could pass for another region's.
		if k, ok := natsproto.HeaderKeyWithPrefix(m.hdr, reservedHeaderPrefix); ok {
			t.s.respond(m.reply, pubAckError(st.stream, withDesc(jsapi.ErrBadRequest(),
				"header "+k+" is reserved: Strata-* headers are set by Strata on replicated copies, never by clients")))
			return
		}
		if v, ok := natsproto.HeaderGet(m.hdr, jsapi.HdrExpectedStream); ok && string(v) != st.stream && string(v) != qualifiedStream(st) {
			t.s.respond(m.reply, pubAckError(st.stream, jsapi.ErrStreamNotMatch()))
			return
		}
		if v, ok := natsproto.HeaderGet(m.hdr, jsapi.HdrMsgID); ok {
			o.MsgID = string(v)
		}
		var bad bool
		o.ExpectedLastSeq, bad = headerUint(m.hdr, jsapi.HdrExpectedLastSequence)
		if !bad {
			o.ExpectedLastSubjectSeq, bad = headerUint(m.hdr, jsapi.HdrExpectedLastSubjectSequence)
		}
		if bad {
			t.s.respond(m.reply, pubAckError(st.stream, jsapi.ErrBadRequest()))
			return
		}
		if v, ok := natsproto.HeaderGet(m.hdr, jsapi.HdrExpectedLastSubjectSeqSubject); ok {
			o.ExpectedLastSubjectSeqSubject = string(v)
		}
		if v, ok := natsproto.HeaderGet(m.hdr, jsapi.HdrExpectedLastMsgID); ok {
			id := string(v)
			o.ExpectedLastMsgID = &id
		}
	}
	if t.backlogGate(m) { // held or refused by the namespace's backlog quota (backlog_hold.go)
		return
	}
	if err := t.quotaRefusal(m); err != nil { // quota_gate.go
		if !t.storageHold(m, err) { // backlog_hold.go: a storage refusal under producer_request_hold waits
			t.refuseByQuota(m, st, err)
		}
		return
	}
	reply, quoted := m.reply, t.quoted
	t.fence.issue()
	t.ml.Publish(m.subject, m.hdr, m.data, o, func(r mledger.PubResult, err error) {
		t.fence.answer()
		if reply == "" {
			return
		}
		if err != nil {
			if errors.Is(err, mledger.ErrNotOwner) || errors.Is(err, mledger.ErrClosed) {
				return
			}
			t.s.respond(reply, pubAckError(st.stream, pubError(err)))
			return
		}
		// On the goroutine answering the ML's publishes: sent with the
		// rest of its run of answers (flushPubAcks).
		t.pubAcks = append(t.pubAcks, broker.Reply{Subject: []byte(reply), Payload: pubAckOK(quoted, r.Seq, r.Duplicate)})
	})
}

// headerUint reads an unsigned header; bad is set when present but not a
// number.
func headerUint(hdr []byte, key string) (v *uint64, bad bool) {
	raw, ok := natsproto.HeaderGet(hdr, key)
	if !ok {
		return nil, false
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return nil, true
	}
	return &n, false
}

// pubAckOK is {"stream":<quoted>,"seq":N[,"duplicate":true]}.
func pubAckOK(quoted []byte, seq uint64, dup bool) []byte {
	b := make([]byte, 0, 32+len(quoted))
	b = append(b, `{"stream":`...)
	b = append(b, quoted...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	if dup {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}

// pubAckError is {"error":{…},"stream":"S","seq":0} (spec §2.4).
func pubAckError(stream string, e *jsapi.APIError) []byte {
	b, _ := json.Marshal(jsapi.PubAckResponse{Error: e, PubAck: &jsapi.PubAck{Stream: stream}})
	return b
}

// The reference's texts for a discard:new limit (10077).
var (
	errMaxMsgs  = errors.New("maximum messages exceeded")
	errMaxBytes = errors.New("maximum bytes exceeded")
)

// pubError maps a managed ledger's publish error to its JetStream error.
func pubError(err error) *jsapi.APIError {
	var wls *mledger.WrongLastSeqError
	var wid *mledger.WrongLastMsgIDError
	switch {
	case errors.As(err, &wls):
		return jsapi.ErrStreamWrongLastSequence(wls.Actual)
	case errors.As(err, &wid):
		return jsapi.ErrStreamWrongLastMsgID(wid.Actual)
	case errors.Is(err, mledger.ErrMsgTooBig):
		return jsapi.ErrStreamMessageExceedsMaximum()
	case errors.Is(err, mledger.ErrStoreFull):
		// The reference's texts (its store's ErrMaxMsgs, ErrMaxBytes).
		// mledger says which limit only in its text: "…, max_bytes N".
		if strings.Contains(err.Error(), "max_bytes") {
			return jsapi.ErrStreamStoreFailed(errMaxBytes)
		}
		return jsapi.ErrStreamStoreFailed(errMaxMsgs)
	default:
		return jsapi.ErrStreamStoreFailed(err)
	}
}

// ack hands an ack to its consumer's runner (unknown consumers: ignored).
func (t *topic) ack(m message, am jsapi.AckMeta) {
	if r := t.runner(am.Consumer); r != nil {
		r.ack(m.origin, am, m.data, m.reply)
	}
}
