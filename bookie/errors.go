package bookie

import (
	"errors"
	"strings"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// Errors of the bookie service besides the storage engine's (which the
// client returns as they are: errors.Is(err, storage.ErrFenced) holds for
// an add refused with CODE_FENCED).
var (
	// ErrWrongInstance: the request named a bookie instance other than the
	// one serving (the bookie lost or replaced its disk since the caller
	// learned the instance). CODE_WRONG_INSTANCE on the wire.
	ErrWrongInstance = errors.New("bookie: wrong instance")
	// ErrInvalid: the request was malformed, as found by the service's
	// checks or the engine's. It is storage.ErrInvalid itself, so either
	// name matches. CODE_INVALID on the wire.
	ErrInvalid = storage.ErrInvalid
	// ErrInternal: the bookie failed for a reason without a code of its
	// own, or answered with a code this client does not know.
	// CODE_INTERNAL on the wire.
	ErrInternal = errors.New("bookie: internal error")
	// ErrStreamClosed: Send on an AddStream after Close, or after the
	// stream broke (the error then also wraps the cause).
	ErrStreamClosed = errors.New("bookie: add stream closed")
	// ErrCookieMismatch: the cookie on disk and the one in etcd, or the
	// cookie and the configured bookie id, disagree; the bookie refuses to
	// start (see cookie.go).
	ErrCookieMismatch = errors.New("bookie: cookie mismatch")
)

// codeTable is the one catalogue mapping codes to errors, both ways.
var codeTable = []struct {
	code bookiepb.Code
	err  error
}{
	{bookiepb.Code_CODE_FENCED, storage.ErrFenced},
	{bookiepb.Code_CODE_BAD_MASTER_KEY, storage.ErrMasterKey},
	{bookiepb.Code_CODE_NO_LEDGER, storage.ErrNoLedger},
	{bookiepb.Code_CODE_NO_ENTRY, storage.ErrNoEntry},
	{bookiepb.Code_CODE_CORRUPT, storage.ErrCorrupt},
	{bookiepb.Code_CODE_READ_ONLY, storage.ErrReadOnly},
	{bookiepb.Code_CODE_WRONG_INSTANCE, ErrWrongInstance},
	{bookiepb.Code_CODE_CLOSED, storage.ErrClosed},
	{bookiepb.Code_CODE_INVALID, ErrInvalid},
	{bookiepb.Code_CODE_INTERNAL, ErrInternal},
}

// CodeOf is the wire code for err: CODE_OK for nil, the code of the first
// catalogued error err matches (errors.Is), else CODE_INTERNAL.
func CodeOf(err error) bookiepb.Code {
	if err == nil {
		return bookiepb.Code_CODE_OK
	}
	for _, c := range codeTable {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return bookiepb.Code_CODE_INTERNAL
}

// CodeError is a non-OK code received from a bookie. errors.Is(err,
// storage.ErrFenced) (and the like) holds for it through Unwrap.
type CodeError struct {
	Code    bookiepb.Code
	Message string // the bookie's detail; may be empty
}

// ErrorOf turns a response code back into an error: nil for CODE_OK, a
// *CodeError otherwise. An unknown or missing code unwraps to ErrInternal.
func ErrorOf(code bookiepb.Code, message string) error {
	if code == bookiepb.Code_CODE_OK {
		return nil
	}
	return &CodeError{Code: code, Message: message}
}

// Error is the bookie's message, prefixed with the code's sentinel text
// when the message does not already contain it.
func (e *CodeError) Error() string {
	base := e.Unwrap().Error()
	if e.Unwrap() == ErrInternal && e.Code != bookiepb.Code_CODE_INTERNAL {
		base += " (unexpected response code " + e.Code.String() + ")"
	}
	switch {
	case e.Message == "":
		return base
	case strings.Contains(e.Message, base):
		return e.Message
	default:
		return base + ": " + e.Message
	}
}

// Unwrap returns the sentinel error of the code.
func (e *CodeError) Unwrap() error {
	for _, c := range codeTable {
		if c.code == e.Code {
			return c.err
		}
	}
	return ErrInternal
}
