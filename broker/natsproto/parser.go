package natsproto

import "bytes"

// Kind selects which ops a Parser accepts.
type Kind int

const (
	// KindClient: the ops a NATS client sends: CONNECT PUB HPUB SUB UNSUB
	// PING PONG, and +OK, -ERR and INFO (reported through Handler.OK,
	// Handler.Err and Handler.Info; the reference ignores a client's INFO).
	KindClient Kind = iota
	// KindRoute: the ops on Strata's broker-to-broker link: CONNECT INFO
	// PING PONG RS+ RS- RMSG -ERR.
	KindRoute
)

// Limits.
const (
	// DefaultMaxControlLine is Config.MaxControlLine's default, in bytes
	// (nats-server's max_control_line).
	DefaultMaxControlLine = 4096
	// DefaultMaxPayload is Config.MaxPayload's default, in bytes
	// (nats-server's max_payload; advertise it in INFO).
	DefaultMaxPayload = 1 << 20
	// maxControlLineLimit and maxPayloadLimit cap the configured limits,
	// so that sizes stay far from int overflow on 32-bit platforms.
	maxControlLineLimit = 1 << 20
	maxPayloadLimit     = 1 << 30
	// minScratch is the smallest scratch buffer; keepScratch the largest
	// one kept between ops (a larger one is dropped once its op is done).
	minScratch  = 512
	keepScratch = 64 << 10
)

// Msg is one PUB or HPUB (KindClient) or RMSG (KindRoute). Every slice
// aliases the parser's input or its scratch buffer and is valid only
// during the Handler.Msg call: copy what you keep. The slices have no
// spare capacity, so appending to one never overwrites the input.
type Msg struct {
	// Subject as sent; not validated (see ValidLiteralSubject).
	Subject []byte
	// Reply is the reply subject, or nil when absent.
	Reply []byte
	// Header is the header block, from "NATS/1.0" through the final
	// CRLFCRLF (#hdr bytes); nil for PUB, and for HPUB and RMSG with a
	// header size of 0. Its content is not checked (see HeaderGet).
	Header []byte
	// Payload is the body after the header block, without the CRLF that
	// ends the op; empty (not necessarily nil) when there is no body.
	Payload []byte
	// Queues (RMSG only) are the queue groups the sending broker chose
	// this route for; nil when none.
	Queues [][]byte
}

// Handler receives the ops Parse decodes, one call per op, in order. A
// method returning an error stops Parse, which returns that error
// unchanged. Byte slices are valid only during the call. Methods may call
// the Parser's SetHeaders and SetMaxPayload, which take effect from the
// next op; they must not call Parse.
type Handler interface {
	// Connect gets the argument of CONNECT <json> (NATS protocol:
	// CONNECT; both kinds): the JSON, not decoded.
	Connect(arg []byte) error
	// Info gets the argument of INFO <json> (NATS protocol: INFO; both
	// kinds): the JSON, not decoded.
	Info(arg []byte) error
	// Msg gets a PUB or HPUB (NATS protocol: PUB, HPUB; KindClient) or an
	// RMSG (Strata route protocol; KindRoute). *m is reused.
	Msg(m *Msg) error
	// Sub gets SUB <subject> [queue] <sid> (NATS protocol: SUB); queue is
	// nil when absent and sid is a string of decimal digits.
	Sub(subject, queue, sid []byte) error
	// Unsub gets UNSUB <sid> [max] (NATS protocol: UNSUB): sid is a
	// string of decimal digits, max a count of messages, -1 when absent.
	Unsub(sid []byte, max int64) error
	// RouteSub gets RS+ <subject> [queue] (Strata route protocol); queue
	// is nil when absent.
	RouteSub(subject, queue []byte) error
	// RouteUnsub gets RS- <subject> [queue] (Strata route protocol);
	// queue is nil when absent.
	RouteUnsub(subject, queue []byte) error
	// Ping gets PING (NATS protocol: PING).
	Ping() error
	// Pong gets PONG (NATS protocol: PONG).
	Pong() error
	// Err gets -ERR '<text>' (NATS protocol: -ERR): text without the
	// quotes (quotes are optional on input), possibly empty.
	Err(text []byte) error
	// OK gets +OK (NATS protocol: +OK; KindClient only).
	OK() error
}

