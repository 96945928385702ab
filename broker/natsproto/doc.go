// Package natsproto is the NATS wire protocol as Strata's brokers speak
// it: the framing and decoding of the ops a client sends (KindClient) and
// of the ops on Strata's broker-to-broker route link (KindRoute), the
// encoding of the ops a broker sends, subject and queue-name validation,
// and minimal header-block helpers. The protocol is described in
// shared/specs/nats-wire.md §1; RMSG, RS+ and RS- are Strata's own route
// format (see AppendRMsg).
//
// # What it owns, and what it must not do
//
// It owns bytes to ops and ops to bytes. It does no I/O (no sockets, no
// timers, no goroutines), no routing, and no CONNECT/INFO JSON: a Parser
// is a state machine fed by the connection's read loop, which owns the
// socket, acts on each Handler call and closes the connection on error.
// It does not validate subjects while parsing; the server calls
// ValidLiteralSubject, ValidSubscribeSubject and ValidQueueName.
//
// # Parsing and aliasing
//
// Parser.Parse takes whatever a read returned; reads may split the stream
// anywhere (inside an op name, its arguments, the line ending, the
// payload or its CRLF) and the Handler calls and the error are the same
// for every split. The byte slices a Handler gets, the Msg included,
// alias the caller's buffer or the Parser's scratch buffer and are valid
// only during that call: copy what outlives it. The caller may reuse its
// buffer as soon as Parse returns. An op wholly inside one buffer is
// decoded without allocating; an op that straddles reads has its bytes so
// far copied into a scratch buffer that grows with the bytes received
// (never ahead of them, whatever size the op declares) and is reused.
//
// The framing follows nats-server: control lines end in CRLF or LF;
// arguments are separated by runs of spaces or tabs, with whitespace
// before the first and after the last ignored; op names are
// case-insensitive and start the line (leading whitespace and empty lines
// are errors); a payload is followed by exactly CRLF.
//
// # Errors
//
// Every protocol error is fatal: the connection cannot be resynchronised.
// Parse returns a *ProtoError wrapping a sentinel; ErrText gives the -ERR
// the server sends before closing, and "" when it closes silently:
//
//	ErrUnknownOp    -ERR 'Unknown Protocol Operation'
//	ErrControlLine  -ERR 'maximum control line exceeded'
//	ErrMaxPayload   -ERR 'Maximum Payload Violation'
//	ErrBadHeaders   close without -ERR (as the reference server)
//	ErrHeadersOff   close without -ERR (as the reference server)
//
// Errors returned by Handler methods come back from Parse unchanged. An
// error found while a control line is still incomplete (an unknown op
// name, a line already too long) is reported without waiting for its end.
//
// # Concurrency
//
// A Parser belongs to one goroutine. The Append functions, the validators
// and the header helpers are pure and safe for concurrent use.
package natsproto
