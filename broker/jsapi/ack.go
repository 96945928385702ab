package jsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ack subjects and ack bodies (spec §2.6).
//
// V1 (what Strata sends, the reference's default), 9 tokens:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
//
// V2, 12 tokens (11 accepted: the last is a random token nats.go ignores):
//
//	$JS.ACK.<domain|_>.<acchash>.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>.<token>

// AckPrefix starts every ack subject.
const AckPrefix = "$JS.ACK."

// ErrBadAckSubject is returned by ParseAckSubject.
var ErrBadAckSubject = errors.New("jsapi: malformed ack subject")

// AckMeta is what an ack subject carries about one delivery.
type AckMeta struct {
	// Domain and AccountHash are set only in the V2 form; a V2 subject has
	// AccountHash != "". Domain "" is written as "_".
	Domain      string
	AccountHash string
	Stream      string
	Consumer    string
	// Delivered is the delivery count, starting at 1.
	Delivered uint64
	// StreamSeq is the message's stream sequence.
	StreamSeq uint64
	// ConsumerSeq (dseq) goes up by 1 on every delivery, redeliveries
	// included.
	ConsumerSeq uint64
	// Timestamp is the store time in Unix nanoseconds; negative values are
	// written as 0.
	Timestamp int64
	// Pending is the number of matching messages still undelivered after
	// this one.
	Pending uint64
	// Token is the V2 trailing random token ("" writes 11 tokens).
	Token string
}

// V2 reports whether m formats as a V2 subject.
func (m AckMeta) V2() bool { return m.AccountHash != "" }

// Time returns the store time.
func (m AckMeta) Time() time.Time { return time.Unix(0, m.Timestamp).UTC() }

// FormatAckSubject returns the ack (reply) subject for m: V1 unless
// m.AccountHash is set. Stream and consumer names must be valid names
// (ValidStreamName); the function does not check them.
func FormatAckSubject(m AckMeta) string {
	b := make([]byte, 0, len(AckPrefix)+len(m.Stream)+len(m.Consumer)+80)
	return string(AppendAckSubject(b, m))
}

// AppendAckSubject appends FormatAckSubject(m) to dst.
func AppendAckSubject(dst []byte, m AckMeta) []byte {
	dst = append(dst, AckPrefix...)
	if m.V2() {
		d := m.Domain
		if d == "" {
			d = "_"
		}
		dst = append(dst, d...)
		dst = append(dst, '.')
		dst = append(dst, m.AccountHash...)
		dst = append(dst, '.')
	}
	dst = append(dst, m.Stream...)
	dst = append(dst, '.')
	dst = append(dst, m.Consumer...)
	ts := m.Timestamp
	if ts < 0 {
		ts = 0
	}
	for _, n := range [...]uint64{m.Delivered, m.StreamSeq, m.ConsumerSeq, uint64(ts), m.Pending} {
		dst = append(dst, '.')
		dst = strconv.AppendUint(dst, n, 10)
	}
	if m.V2() && m.Token != "" {
		dst = append(dst, '.')
		dst = append(dst, m.Token...)
	}
	return dst
}

// ParseAckSubject parses a V1 or V2 ack subject. It is stricter than
// nats.go: tokens must be non-empty, numbers canonical decimal (no sign,
// no leading zeros, no overflow; the timestamp fits an int64), and V2 may
// have 11 or 12 tokens but not more. So FormatAckSubject(ParseAckSubject(s))
// == s for every s it accepts.
func ParseAckSubject(s string) (AckMeta, error) {
	var m AckMeta
	rest, ok := strings.CutPrefix(s, AckPrefix)
	if !ok {
		return m, fmt.Errorf("%w: %q", ErrBadAckSubject, s)
	}
	var toks [10]string
	n := 0
	for {
		if n == len(toks) {
			return AckMeta{}, fmt.Errorf("%w: too many tokens: %q", ErrBadAckSubject, s)
		}
		t, r, more := strings.Cut(rest, ".")
		if t == "" {
			return AckMeta{}, fmt.Errorf("%w: empty token: %q", ErrBadAckSubject, s)
		}
		toks[n] = t
		n++
		if !more {
			break
		}
		rest = r
	}
	var f []string // stream, consumer, 5 numbers
	switch n {
	case 7:
		f = toks[:7]
	case 9, 10:
		m.Domain, m.AccountHash = toks[0], toks[1]
		if m.Domain == "_" {
			m.Domain = ""
		}
		if n == 10 {
			m.Token = toks[9]
		}
		f = toks[2:9]
	default:
		return AckMeta{}, fmt.Errorf("%w: %d tokens: %q", ErrBadAckSubject, n+2, s)
	}
	m.Stream, m.Consumer = f[0], f[1]
	var nums [5]uint64
	for i := range nums {
		v, ok := parseCanonicalUint(f[2+i])
		if !ok {
			return AckMeta{}, fmt.Errorf("%w: bad number %q: %q", ErrBadAckSubject, f[2+i], s)
		}
		nums[i] = v
	}
	if nums[3] > 1<<63-1 {
		return AckMeta{}, fmt.Errorf("%w: timestamp overflows: %q", ErrBadAckSubject, s)
	}
	m.Delivered, m.StreamSeq, m.ConsumerSeq = nums[0], nums[1], nums[2]
	m.Timestamp, m.Pending = int64(nums[3]), nums[4]
	return m, nil
}

