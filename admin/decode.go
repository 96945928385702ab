package admin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/tenancy"
)

// MaxBodyBytes is the largest request body any admin route accepts: 1 MiB.
// A body over it is refused with 413 body_too_large once that many bytes
// have been read (or at once when Content-Length says so): it is never
// read whole. Every request body of the API is a small JSON object; the
// limit leaves room for the tenant and policy documents to come.
const MaxBodyBytes = 1 << 20

// validator is a request body that checks itself after decoding (required
// fields, ranges); its error is an *Error naming the field.
type validator interface{ validate() *Error }

// DecodeBody decodes r's body into v, which must point to the route's
// request type, for every route that takes a body:
//
//   - a body over MaxBodyBytes: 413 body_too_large (not read further);
//   - an empty body (nothing or only whitespace): v unchanged when
//     emptyOK, else 400 invalid_body;
//   - not one JSON value, an unknown field, a wrong type, or anything but
//     whitespace after the value: 400 invalid_body, with Field naming the
//     field when there is one;
//   - then v's own checks (validate), 400 naming the field.
//
// It returns nil or an *Error to write as is.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) *Error {
	if r.ContentLength > MaxBodyBytes {
		return tooLarge()
	}
	if r.Body == nil {
		return decode(strings.NewReader(""), v, emptyOK)
	}
	return decode(http.MaxBytesReader(w, r.Body, MaxBodyBytes), v, emptyOK)
}

func tooLarge() *Error {
	return Errorf(CodeBodyTooLarge, "", "request body over %d bytes (MaxBodyBytes, 1 MiB): not read", MaxBodyBytes)
}

// decode is DecodeBody on a reader that is already limited.
func decode(body io.Reader, v any, emptyOK bool) *Error {
	br := bufio.NewReader(body)
	if empty, err := onlySpace(br); err != nil {
		return readError(err)
	} else if empty {
		if !emptyOK {
			return Errorf(CodeInvalidBody, "", "request body is empty: this route takes a JSON object")
		}
		return nil
	}
	dec := json.NewDecoder(br)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return jsonError(err)
	}
	if e := decodeValue(raw, v); e != nil {
		return e
	}
	// Only whitespace may follow the value, up to the end of the body
	// (still within MaxBodyBytes).
	rest := io.MultiReader(dec.Buffered(), br)
	if empty, err := onlySpace(bufio.NewReader(rest)); err != nil {
		return readError(err)
	} else if !empty {
		return Errorf(CodeInvalidBody, "", "request body: data after the JSON value")
	}
	if val, ok := v.(validator); ok {
		if e := val.validate(); e != nil {
			return e
		}
	}
	return nil
}

// decodeValue decodes one JSON value into v strictly: no unknown field,
// and — where v is a struct — its keys spelled exactly as the fields'
// (encoding/json matches them case-insensitively: "Retention" would set
// retention) and not null.
func decodeValue(raw json.RawMessage, v any) *Error {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && string(raw) == "null" {
		return Errorf(CodeInvalidBody, "", "request body: want a JSON object, not null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e := jsonError(err)
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			var doc any
			if json.Unmarshal(raw, &doc) == nil {
				if p, ok := typeErrorPath(doc, t, strings.Split(te.Field, "."), ""); ok && p != te.Field {
					e.Field = p
					e.Message = strings.Replace(e.Message, strconv.Quote(te.Field), strconv.Quote(p), 1)
				}
			}
		}
		return e
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return jsonError(err)
	}
	return exactKeys(generic, t, "")
}

// typeErrorPath finds the value encoding/json refused as field segs (a
// path without map keys or list indexes: "quotas.regions.publish_rate")
// in the document val of type t, and returns its whole path
// ("quotas.regions.us-east.publish_rate"); ok false when it cannot tell.
func typeErrorPath(val any, t reflect.Type, segs []string, path string) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	if len(segs) == 0 && !jsonFits(val, t) {
		return path, true
	}
	switch t.Kind() {
	case reflect.Map:
		m, _ := val.(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok := typeErrorPath(m[k], t.Elem(), segs, join(k)); ok {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		l, _ := val.([]any)
		for i, x := range l {
			if p, ok := typeErrorPath(x, t.Elem(), segs, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	case reflect.Struct:
		m, _ := val.(map[string]any)
		if len(segs) == 0 || m == nil {
			return "", false
		}
		fields := map[string]reflect.Type{}
		collectFields(t, fields)
		ft, known := fields[segs[0]]
		sub, present := m[segs[0]]
		if known && present {
			return typeErrorPath(sub, ft, segs[1:], join(segs[0]))
		}
	}
	return "", false
}

// jsonFits reports whether the decoded JSON value val can be of Go type
// t as encoding/json decodes it (types that decode themselves fit
// anything: their refusals are not told apart here).
func jsonFits(val any, t reflect.Type) bool {
	if val == nil || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		_, ok := val.(map[string]any)
		return ok
	case reflect.Slice, reflect.Array:
		_, ok := val.([]any)
		return ok
	case reflect.String:
		_, ok := val.(string)
		return ok
	case reflect.Bool:
		_, ok := val.(bool)
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f, ok := val.(float64)
		return ok && f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 && !reflect.New(t).Elem().OverflowInt(int64(f))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f, ok := val.(float64)
		return ok && f == math.Trunc(f) && f >= 0 && f < 1<<64 && !reflect.New(t).Elem().OverflowUint(uint64(f))
	case reflect.Float32, reflect.Float64:
		_, ok := val.(float64)
		return ok
	}
	return true
}

// exactKeys checks that every object key in val names a field of t (a
// struct's json tags, recursively through pointers, slices and maps)
// exactly.
func exactKeys(val any, t reflect.Type, path string) *Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := val.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := map[string]reflect.Type{}
			collectFields(t, fields)
			for k, sub := range x {
				ft, ok := fields[k]
				name := k
				if path != "" {
					name = path + "." + k
				}
				if !ok {
					return Errorf(CodeInvalidBody, name, "request body: unknown field %q (field names are lower case, e.g. %q)", name, strings.ToLower(k))
				}
				if e := exactKeys(sub, ft, name); e != nil {
					return e
				}
			}
		case reflect.Map:
			for k, sub := range x {
				if e := exactKeys(sub, t.Elem(), path+"."+k); e != nil {
					return e
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, sub := range x {
				if e := exactKeys(sub, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); e != nil {
					return e
				}
			}
		}
	}
	return nil
}

// collectFields maps t's JSON field names to their types (embedded
// structs' fields included, as encoding/json flattens them).
func collectFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectFields(ft, out)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

// onlySpace reports whether br holds only JSON whitespace until EOF,
// consuming the whitespace it reads (the first other byte is unread).
func onlySpace(br *bufio.Reader) (bool, error) {
	for {
		c, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return false, br.UnreadByte()
		}
	}
}

