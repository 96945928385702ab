package jetstream

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Internal subjects of the region's link between brokers.
const (
	// fwdPrefix + <broker>: a client message forwarded to the owner of
	// its topic.
	fwdPrefix = "$SR.FWD."
	// dlvPrefix + <broker>: a pull-consumer delivery (or status) for a
	// requester connected to that broker.
	dlvPrefix = "$SR.DLV."
)

// maxHops bounds how often a forwarded message may be forwarded again
// (when it reached a broker that lost the topic meanwhile).
const maxHops = 3

// envelope is what crosses the internal link: a client message with where
// it entered the region (forwards) or a delivery for a local inbox.
type envelope struct {
	Hops    uint8
	Origin  string // broker the client is connected to
	Subject string // forward: the client's subject; delivery: the inbox
	Reply   string // forward: the client's reply; delivery: the ack subject
	Show    string // delivery: the subject shown on the MSG line
	// Topic: forward of a publish: the topic ("t/ns/topic") the sender
	// found capturing the subject, so an owner whose registry has not yet
	// seen a new topic waits for it instead of dropping the message.
	Topic string
	// Account: forward: the tenant account the client logged in as ("":
	// the system account, or auth off), so the owner resolves stream names
	// in that tenant only (version 3 on).
	Account string
	Header  []byte
	Data    []byte
}

// envelopeVersion 2 added Topic, 3 Account; versions 1 (no Topic) and 2
// (no Account) are still read.
const envelopeVersion = 3

func (e *envelope) marshal() []byte {
	n := 2 + 7*binary.MaxVarintLen32 + len(e.Origin) + len(e.Subject) + len(e.Reply) + len(e.Show) + len(e.Topic) + len(e.Account) + len(e.Header) + len(e.Data)
	return e.appendTo(make([]byte, 0, n))
}

// appendTo appends e's encoding to b.
func (e *envelope) appendTo(b []byte) []byte {
	b = append(b, envelopeVersion, e.Hops)
	for _, s := range []string{e.Origin, e.Subject, e.Reply, e.Show, e.Topic, e.Account} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Header)))
	b = append(b, e.Header...)
	return append(b, e.Data...)
}

var errEnvelope = errors.New("jetstream: malformed internal envelope")

// unmarshalEnvelope decodes b into a new envelope that shares nothing
// with b.
func unmarshalEnvelope(b []byte) (envelope, error) {
	var e envelope
	if len(b) < 2 || b[0] < 1 || b[0] > envelopeVersion {
		return e, fmt.Errorf("%w: version", errEnvelope)
	}
	version := b[0]
	e.Hops = b[1]
	b = b[2:]
	field := func(what string) ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: %s length", errEnvelope, what)
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, nil
	}
	var strs [6]string
	names := []string{"origin", "subject", "reply", "show", "topic", "account"}
	names = names[:3+int(version)]
	for i, what := range names {
		v, err := field(what)
		if err != nil {
			return e, err
		}
		strs[i] = string(v)
	}
	e.Origin, e.Subject, e.Reply, e.Show, e.Topic, e.Account = strs[0], strs[1], strs[2], strs[3], strs[4], strs[5]
	h, err := field("header")
	if err != nil {
		return e, err
	}
	if len(h) > 0 {
		e.Header = append([]byte(nil), h...)
	}
	e.Data = append([]byte(nil), b...)
	return e, nil
}
