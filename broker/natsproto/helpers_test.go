package natsproto

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// recorder is a Handler that records every call as a string, copying the
// arguments (they are only valid during the call). When p is set, a
// CONNECT whose JSON mentions "headers":true turns headers on, as the
// server does. failOn makes the named call return errStop.
type recorder struct {
	calls  []string
	p      *Parser
	failOn string
}

var errStop = errors.New("handler stop")

func (r *recorder) add(name, s string) error {
	r.calls = append(r.calls, s)
	if name == r.failOn {
		return errStop
	}
	return nil
}

// q quotes b, distinguishing nil from empty.
func q(b []byte) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", b)
}

func (r *recorder) Connect(arg []byte) error {
	if r.p != nil {
		r.p.SetHeaders(bytes.Contains(arg, []byte(`"headers":true`)))
	}
	return r.add("CONNECT", "CONNECT "+q(arg))
}
func (r *recorder) Info(arg []byte) error { return r.add("INFO", "INFO "+q(arg)) }
func (r *recorder) Msg(m *Msg) error      { return r.add("MSG", fmtMsg(m)) }
func (r *recorder) Sub(subject, queue, sid []byte) error {
	return r.add("SUB", "SUB "+q(subject)+" "+q(queue)+" "+q(sid))
}
func (r *recorder) Unsub(sid []byte, max int64) error {
	return r.add("UNSUB", fmt.Sprintf("UNSUB %s %d", q(sid), max))
}
func (r *recorder) RouteSub(subject, queue []byte) error {
	return r.add("RS+", "RS+ "+q(subject)+" "+q(queue))
}
func (r *recorder) RouteUnsub(subject, queue []byte) error {
	return r.add("RS-", "RS- "+q(subject)+" "+q(queue))
}
func (r *recorder) Ping() error           { return r.add("PING", "PING") }
func (r *recorder) Pong() error           { return r.add("PONG", "PONG") }
func (r *recorder) Err(text []byte) error { return r.add("-ERR", "-ERR "+q(text)) }
func (r *recorder) OK() error             { return r.add("+OK", "+OK") }

func fmtMsg(m *Msg) string {
	var qs []string
	for _, x := range m.Queues {
		qs = append(qs, q(x))
	}
	queues := "nil"
	if m.Queues != nil {
		queues = "[" + strings.Join(qs, " ") + "]"
	}
	return fmt.Sprintf("MSG %s reply=%s hdr=%s payload=%q queues=%s",
		q(m.Subject), q(m.Reply), q(m.Header), m.Payload, queues)
}

// feed parses chunks in order with a fresh Parser for cfg and returns the
// calls made and the error.
func feed(cfg Config, chunks ...[]byte) ([]string, error) {
	p := NewParser(cfg)
	r := &recorder{p: p}
	for _, c := range chunks {
		if err := p.Parse(c, r); err != nil {
			return r.calls, err
		}
	}
	return r.calls, nil
}

// sentinel names the protocol sentinel err wraps: "nil", the sentinel's
// text, or "other".
func sentinel(err error) string {
	for _, s := range []error{ErrUnknownOp, ErrControlLine, ErrMaxPayload, ErrBadHeaders, ErrHeadersOff} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err == nil {
		return "nil"
	}
	return "other: " + err.Error()
}

// splitAt cuts b at the given increasing offsets.
func splitAt(b []byte, cuts ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, b[prev:c])
		prev = c
	}
	return append(out, b[prev:])
}
