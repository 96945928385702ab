package natsproto

import "strconv"

// This file holds the op table and the checks of a control line as a whole
// (NATS protocol: control lines, §1.1 of nats-wire.md).

// opCode identifies an op of either Kind.
type opCode uint8

const (
	opNone opCode = iota
	opConnect
	opInfo
	opPub
	opHPub
	opSub
	opUnsub
	opPing
	opPong
	opOK
	opErr
	opRouteSub
	opRouteUnsub
	opRMsg
)

// opNames are the canonical (upper-case) op names; matching ignores case.
var opNames = [...]string{
	opNone:       "",
	opConnect:    "CONNECT",
	opInfo:       "INFO",
	opPub:        "PUB",
	opHPub:       "HPUB",
	opSub:        "SUB",
	opUnsub:      "UNSUB",
	opPing:       "PING",
	opPong:       "PONG",
	opOK:         "+OK",
	opErr:        "-ERR",
	opRouteSub:   "RS+",
	opRouteUnsub: "RS-",
	opRMsg:       "RMSG",
}

func (o opCode) String() string { return opNames[o] }

// The ops each Kind accepts, most frequent first.
var (
	clientOps = []opCode{opPub, opHPub, opPing, opPong, opSub, opUnsub, opConnect, opOK, opErr, opInfo}
	routeOps  = []opCode{opRMsg, opRouteSub, opRouteUnsub, opPing, opPong, opConnect, opInfo, opErr}
)

// minHeader is the shortest well-formed header block, "NATS/1.0\r\n\r\n"
// (the parser does not enforce it: the broker checks the NATS/1.0 prefix
// and answers -ERR 'Unknown Protocol Operation', as the reference does).
const minHeader = len("NATS/1.0\r\n\r\n")

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// eqFold reports whether b equals the upper-case ASCII name, ignoring the
// case of b's letters. len(b) must be <= len(name).
func eqFold(b []byte, name string) bool {
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// lookup returns the op among ops whose name is tok (any case), or opNone.
func lookup(ops []opCode, tok []byte) opCode {
	for _, op := range ops {
		if name := opNames[op]; len(name) == len(tok) && eqFold(tok, name) {
			return op
		}
	}
	return opNone
}

// isOpPrefix reports whether tok (any case) begins the name of one of ops.
func isOpPrefix(ops []opCode, tok []byte) bool {
	for _, op := range ops {
		if name := opNames[op]; len(name) >= len(tok) && eqFold(tok, name[:len(tok)]) {
			return true
		}
	}
	return false
}

// Framing errors are located at the length of the shortest prefix of the
// control line that shows them, so that whatever way TCP splits the line,
// Parse reports the same error: the one found at the smallest position,
// ErrControlLine winning a tie (a tie can only be seen by a whole-line
// check when the op check needed the byte after the prefix).

// scanLine checks s, the bytes of a control line before its LF (complete)
// or all of the line received so far (not complete), for an unknown op
// and for excess length. When s is fine so far, it returns the op (opNone
// while the name is unfinished) and where its name ends in s.
func scanLine(ops []opCode, s []byte, maxLine int, complete bool) (opCode, int, error) {
	op, end, opBad := scanOp(ops, s, complete)
	lenBad := lineLenFault(s, maxLine)
	switch {
	case lenBad > 0 && (opBad == 0 || lenBad <= opBad):
		return opNone, 0, &ProtoError{Err: ErrControlLine, Op: op.String(), Detail: "line longer than " + strconv.Itoa(maxLine) + " bytes"}
	case opBad > 0:
		return opNone, 0, protoErr(ErrUnknownOp, opNone, "op", s[:min(opBad, len(s))])
	}
	return op, end, nil
}

// lineLenFault returns the length of the shortest prefix of s that shows
// the line's content (the bytes before CRLF or LF) is longer than maxLine,
// or 0. A prefix of maxLine+1 bytes ending in CR may still be fine (CR LF
// may follow); one more byte settles it.
func lineLenFault(s []byte, maxLine int) int {
	switch {
	case len(s) > maxLine && s[maxLine] != '\r':
		return maxLine + 1
	case len(s) > maxLine+1:
		return maxLine + 2
	}
	return 0
}

// scanOp finds the op name at the start of s. It returns the op and the
// end of its name, or the length of the shortest prefix of s that cannot
// start a valid line (bad > 0), or nothing yet (s is an unfinished name).
// The name ends at the first space or tab, or at the end of the line; a CR
// ends it only as the last byte of a complete line.
func scanOp(ops []opCode, s []byte, complete bool) (op opCode, end, bad int) {
	if complete { // fast path: the first token is a known op
		end = 0
		for end < len(s) && !isSpace(s[end]) {
			end++
		}
		tok := s[:end]
		if end == len(s) && end > 0 && s[end-1] == '\r' {
			tok = s[:end-1]
		}
		if op = lookup(ops, tok); op != opNone {
			return op, len(tok), 0
		}
	}
	for i, c := range s {
		switch {
		case isSpace(c):
			if op = lookup(ops, s[:i]); op != opNone {
				return op, i, 0
			}
			return opNone, 0, i + 1
		case c == '\r' && i == len(s)-1:
			if !complete {
				return opNone, 0, 0
			}
			if op = lookup(ops, s[:i]); op != opNone {
				return op, i, 0
			}
			return opNone, 0, len(s) + 1
		case !isOpPrefix(ops, s[:i+1]):
			return opNone, 0, i + 1
		}
	}
	if !complete {
		return opNone, 0, 0
	}
	if op = lookup(ops, s); op != opNone {
		return op, len(s), 0
	}
	return opNone, 0, len(s) + 1
}