func parseCanonicalUint(t string) (uint64, bool) {
	if len(t) > 1 && t[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	return v, err == nil
}

// AckKind is what an ack body asks for.
type AckKind uint8

// Ack kinds.
const (
	AckUnknown  AckKind = iota // not an ack body: ignore it (the reference does)
	AckAck                     // "" or "+ACK" (or the deprecated "+OK")
	AckNak                     // "-NAK[ <delay>]"
	AckProgress                // "+WPI"
	AckTerm                    // "+TERM[ <reason>]"
	AckNext                    // "+NXT[ <pull request>]"
)

var ackKindNames = [...]string{"unknown", "+ACK", "-NAK", "+WPI", "+TERM", "+NXT"}

func (k AckKind) String() string {
	if int(k) < len(ackKindNames) {
		return ackKindNames[k]
	}
	return "unknown"
}

// Ack is a parsed ack body.
type Ack struct {
	Kind AckKind
	// Delay is the NAK redelivery delay; 0 means redeliver now. A delay
	// that does not parse is a plain NAK, as in the reference.
	Delay time.Duration
	// Reason is the +TERM reason, trimmed.
	Reason string
	// Next is the +NXT pull request body (after the keyword, trimmed), to
	// be parsed with ParsePullRequest and answered to the ack's reply-to.
	Next []byte
}

// Ack body keywords.
var (
	ackAck      = []byte("+ACK")
	ackOK       = []byte("+OK")
	ackNak      = []byte("-NAK")
	ackProgress = []byte("+WPI")
	ackTerm     = []byte("+TERM")
	ackNext     = []byte("+NXT")
)

// ParseAck classifies an ack body (the payload of a PUB to an ack
// subject) exactly as the reference does: empty, "+ACK" or "+OK" ack;
// a body starting with "+NXT", "-NAK" or "+TERM" is that kind with the rest
// as its argument; "+WPI" must match exactly. Anything else is AckUnknown,
// which the broker ignores. A NAK argument is JSON {"delay":<ns>} or a Go
// duration ("5s"). Next aliases body.
func ParseAck(body []byte) Ack {
	switch {
	case len(body) == 0, bytes.Equal(body, ackAck), bytes.Equal(body, ackOK):
		return Ack{Kind: AckAck}
	case bytes.HasPrefix(body, ackNext):
		return Ack{Kind: AckNext, Next: bytes.TrimSpace(body[len(ackNext):])}
	case bytes.HasPrefix(body, ackNak):
		return Ack{Kind: AckNak, Delay: nakDelay(bytes.TrimSpace(body[len(ackNak):]))}
	case bytes.Equal(body, ackProgress):
		return Ack{Kind: AckProgress}
	case bytes.HasPrefix(body, ackTerm):
		return Ack{Kind: AckTerm, Reason: string(bytes.TrimSpace(body[len(ackTerm):]))}
	}
	return Ack{Kind: AckUnknown}
}

// NakDelay is the JSON argument of "-NAK {…}".
type NakDelay struct {
	Delay time.Duration `json:"delay"`
}

func nakDelay(arg []byte) time.Duration {
	if len(arg) == 0 {
		return 0
	}
	var d time.Duration
	if arg[0] == '{' {
		var nd NakDelay
		if json.Unmarshal(arg, &nd) != nil {
			return 0
		}
		d = nd.Delay
	} else {
		var err error
		if d, err = time.ParseDuration(string(arg)); err != nil {
			return 0
		}
	}
	return max(d, 0)
}

// AppendAckBody appends the body a client would send for a, in a form
// ParseAck reads back (for tests and for forwarding acks to a topic's
// owner): "+ACK", "-NAK" or `-NAK {"delay":N}`, "+WPI", "+TERM[ reason]",
// "+NXT[ next]". AckUnknown appends nothing.
func AppendAckBody(dst []byte, a Ack) []byte {
	switch a.Kind {
	case AckAck:
		return append(dst, ackAck...)
	case AckNak:
		dst = append(dst, ackNak...)
		if a.Delay > 0 {
			dst = append(dst, ` {"delay":`...)
			dst = strconv.AppendInt(dst, int64(a.Delay), 10)
			dst = append(dst, '}')
		}
		return dst
	case AckProgress:
		return append(dst, ackProgress...)
	case AckTerm:
		dst = append(dst, ackTerm...)
		if a.Reason != "" {
			dst = append(append(dst, ' '), a.Reason...)
		}
		return dst
	case AckNext:
		dst = append(dst, ackNext...)
		if len(a.Next) > 0 {
			dst = append(append(dst, ' '), a.Next...)
		}
		return dst
	}
	return dst
}