func readError(err error) *Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return tooLarge()
	}
	return Errorf(CodeInvalidBody, "", "reading the request body: %v", err)
}

// jsonError words a json.Decoder error, naming the field at fault.
func jsonError(err error) *Error {
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return tooLarge()
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return Errorf(CodeInvalidBody, "", "request body: want a JSON object, not %s", te.Value)
		}
		return Errorf(CodeInvalidBody, field, "request body: field %q: want %s, not %s", field, jsonKind(te.Type.String()), te.Value)
	case errors.As(err, &se):
		return Errorf(CodeInvalidBody, "", "request body is not JSON: %v (at byte %d)", se, se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(CodeInvalidBody, "", "request body: the JSON value is cut short")
	}
	if f, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
		field := strings.TrimSuffix(f, `"`)
		return Errorf(CodeInvalidBody, field, "request body: unknown field %q", field)
	}
	return Errorf(CodeInvalidBody, "", "request body: %v", err)
}

// jsonKind names a Go type as the JSON it takes.
func jsonKind(goType string) string {
	t := strings.TrimPrefix(goType, "*")
	switch {
	case t == "tenancy.Duration":
		return `a duration such as "90s", "5m" or "7d"`
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return "an object"
}

// Path and query parameters. Each helper returns the parsed value or an
// *Error (400) whose Field is the parameter's name in the route pattern.

// Token returns path parameter name when it is a name token
// (tenancy.ValidToken: tenant, namespace, topic, subscription…), else a
// 400 invalid_field naming it.
func Token(r *http.Request, name string) (string, *Error) {
	return tokenAs(r, name, CodeInvalidField)
}

// tokenAs is Token answering code (400) for a bad token.
func tokenAs(r *http.Request, name string, code Code) (string, *Error) {
	s := r.PathValue(name)
	if err := tenancy.CheckToken(paramWhat(name), s); err != nil {
		return "", Errorf(code, name, "%v", strings.TrimPrefix(err.Error(), tenancy.ErrInvalidName.Error()+": "))
	}
	return s, nil
}

// paramWhat names a path parameter for people.
func paramWhat(name string) string {
	switch name {
	case "t":
		return "tenant"
	case "ns":
		return "namespace"
	case "sub":
		return "subscription"
	}
	return name
}

// TopicName returns the topic of path parameters {t}, {ns} and {topic}.
func TopicName(r *http.Request) (tenancy.Name, *Error) {
	var n tenancy.Name
	var e *Error
	if n.Tenant, e = Token(r, "t"); e != nil {
		return n, e
	}
	if n.Namespace, e = Token(r, "ns"); e != nil {
		return n, e
	}
	n.Topic, e = Token(r, "topic")
	return n, e
}

// LedgerID returns path parameter {id} as a ledger id: decimal, 0 to
// MaxInt64, no sign or leading zeros.
func LedgerID(r *http.Request) (int64, *Error) {
	return ParseLedgerID(r.PathValue("id"))
}

// ParseLedgerID parses a ledger id as LedgerID does.
func ParseLedgerID(raw string) (int64, *Error) {
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != raw {
		return 0, Errorf(CodeBadLedgerID, "id", "ledger id %q: want an integer from 0 to %d, in decimal without sign or leading zeros", raw, int64(math.MaxInt64))
	}
	return id, nil
}

// BundleID returns the bundle of path parameters {t}, {ns} and {range}.
func BundleID(r *http.Request) (bundle.ID, *Error) {
	t, e := Token(r, "t")
	if e != nil {
		return bundle.ID{}, e
	}
	ns, e := Token(r, "ns")
	if e != nil {
		return bundle.ID{}, e
	}
	rng, err := bundle.ParseRange(r.PathValue("range"))
	if err != nil {
		return bundle.ID{}, Errorf(CodeInvalidBundle, "range", "%v", err)
	}
	return bundle.ID{Tenant: t, Namespace: ns, Range: rng}, nil
}

// OperationID returns path parameter {id} of an operation: 1 to 64
// letters, digits, '-' or '_'.
func OperationID(r *http.Request) (string, *Error) {
	s := r.PathValue("id")
	if len(s) > 64 || !tenancy.ValidToken(s) {
		return "", Errorf(CodeInvalidField, "id", "operation id %q: want 1 to 64 of [A-Za-z0-9_-]", s)
	}
	return s, nil
}

// QueryInt returns query parameter name as an integer, def when absent;
// code is the error's code (400).
func QueryInt(r *http.Request, name string, def int64, code Code) (int64, *Error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, Errorf(code, name, "%s=%s is not an integer", name, strconv.Quote(s))
	}
	return v, nil
}