// Config configures a Parser.
type Config struct {
	// Kind selects the accepted ops (KindClient or KindRoute).
	Kind Kind
	// MaxControlLine is the longest control line accepted, in bytes,
	// counting the op name and not the CRLF; longer is ErrControlLine.
	// 0 means DefaultMaxControlLine (4096); values are capped at 1 MiB.
	// nats-server counts only the arguments and allows routes 16 times as
	// much: a route link carrying RMSGs with many queue groups may want
	// more than the default.
	MaxControlLine int
	// MaxPayload is the largest declared total size (headers included) of
	// a PUB, HPUB or RMSG, in bytes; larger is ErrMaxPayload, found on the
	// control line. 0 means DefaultMaxPayload (1 MiB); values are capped at
	// 1 GiB. Memory held for an op split across reads grows with the bytes
	// received, not with the declared size.
	MaxPayload int
	// Headers allows HPUB (the client's CONNECT said headers:true);
	// otherwise HPUB is ErrHeadersOff. The server flips it after CONNECT
	// with SetHeaders. RMSG always allows headers.
	Headers bool
}

// Parser decodes a stream of NATS protocol ops (framing and arguments) and
// calls a Handler for each. It does no I/O. It is not safe for concurrent
// use: one goroutine (the connection's reader) calls Parse, SetHeaders and
// SetMaxPayload.
type Parser struct {
	ops        []opCode // the ops of the Kind
	maxLine    int
	maxPayload int
	headers    bool

	// pend holds the unfinished op that ended the previous input: part of
	// a control line (need == 0), or a whole control line and part of what
	// follows it (need > 0). It starts at the op's first byte.
	pend []byte
	// need is the full length of the pending op (control line, #total
	// bytes and CRLF) once its control line is complete and checked, else 0.
	need int
	args [][]byte // reused argument slices
	msg  Msg      // reused for Handler.Msg
	err  error    // the first error; Parse returns it again
}

// NewParser returns a Parser for cfg. It panics on an unknown Kind.
func NewParser(cfg Config) *Parser {
	p := &Parser{headers: cfg.Headers, args: make([][]byte, 0, 8)}
	switch cfg.Kind {
	case KindClient:
		p.ops = clientOps
	case KindRoute:
		p.ops = routeOps
	default:
		panic("natsproto: unknown Kind")
	}
	p.maxLine = cfg.MaxControlLine
	if p.maxLine <= 0 {
		p.maxLine = DefaultMaxControlLine
	}
	p.maxLine = min(p.maxLine, maxControlLineLimit)
	p.SetMaxPayload(cfg.MaxPayload)
	return p
}

// SetHeaders allows (on) or refuses (ErrHeadersOff) HPUB from the next op
// on: call it when CONNECT has been decoded.
func (p *Parser) SetHeaders(on bool) { p.headers = on }

// SetMaxPayload sets the largest declared total size, in bytes, of the
// next ops (n <= 0: DefaultMaxPayload; capped at 1 GiB). An op whose
// control line was already accepted is not checked again.
func (p *Parser) SetMaxPayload(n int) {
	if n <= 0 {
		n = DefaultMaxPayload
	}
	p.maxPayload = min(n, maxPayloadLimit)
}

// Parse consumes buf completely. It calls h for every complete op, in
// order, and keeps an incomplete trailing op (part of a control line or of
// a payload) for the next call, copying only those bytes into a reused
// scratch buffer; an op wholly inside buf is decoded in place, without
// allocating. Reads may split the stream anywhere: the calls made and the
// error returned do not depend on where.
//
// It returns the first error: a *ProtoError wrapping one of the sentinels
// (see ErrText for the -ERR to send), or an error a Handler method
// returned, unchanged. After an error the Parser is spent: later calls
// return the same error.
func (p *Parser) Parse(buf []byte, h Handler) error {
	if p.err != nil {
		return p.err
	}
	if len(p.pend) > 0 {
		n, err := p.resume(buf, h)
		if err != nil {
			return p.fail(err)
		}
		buf = buf[n:]
		if len(p.pend) > 0 {
			return nil
		}
	}
	for len(buf) > 0 {
		n, err := p.next(buf, h)
		if err != nil {
			return p.fail(err)
		}
		if n == 0 {
			p.stash(buf)
			return nil
		}
		buf = buf[n:]
	}
	return nil
}

