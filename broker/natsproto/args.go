package natsproto

import (
	"bytes"
	"cmp"
	"strconv"
)

// This file decodes the arguments of each op (NATS protocol: §1.5 of
// nats-wire.md; RMSG, RS+ and RS- are Strata's).

// sizeSaturate is where parseSize stops counting: any size at or above it
// is over every MaxPayload (which is capped at maxPayloadLimit).
const sizeSaturate = 1 << 40

// splitArgs appends to dst the arguments in b: runs of bytes other than
// space and tab. Leading and trailing whitespace is ignored.
func splitArgs(dst [][]byte, b []byte) [][]byte {
	for {
		i := 0
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		b = b[i:]
		if len(b) == 0 {
			return dst
		}
		j := 0
		for j < len(b) && !isSpace(b[j]) {
			j++
		}
		dst = append(dst, b[:j:j])
		b = b[j:]
	}
}

// trimSpace drops leading and trailing spaces and tabs.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// parseSize decodes a byte count: decimal digits only (no sign). Values at
// or above sizeSaturate come back as sizeSaturate. ok is false for an empty
// or non-digit argument.
func parseSize(b []byte) (n int64, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < sizeSaturate {
			n = n*10 + int64(c-'0')
		}
	}
	return min(n, sizeSaturate), true
}

// cmpDigits compares two decimal numbers of any length, as -1, 0 or +1.
func cmpDigits(a, b []byte) int {
	for len(a) > 1 && a[0] == '0' {
		a = a[1:]
	}
	for len(b) > 1 && b[0] == '0' {
		b = b[1:]
	}
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return bytes.Compare(a, b)
}

// parseMax decodes UNSUB's max: decimal digits that fit an int64.
func parseMax(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// isDigits reports whether b is a non-empty run of decimal digits (a sid).
func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// msgArgs decodes the arguments of PUB, HPUB or RMSG into p.msg and
// returns the header and total sizes. The checks that depend on settings
// (headers on, MaxPayload) are made only the first time a control line is
// seen (p.need == 0), so an op accepted before a settings change completes.
func (p *Parser) msgArgs(op opCode, rest []byte) (hdr, total int, err error) {
	fresh := p.need == 0
	if op == opHPub && fresh && !p.headers {
		return 0, 0, protoErr(ErrHeadersOff, op, "", nil)
	}
	p.args = splitArgs(p.args[:0], rest)
	a := p.args
	m := &p.msg
	m.Reply, m.Queues = nil, nil
	var hdrArg, sizeArg []byte
	switch {
	case op == opPub && len(a) == 2:
		m.Subject, sizeArg = a[0], a[1]
	case op == opPub && len(a) == 3:
		m.Subject, m.Reply, sizeArg = a[0], a[1], a[2]
	case op == opHPub && len(a) == 3:
		m.Subject, hdrArg, sizeArg = a[0], a[1], a[2]
	case op == opHPub && len(a) == 4:
		m.Subject, m.Reply, hdrArg, sizeArg = a[0], a[1], a[2], a[3]
	case op == opRMsg && len(a) >= 4:
		m.Subject, hdrArg, sizeArg = a[0], a[2], a[3]
		switch mk := a[1]; {
		case len(mk) == 1 && mk[0] == '-':
		case len(mk) > 1 && mk[0] == '+':
			m.Reply = mk[1:]
		default:
			return 0, 0, protoErr(ErrUnknownOp, op, "bad reply marker", mk)
		}
		if len(a) > 4 {
			m.Queues = a[4:len(a):len(a)]
		}
	default:
		return 0, 0, protoErr(ErrUnknownOp, op, "wrong number of arguments in", rest)
	}
	var h64 int64
	if hdrArg != nil {
		var ok bool
		if h64, ok = parseSize(hdrArg); !ok {
			return 0, 0, protoErr(ErrUnknownOp, op, "bad header size", hdrArg)
		}
	}
	t64, ok := parseSize(sizeArg)
	if !ok {
		return 0, 0, protoErr(ErrUnknownOp, op, "bad size", sizeArg)
	}
	if h64 > t64 ||
		(h64 == sizeSaturate && t64 == sizeSaturate && cmpDigits(hdrArg, sizeArg) > 0) {
		return 0, 0, protoErr(ErrBadHeaders, op, "header size "+string(hdrArg)+" with total", sizeArg)
	}
	if fresh && t64 > int64(p.maxPayload) {
		return 0, 0, protoErr(ErrMaxPayload, op, "size over "+strconv.Itoa(p.maxPayload), sizeArg)
	}
	return int(h64), int(t64), nil
}

// control decodes the ops without payload; rest is the line after the op
// name, without its line ending.
func (p *Parser) control(op opCode, rest []byte, h Handler) error {
	switch op {
	case opPing, opPong, opOK:
		if r := trimSpace(rest); len(r) > 0 {
			return protoErr(ErrUnknownOp, op, "unexpected argument", r)
		}
		switch op {
		case opPing:
			return h.Ping()
		case opPong:
			return h.Pong()
		}
		return h.OK()
	case opConnect, opInfo:
		arg := trimSpace(rest)
		if len(arg) == 0 {
			return protoErr(ErrUnknownOp, op, "missing argument", nil)
		}
		arg = arg[:len(arg):len(arg)]
		if op == opConnect {
			return h.Connect(arg)
		}
		return h.Info(arg)
	case opErr:
		text := trimSpace(rest)
		if n := len(text); n >= 2 && text[0] == '\'' && text[n-1] == '\'' {
			text = text[1 : n-1]
		}
		return h.Err(text[:len(text):len(text)])
	}
	p.args = splitArgs(p.args[:0], rest)
	a := p.args
	switch {
	case op == opSub && (len(a) == 2 || len(a) == 3):
		sid := a[len(a)-1]
		if !isDigits(sid) {
			return protoErr(ErrUnknownOp, op, "bad sid", sid)
		}
		var queue []byte
		if len(a) == 3 {
			queue = a[1]
		}
		return h.Sub(a[0], queue, sid)
	case op == opUnsub && (len(a) == 1 || len(a) == 2):
		if !isDigits(a[0]) {
			return protoErr(ErrUnknownOp, op, "bad sid", a[0])
		}
		max := int64(-1)
		if len(a) == 2 {
			var ok bool
			if max, ok = parseMax(a[1]); !ok {
				return protoErr(ErrUnknownOp, op, "bad max", a[1])
			}
		}
		return h.Unsub(a[0], max)
	case (op == opRouteSub || op == opRouteUnsub) && (len(a) == 1 || len(a) == 2):
		var queue []byte
		if len(a) == 2 {
			queue = a[1]
		}
		if op == opRouteSub {
			return h.RouteSub(a[0], queue)
		}
		return h.RouteUnsub(a[0], queue)
	}
	return protoErr(ErrUnknownOp, op, "wrong number of arguments in", rest)
}
