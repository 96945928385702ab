package jetstream

import (
	"crypto/rand"
	"encoding/json"
	"strings"

	"github.com/stratamesh/strata/broker/consumer"
	"github.com/stratamesh/strata/broker/jsapi"
)

// The driver's side of the subscription types (broker/consumer pin.go and
// keyshared.go): pin ids, the Nats-Pin-Id header, the pin advisories, and
// the key_shared topic subject.

// consumerOptions are the options every consumer of stream st is created
// or restored with.
func (s *Service) consumerOptions(st *stream) []consumer.Option {
	opts := []consumer.Option{consumer.StreamName(s.apiName(st)), consumer.PinIDs(newPinID)}
	if subj := topicSubject(st); subj != "" {
		opts = append(opts, consumer.TopicSubject(subj))
	}
	return opts
}

// topicSubject is "tenant.namespace.topic" when the stream captures that
// subject or subjects under it (a topic created by the admin API or by a
// publish): key_shared consumers keyed by subject then use the tokens
// after it. "" for streams with other subjects only (the whole subject
// is the key).
func topicSubject(st *stream) string {
	subj := st.name.Tenant + "." + st.name.Namespace + "." + st.name.Topic
	for _, f := range st.config.Subjects {
		if f == subj || strings.HasPrefix(f, subj+".") {
			return subj
		}
	}
	return ""
}

// pinIDLen is the length of a pin id: a NUID's, as the reference's, so
// that deliveries have the same size on both.
const pinIDLen = 22

// newPinID is a random pin id of pinIDLen base-62 characters (131 bits):
// unique across the consumer's owners and restarts.
func newPinID() string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, pinIDLen)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// withHeader returns a copy of the header block hdr (nil: none) with
// "key: value" added last, as the reference adds Nats-Pin-Id.
func withHeader(hdr []byte, key, value string) []byte {
	const crlf = "\r\n"
	n := len(hdr) + len(key) + len(value) + 16
	out := make([]byte, 0, n)
	if len(hdr) < len("NATS/1.0"+crlf+crlf) {
		out = append(out, "NATS/1.0"+crlf...)
	} else {
		out = append(out, strings.TrimSuffix(string(hdr), crlf)...)
	}
	out = append(out, key...)
	out = append(out, ": "...)
	out = append(out, value...)
	return append(out, crlf+crlf...)
}

// pinAdvisory publishes the reference's consumer_group_pinned or
// consumer_group_unpinned advisory for o.
func (r *runner) pinAdvisory(o *consumer.Out) {
	s, st := r.t.s, r.t.stream()
	ev := map[string]any{
		"id": newPinID(), "timestamp": s.cfg.Now().UTC(),
		"stream": st.stream, "consumer": r.name, "group": o.Group,
	}
	subj := "$JS.EVENT.ADVISORY.CONSUMER."
	if o.Kind == consumer.Pinned {
		ev["type"], ev["pinned_id"] = "io.nats.jetstream.advisory.v1.consumer_group_pinned", o.PinID
		subj += "PINNED."
	} else {
		ev["type"], ev["reason"] = "io.nats.jetstream.advisory.v1.consumer_group_unpinned", o.Reason
		subj += "UNPINNED."
	}
	body, _ := json.Marshal(ev)
	s.srv.PublishInternal(s.space(st.name.Tenant, subj+st.stream+"."+r.name), nil, nil, body)
}

// statusKV are the headers of a status Out: the last consumer and stream
// sequences of a heartbeat; the unused batch and bytes of a request that
// ends with credit left (408, 409 max bytes or batch completed, 423 wrong
// pin). A refused request, Consumer Deleted or Leadership Change carries
// none, as on the reference.
func statusKV(o *consumer.Out) []string {
	switch {
	case o.Status == jsapi.StatusIdleHeartbeat:
		return []string{jsapi.HdrLastConsumer, itoa(o.LastConsumer), jsapi.HdrLastStream, itoa(o.LastStream)}
	case o.Status == jsapi.StatusTimeout, o.Description == jsapi.DescMaxBytesExceeded,
		o.Description == jsapi.DescBatchCompleted, o.Description == jsapi.DescWrongPinID:
		return []string{jsapi.HdrPendingMessages, itoa(uint64(o.PendingMsgs)), jsapi.HdrPendingBytes, itoa(uint64(o.PendingBytes))}
	}
	return nil
}
