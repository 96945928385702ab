package jsapi

import (
	"errors"
	"fmt"
	"strings"
)

// API subjects (spec §2.1–§2.2): requests arrive on "$JS.API.<op>" or, with
// a JetStream domain, "$JS.<domain>.API.<op>".

// APIPrefix is the subject prefix of every JetStream API request without a
// domain.
const APIPrefix = "$JS.API."

// Errors returned by ParseAPISubject, wrapped with the offending subject.
var (
	// ErrNotAPISubject: the subject does not start with "$JS.API." or
	// "$JS.<domain>.API.".
	ErrNotAPISubject = errors.New("jsapi: not a JetStream API subject")
	// ErrUnknownAPI: the prefix is right but the operation is not one this
	// package knows.
	ErrUnknownAPI = errors.New("jsapi: unknown JetStream API")
	// ErrMalformedAPISubject: a known operation with the wrong number of
	// tokens, an empty token, or a wildcard where a name belongs.
	ErrMalformedAPISubject = errors.New("jsapi: malformed JetStream API subject")
)

// Kind is the operation an API subject names.
type Kind uint8

// The kinds, in the order of spec §2.2. KindStreamMsgGet, KindDirectGet and
// KindConsumerDurableCreate are listed by the spec as "Later": they parse
// (so the broker can answer them deliberately) but InSubset reports false.
const (
	KindUnknown               Kind = iota
	KindAccountInfo                // INFO
	KindStreamCreate               // STREAM.CREATE.<s>
	KindStreamUpdate               // STREAM.UPDATE.<s>
	KindStreamInfo                 // STREAM.INFO.<s>
	KindStreamDelete               // STREAM.DELETE.<s>
	KindStreamPurge                // STREAM.PURGE.<s>
	KindStreamNames                // STREAM.NAMES
	KindStreamList                 // STREAM.LIST
	KindConsumerCreate             // CONSUMER.CREATE.<s>[.<c>[.<filter…>]]
	KindConsumerInfo               // CONSUMER.INFO.<s>.<c>
	KindConsumerDelete             // CONSUMER.DELETE.<s>.<c>
	KindConsumerNames              // CONSUMER.NAMES.<s>
	KindConsumerList               // CONSUMER.LIST.<s>
	KindConsumerNext               // CONSUMER.MSG.NEXT.<s>.<c>
	KindConsumerUnpin              // CONSUMER.UNPIN.<s>.<c>
	KindStreamMsgGet               // STREAM.MSG.GET.<s> (later)
	KindDirectGet                  // DIRECT.GET.<s>[.<subject…>] (later)
	KindConsumerDurableCreate      // CONSUMER.DURABLE.CREATE.<s>.<c> (later)
	numKinds
)

var kindInfo = [numKinds]struct {
	name     string // the operation tokens, as in the subject
	respType string // "type" of the JSON reply; "" when the reply is not JSON
	later    bool
}{
	KindUnknown:               {"", "", false},
	KindAccountInfo:           {"INFO", TypeAccountInfoResponse, false},
	KindStreamCreate:          {"STREAM.CREATE", TypeStreamCreateResponse, false},
	KindStreamUpdate:          {"STREAM.UPDATE", TypeStreamUpdateResponse, false},
	KindStreamInfo:            {"STREAM.INFO", TypeStreamInfoResponse, false},
	KindStreamDelete:          {"STREAM.DELETE", TypeStreamDeleteResponse, false},
	KindStreamPurge:           {"STREAM.PURGE", TypeStreamPurgeResponse, false},
	KindStreamNames:           {"STREAM.NAMES", TypeStreamNamesResponse, false},
	KindStreamList:            {"STREAM.LIST", TypeStreamListResponse, false},
	KindConsumerCreate:        {"CONSUMER.CREATE", TypeConsumerCreateResponse, false},
	KindConsumerInfo:          {"CONSUMER.INFO", TypeConsumerInfoResponse, false},
	KindConsumerDelete:        {"CONSUMER.DELETE", TypeConsumerDeleteResponse, false},
	KindConsumerNames:         {"CONSUMER.NAMES", TypeConsumerNamesResponse, false},
	KindConsumerList:          {"CONSUMER.LIST", TypeConsumerListResponse, false},
	KindConsumerNext:          {"CONSUMER.MSG.NEXT", "", false},
	KindConsumerUnpin:         {"CONSUMER.UNPIN", TypeConsumerUnpinResponse, false},
	KindStreamMsgGet:          {"STREAM.MSG.GET", TypeStreamMsgGetResponse, true},
	KindDirectGet:             {"DIRECT.GET", "", true},
	KindConsumerDurableCreate: {"CONSUMER.DURABLE.CREATE", TypeConsumerCreateResponse, true},
}