func (p *Parser) fail(err error) error {
	p.err = err
	p.pend, p.need = nil, 0
	return err
}

// next decodes the op at the start of b. It returns the op's length once
// h has been called for it, or 0 when b holds only part of it (then, for a
// PUB, HPUB or RMSG whose control line is complete, p.need is its length).
func (p *Parser) next(b []byte, h Handler) (int, error) {
	lim := min(len(b), p.maxLine+2) // the longest valid line, LF included
	lf := bytes.IndexByte(b[:lim], '\n')
	if lf < 0 { // when lim < len(b), scanLine always finds the line too long
		_, _, err := scanLine(p.ops, b[:lim], p.maxLine, false)
		return 0, err
	}
	s := b[:lf]
	op, end, err := scanLine(p.ops, s, p.maxLine, true)
	if err != nil {
		return 0, err
	}
	if n := len(s); n > 0 && s[n-1] == '\r' {
		s = s[:n-1]
	}
	switch op {
	case opPub, opHPub, opRMsg:
		return p.msgOp(op, s[end:], b, lf+1, h)
	}
	return lf + 1, p.control(op, s[end:], h)
}

// resume continues the pending op with the start of buf and returns how
// many bytes of buf it used. When the op completes, h is called and the
// scratch buffer emptied; otherwise all of buf went into it.
func (p *Parser) resume(buf []byte, h Handler) (int, error) {
	used := 0
	if p.need == 0 { // still in the control line
		room := p.maxLine + 2 - len(p.pend)
		seg := buf[:min(len(buf), room)]
		i := bytes.IndexByte(seg, '\n')
		if i < 0 {
			p.grow(len(seg))
			p.pend = append(p.pend, seg...)
			_, _, err := scanLine(p.ops, p.pend, p.maxLine, false)
			return len(seg), err
		}
		p.grow(i + 1)
		p.pend = append(p.pend, seg[:i+1]...)
		used = i + 1
		n, err := p.next(p.pend, h)
		if err != nil || n > 0 {
			p.release()
			return used, err
		}
		// A PUB, HPUB or RMSG: p.need is set, its payload follows.
	}
	k := min(p.need-len(p.pend), len(buf)-used)
	p.grow(k)
	p.pend = append(p.pend, buf[used:used+k]...)
	used += k
	if len(p.pend) < p.need {
		return used, nil
	}
	_, err := p.next(p.pend, h)
	p.release()
	return used, err
}

// stash keeps b, an unfinished op, for the next Parse.
func (p *Parser) stash(b []byte) {
	p.pend = p.pend[:0]
	p.grow(len(b))
	p.pend = append(p.pend, b...)
}

// grow makes room for k more bytes in pend, doubling its capacity but
// never beyond the pending op's length (or the longest control line).
func (p *Parser) grow(k int) {
	n := len(p.pend) + k
	if n <= cap(p.pend) {
		return
	}
	limit := p.need
	if limit == 0 {
		limit = p.maxLine + 2
	}
	c := min(max(2*cap(p.pend), minScratch), max(limit, n))
	c = max(c, n)
	buf := make([]byte, len(p.pend), c)
	copy(buf, p.pend)
	p.pend = buf
}

// release ends the pending op, keeping a small scratch buffer for reuse.
func (p *Parser) release() {
	p.need = 0
	if cap(p.pend) > keepScratch {
		p.pend = nil
		return
	}
	p.pend = p.pend[:0]
}

// msgOp decodes PUB, HPUB or RMSG, whose control line (after the op name,
// without its line ending) is rest and whose payload starts at b[start:].
func (p *Parser) msgOp(op opCode, rest, b []byte, start int, h Handler) (int, error) {
	hdr, total, err := p.msgArgs(op, rest)
	if err != nil {
		return 0, err
	}
	end := start + total
	if len(b) < end+2 {
		p.need = end + 2
		return 0, nil
	}
	if b[end] != '\r' || b[end+1] != '\n' {
		return 0, protoErr(ErrUnknownOp, op, "payload not followed by CRLF, got", b[end:end+2])
	}
	m := &p.msg
	m.Header = nil
	if hdr > 0 {
		m.Header = b[start : start+hdr : start+hdr]
	}
	m.Payload = b[start+hdr : end : end]
	return end + 2, h.Msg(m)
}
