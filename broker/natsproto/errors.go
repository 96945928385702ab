package natsproto

import (
	"errors"
	"strconv"
)

// Protocol errors. Parse returns them wrapped in a *ProtoError; test with
// errors.Is. Every one of them is fatal: the connection is closed after the
// -ERR that ErrText names (if any).
var (
	// ErrUnknownOp: an op this Kind does not accept, a malformed control
	// line (empty, leading whitespace, missing or extra arguments, a size,
	// sid or max that is not a non-negative decimal, a bad RMSG reply
	// marker), or a payload not followed by CRLF.
	// -ERR 'Unknown Protocol Operation'.
	ErrUnknownOp = errors.New("natsproto: unknown protocol operation")
	// ErrControlLine: a control line longer than Config.MaxControlLine
	// bytes, not counting its line ending. -ERR 'maximum control line exceeded'.
	ErrControlLine = errors.New("natsproto: maximum control line exceeded")
	// ErrMaxPayload: a PUB, HPUB or RMSG whose declared total size
	// (headers included) is over Config.MaxPayload; found on the control
	// line, before any payload is read. -ERR 'Maximum Payload Violation'.
	ErrMaxPayload = errors.New("natsproto: maximum payload violation")
	// ErrBadHeaders: an HPUB or RMSG whose header size is over its total
	// size. (A header block that does not start with NATS/1.0 is the
	// broker's to refuse, with -ERR 'Unknown Protocol Operation'.)
	// The reference server closes without an -ERR.
	ErrBadHeaders = errors.New("natsproto: bad header size")
	// ErrHeadersOff: HPUB on a connection whose CONNECT did not set
	// headers:true (Config.Headers / SetHeaders). Closed without an -ERR.
	ErrHeadersOff = errors.New("natsproto: headers not enabled")
)

// ProtoError is a protocol error found by Parse: one of the sentinels above
// (Err) with the op it concerns and a detail for logs. Op is the canonical
// op name ("PUB") or "" when the op itself was not recognised.
type ProtoError struct {
	Err    error
	Op     string
	Detail string
}

// Error reads "natsproto: <sentinel>: <op>: <detail>", leaving out empty parts.
func (e *ProtoError) Error() string {
	s := e.Err.Error()
	if e.Op != "" {
		s += ": " + e.Op
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the sentinel.
func (e *ProtoError) Unwrap() error { return e.Err }

// ErrText is the text of the -ERR a server sends before closing the
// connection for err (NATS protocol: -ERR), or "" when it closes without
// one: ErrBadHeaders, ErrHeadersOff, nil, and errors that are not
// protocol errors (such as a Handler's).
func ErrText(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnknownOp):
		return "Unknown Protocol Operation"
	case errors.Is(err, ErrControlLine):
		return "maximum control line exceeded" // lower case, as nats-server v2.15.3 sends it
	case errors.Is(err, ErrMaxPayload):
		return "Maximum Payload Violation"
	}
	return ""
}

// maxDetail bounds how much of the offending input a ProtoError quotes.
const maxDetail = 64

// protoErr builds a *ProtoError; arg, when not nil, is quoted (cut to
// maxDetail bytes) after what.
func protoErr(sentinel error, op opCode, what string, arg []byte) error {
	d := what
	if arg != nil {
		q := arg
		if len(q) > maxDetail {
			q = q[:maxDetail]
		}
		d += " " + strconv.Quote(string(q))
		if len(arg) > maxDetail {
			d += "..."
		}
	}
	return &ProtoError{Err: sentinel, Op: op.String(), Detail: d}
}