// String returns the operation as it appears in the subject, e.g.
// "STREAM.CREATE", or "UNKNOWN".
func (k Kind) String() string {
	if k == KindUnknown || k >= numKinds {
		return "UNKNOWN"
	}
	return kindInfo[k].name
}

// InSubset reports whether the kind is part of the JetStream subset Strata
// serves now (spec §2.2); false for the "Later" kinds and KindUnknown.
func (k Kind) InSubset() bool { return k > KindUnknown && k < numKinds && !kindInfo[k].later }

// ResponseType is the "type" value of this kind's JSON reply (success and
// error alike). It is "" for CONSUMER.MSG.NEXT and DIRECT.GET, which answer
// with messages, not with an API response.
func (k Kind) ResponseType() string {
	if k >= numKinds {
		return ""
	}
	return kindInfo[k].respType
}

// APIRequest is a parsed API subject. Which name fields are set depends on
// Kind; the others are empty.
type APIRequest struct {
	Kind Kind
	// Domain is the JetStream domain of "$JS.<domain>.API.…", "" for
	// "$JS.API.…".
	Domain string
	// Stream is the stream token, for every kind but INFO and
	// STREAM.NAMES/LIST.
	Stream string
	// Consumer is the consumer token. Empty for a legacy ephemeral
	// CONSUMER.CREATE.<s> (the name then comes from the body or is made up).
	Consumer string
	// Filter is the rest of the subject after the consumer in
	// CONSUMER.CREATE.<s>.<c>.<filter…> (it may contain '.', '*' and '>'),
	// or the subject in DIRECT.GET.<s>.<subject…>.
	Filter string
}

// Subject formats r back into the subject it was parsed from.
func (r APIRequest) Subject() string {
	var b strings.Builder
	b.WriteString("$JS.")
	if r.Domain != "" {
		b.WriteString(r.Domain)
		b.WriteByte('.')
	}
	b.WriteString("API.")
	b.WriteString(r.Kind.String())
	for _, t := range [...]string{r.Stream, r.Consumer, r.Filter} {
		if t != "" {
			b.WriteByte('.')
			b.WriteString(t)
		}
	}
	return b.String()
}

// ParseAPISubject parses a JetStream API request subject. It checks the
// structure only: which operation, how many tokens, none empty, no
// wildcard where a stream or consumer name belongs. Whether a name is a
// valid stream name (ValidStreamName) is the handler's question, because
// the reference answers a bad name with an API error, not with silence.
//
// An error wraps ErrNotAPISubject, ErrUnknownAPI or ErrMalformedAPISubject.
// The reference server does not reply to subjects it does not route, so a
// broker may drop such requests or answer them with ErrBadRequest.
func ParseAPISubject(subject string) (APIRequest, error) {
	var r APIRequest
	rest, ok := strings.CutPrefix(subject, APIPrefix)
	if !ok {
		// "$JS.<domain>.API.<op>"
		after, ok := strings.CutPrefix(subject, "$JS.")
		if !ok {
			return APIRequest{}, fmt.Errorf("%w: %q", ErrNotAPISubject, subject)
		}
		dom, tail, ok := strings.Cut(after, ".")
		if !ok || !validNameToken(dom) {
			return APIRequest{}, fmt.Errorf("%w: %q", ErrNotAPISubject, subject)
		}
		if rest, ok = strings.CutPrefix(tail, "API."); !ok {
			return APIRequest{}, fmt.Errorf("%w: %q", ErrNotAPISubject, subject)
		}
		r.Domain = dom
	}
	r.Kind, rest = lookupOp(rest)
	if r.Kind == KindUnknown {
		return APIRequest{}, fmt.Errorf("%w: %q", ErrUnknownAPI, subject)
	}
	if err := r.args(rest); err != nil {
		return APIRequest{}, fmt.Errorf("%w: %q: %s", ErrMalformedAPISubject, subject, err)
	}
	return r, nil
}

