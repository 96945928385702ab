package jetstream

import (
	"encoding/binary"
	"fmt"
)

// Deliveries for requesters on another broker cross the internal link in
// batches: one $SR.DLV.<broker> message carries every delivery (and
// status) a consumer emits at once for that broker, so a pull of 500
// messages costs one route message instead of 500.
//
// A batch is dlvBatchVersion, then for each delivery its envelope's
// length (uvarint) and the envelope. A payload that starts with an
// envelope version is a single delivery.
const (
	dlvBatchVersion = 0x80
	// maxDlvBatch bounds a batch's payload, in bytes, well under the
	// route's payload limit; a delivery larger than it goes alone.
	maxDlvBatch = 512 << 10
)

// dlvBatcher gathers one consumer emit's deliveries per destination
// broker, keeping their order. Not safe for concurrent use.
type dlvBatcher struct {
	s       *Service
	origin  string // destination of the open batch
	n       int    // deliveries in it
	buf     []byte
	scratch []byte
}

// add delivers e (inbox e.Subject) to a requester on broker origin: at
// once when it is this broker, else into the batch for origin (sending
// the open batch first when it is for another broker or full).
func (b *dlvBatcher) add(origin string, e *envelope) {
	if origin == "" || origin == b.s.cfg.Name {
		b.flush() // keep the order of everything emitted
		b.s.srv.DeliverLocal([]byte(e.Subject), []byte(e.Show), []byte(e.Reply), e.Header, e.Data)
		return
	}
	b.scratch = e.appendTo(b.scratch[:0])
	if b.n > 0 && (origin != b.origin || len(b.buf)+binary.MaxVarintLen32+len(b.scratch) > maxDlvBatch) {
		b.flush()
	}
	if b.n == 0 {
		b.origin = origin
		b.buf = append(b.buf[:0], dlvBatchVersion)
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(len(b.scratch)))
	b.buf = append(b.buf, b.scratch...)
	b.n++
}

// flush sends the open batch, if any.
func (b *dlvBatcher) flush() {
	if b.n == 0 {
		return
	}
	b.s.srv.PublishInternal([]byte(dlvPrefix+b.origin), nil, nil, b.buf) // copies
	b.n = 0
}

// splitDeliveries decodes a $SR.DLV payload: a batch or one envelope.
// Errors: errEnvelope for a malformed payload (nothing of it is returned).
func splitDeliveries(p []byte) ([]envelope, error) {
	if len(p) == 0 || p[0] != dlvBatchVersion {
		e, err := unmarshalEnvelope(p)
		if err != nil {
			return nil, err
		}
		return []envelope{e}, nil
	}
	p = p[1:]
	var out []envelope
	for len(p) > 0 {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return nil, fmt.Errorf("%w: delivery batch length", errEnvelope)
		}
		e, err := unmarshalEnvelope(p[k : k+int(n)])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		p = p[k+int(n):]
	}
	return out, nil
}