// lookupOp finds the operation rest starts with and returns what follows
// it (without the separating '.'). No operation is a token-prefix of
// another, so the first match is the only one.
func lookupOp(rest string) (Kind, string) {
	for k := KindUnknown + 1; k < numKinds; k++ {
		op := kindInfo[k].name
		if !strings.HasPrefix(rest, op) {
			continue
		}
		switch {
		case len(rest) == len(op):
			return k, ""
		case rest[len(op)] == '.':
			if len(rest) == len(op)+1 {
				return k, "." // a trailing '.': args rejects it
			}
			return k, rest[len(op)+1:]
		}
	}
	return KindUnknown, ""
}

// args fills the name fields from the tokens after the operation.
func (r *APIRequest) args(rest string) error {
	switch r.Kind {
	case KindAccountInfo, KindStreamNames, KindStreamList:
		if rest != "" {
			return errors.New("unexpected tokens")
		}
		return nil
	case KindConsumerCreate, KindDirectGet:
		// <s>[.<c>[.<filter…>]] or <s>[.<subject…>]
		s, tail, more := strings.Cut(rest, ".")
		if !validNameToken(s) {
			return errors.New("bad stream token")
		}
		r.Stream = s
		if !more {
			return nil
		}
		if r.Kind == KindDirectGet {
			if !validFilter(tail) {
				return errors.New("bad subject")
			}
			r.Filter = tail
			return nil
		}
		c, filter, more := strings.Cut(tail, ".")
		if !validNameToken(c) {
			return errors.New("bad consumer token")
		}
		r.Consumer = c
		if more {
			if !validFilter(filter) {
				return errors.New("bad filter subject")
			}
			r.Filter = filter
		}
		return nil
	case KindConsumerInfo, KindConsumerDelete, KindConsumerNext,
		KindConsumerUnpin, KindConsumerDurableCreate:
		s, c, ok := strings.Cut(rest, ".")
		if !ok || !validNameToken(s) || !validNameToken(c) {
			return errors.New("want <stream>.<consumer>")
		}
		r.Stream, r.Consumer = s, c
		return nil
	default: // one stream token
		if !validNameToken(rest) {
			return errors.New("want <stream>")
		}
		r.Stream = rest
		return nil
	}
}

// validNameToken: one non-empty subject token that is not a wildcard and
// has no whitespace or '.'.
func validNameToken(t string) bool {
	if t == "" || t == "*" || t == ">" {
		return false
	}
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '.', ' ', '\t', '\r', '\n':
			return false
		}
	}
	return true
}

// validFilter: a subscribe subject (wildcards allowed, '>' last only).
func validFilter(s string) bool {
	for {
		t, rest, more := strings.Cut(s, ".")
		if t == "" || (t == ">" && more) || strings.ContainsAny(t, " \t\r\n") {
			return false
		}
		if !more {
			return true
		}
		s = rest
	}
}

// ValidStreamName reports whether name is a legal JetStream stream name
// (spec §2.3): non-empty, without '.', '*', '>', '/', '\\', whitespace or
// control characters. Consumer names follow the same rule.
func ValidStreamName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c == 0x7f || strings.IndexByte(".*>/\\", c) >= 0 {
			return false
		}
	}
	return true
}
