package jsapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The error catalog (spec §2.7, §2.3–§2.5). Errors that cross the wire to
// JetStream clients carry an err_code from this one table; clients branch on
// err_code only, so codes, HTTP-like codes and description templates are
// copied from the reference server's errors.json and never change. To add
// an error: add an ErrCode constant and a catalog row (and, if handlers use
// it, a constructor); TestCatalog checks every constant has a row.

// ErrCode is a JetStream err_code.
type ErrCode uint16

// The err_codes Strata sends. The names follow the reference's constants
// (JS…Err) without the prefix.
const (
	ErrCodeBadRequest                      ErrCode = 10003
	ErrCodeConsumerCreate                  ErrCode = 10012
	ErrCodeConsumerNameExist               ErrCode = 10013
	ErrCodeConsumerNotFound                ErrCode = 10014
	ErrCodeConsumerNameNotMatchSubject     ErrCode = 10017
	ErrCodeInsufficientResources           ErrCode = 10023
	ErrCodeInvalidJSON                     ErrCode = 10025
	ErrCodeMaximumConsumersLimit           ErrCode = 10026
	ErrCodeMaximumStreamsLimit             ErrCode = 10027
	ErrCodeNoMessageFound                  ErrCode = 10037
	ErrCodeNotEnabledForAccount            ErrCode = 10039
	ErrCodeStreamInvalidConfig             ErrCode = 10052
	ErrCodeStreamMessageExceedsMaximum     ErrCode = 10054
	ErrCodeStreamMismatch                  ErrCode = 10056
	ErrCodeStreamNameInUse                 ErrCode = 10058
	ErrCodeStreamNotFound                  ErrCode = 10059
	ErrCodeStreamNotMatch                  ErrCode = 10060
	ErrCodeStreamSubjectOverlap            ErrCode = 10065
	ErrCodeStreamWrongLastMsgID            ErrCode = 10070
	ErrCodeStreamWrongLastSequence         ErrCode = 10071
	ErrCodeNotEnabled                      ErrCode = 10076
	ErrCodeStreamStoreFailed               ErrCode = 10077
	ErrCodeConsumerBadDurableName          ErrCode = 10103
	ErrCodeConsumerNameContainsPathSep     ErrCode = 10127
	ErrCodeStreamNameContainsPathSep       ErrCode = 10128
	ErrCodeConsumerFilterSubjectMismatch   ErrCode = 10131
	ErrCodeConsumerDurableAndNameMismatch  ErrCode = 10132
	ErrCodeConsumerDuplicateFilterSubjects ErrCode = 10136
	ErrCodeConsumerOverlappingFilters      ErrCode = 10138
	ErrCodeConsumerEmptyFilter             ErrCode = 10139
	ErrCodeConsumerAlreadyExists           ErrCode = 10148
	ErrCodeConsumerDoesNotExist            ErrCode = 10149
	ErrCodeConsumerInvalidPriorityGroup    ErrCode = 10160
	ErrCodeConsumerInvalidGroupName        ErrCode = 10162
	ErrCodeStreamWrongLastSequenceConstant ErrCode = 10164
	ErrCodeRequiredAPILevel                ErrCode = 10185
	// ErrCodeQuotaExceeded is Strata's own (outside the reference's
	// range): a tenant's quota refused the request (publish rate or
	// bytes, storage, topics, consumers, a backlog quota); the
	// description names the tenant, the quota, its limit and its use.
	ErrCodeQuotaExceeded ErrCode = 10429
)

// CatalogEntry is one row of the catalog. Template may hold placeholders
// such as {seq}, {id} or {err}, filled by the constructors.
type CatalogEntry struct {
	ErrCode  ErrCode
	Code     int // HTTP-like status
	Template string
}

// catalog is the one table. Codes and texts are the reference's
// (nats-server v2.15 errors.json).
var catalog = []CatalogEntry{
	{ErrCodeBadRequest, 400, "bad request"},
	{ErrCodeConsumerCreate, 500, "{err}"},
	{ErrCodeConsumerNameExist, 400, "consumer name already in use"},
	{ErrCodeConsumerNotFound, 404, "consumer not found"},
	{ErrCodeConsumerNameNotMatchSubject, 400, "consumer name in subject does not match durable name in request"},
	{ErrCodeInsufficientResources, 503, "insufficient resources"},
	{ErrCodeInvalidJSON, 400, "invalid JSON: {err}"},
	{ErrCodeMaximumConsumersLimit, 400, "maximum consumers limit reached"},
	{ErrCodeMaximumStreamsLimit, 400, "maximum number of streams reached"},
	{ErrCodeNoMessageFound, 404, "no message found"},
	{ErrCodeNotEnabledForAccount, 503, "JetStream not enabled for account"},
	{ErrCodeStreamInvalidConfig, 500, "{err}"},
	{ErrCodeStreamMessageExceedsMaximum, 400, "message size exceeds maximum allowed"},
	{ErrCodeStreamMismatch, 400, "stream name in subject does not match request"},
	{ErrCodeStreamNameInUse, 400, "stream name already in use with a different configuration"},
	{ErrCodeStreamNotFound, 404, "stream not found"},
	{ErrCodeStreamNotMatch, 400, "expected stream does not match"},
	{ErrCodeStreamSubjectOverlap, 400, "subjects overlap with an existing stream"},
	{ErrCodeStreamWrongLastMsgID, 400, "wrong last msg ID: {id}"},
	{ErrCodeStreamWrongLastSequence, 400, "wrong last sequence: {seq}"},
	{ErrCodeNotEnabled, 503, "JetStream not enabled"},
	{ErrCodeStreamStoreFailed, 503, "{err}"},
	{ErrCodeConsumerBadDurableName, 400, "durable name can not contain '.', '*', '>'"},
	{ErrCodeConsumerNameContainsPathSep, 400, "Consumer name can not contain path separators"},
	{ErrCodeStreamNameContainsPathSep, 400, "Stream name can not contain path separators"},
	{ErrCodeConsumerFilterSubjectMismatch, 400, "Consumer create request did not match filtered subject from create subject"},
	{ErrCodeConsumerDurableAndNameMismatch, 400, "Consumer Durable and Name have to be equal if both are provided"},
	{ErrCodeConsumerDuplicateFilterSubjects, 400, "consumer cannot have both FilterSubject and FilterSubjects specified"},
	{ErrCodeConsumerOverlappingFilters, 400, "consumer subject filters cannot overlap"},
	{ErrCodeConsumerEmptyFilter, 400, "consumer filter in FilterSubjects cannot be empty"},
	{ErrCodeConsumerAlreadyExists, 400, "consumer already exists"},
	{ErrCodeConsumerDoesNotExist, 400, "consumer does not exist"},
	{ErrCodeConsumerInvalidPriorityGroup, 400, "Provided priority group does not exist for this consumer"},
	{ErrCodeConsumerInvalidGroupName, 400, "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters"},
	{ErrCodeStreamWrongLastSequenceConstant, 400, "wrong last sequence"},
	{ErrCodeRequiredAPILevel, 412, "JetStream minimum api level required"},
	{ErrCodeQuotaExceeded, 429, "{err}"},
}

var catalogIndex = func() map[ErrCode]int {
	m := make(map[ErrCode]int, len(catalog))
	for i, e := range catalog {
		m[e.ErrCode] = i
	}
	return m
}()

// Catalog returns a copy of the catalog, in err_code order of declaration.
func Catalog() []CatalogEntry { return append([]CatalogEntry(nil), catalog...) }

// Lookup returns the catalog row of c.
func Lookup(c ErrCode) (CatalogEntry, bool) {
	i, ok := catalogIndex[c]
	if !ok {
		return CatalogEntry{}, false
	}
	return catalog[i], true
}

// APIError is the "error" object of an API reply or a PubAck:
// {"code":404,"err_code":10059,"description":"stream not found"}.
// It implements error; errors.Is matches two APIErrors by ErrCode alone,
// as clients do.
type APIError struct {
	Code        int     `json:"code"`
	ErrCode     ErrCode `json:"err_code,omitempty"`
	Description string  `json:"description,omitempty"`
}

// Error implements error in the reference's format: "<description> (<err_code>)".
func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d)", e.Description, e.ErrCode)
}

// Is reports whether target is an *APIError with the same ErrCode.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && e != nil && t != nil && e.ErrCode == t.ErrCode
}

// ErrCodeOf returns the err_code of the first *APIError in err's chain.
func ErrCodeOf(err error) (ErrCode, bool) {
	var ae *APIError
	if errors.As(err, &ae) && ae != nil {
		return ae.ErrCode, true
	}
	return 0, false
}

// NewAPIError builds the error for catalog row c, replacing each
// placeholder kv[2i] (e.g. "{seq}") with kv[2i+1]. A code missing from the
// catalog is a programming error; it yields a 500 that names the code.
func NewAPIError(c ErrCode, kv ...string) *APIError {
	e, ok := Lookup(c)
	if !ok {
		return &APIError{Code: 500, ErrCode: c, Description: "unknown error " + strconv.Itoa(int(c))}
	}
	d := e.Template
	if len(kv) > 0 {
		d = strings.NewReplacer(kv...).Replace(d)
	}
	return &APIError{Code: e.Code, ErrCode: c, Description: d}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Constructors for the errors handlers send. Each returns a fresh value.

// ErrBadRequest is 10003.
func ErrBadRequest() *APIError { return NewAPIError(ErrCodeBadRequest) }

// ErrConsumerCreate is 10012 with the given reason (e.g. "consumer is push
// based" for a deliver_subject, or an unsupported ack_policy).
func ErrConsumerCreate(err error) *APIError {
	return NewAPIError(ErrCodeConsumerCreate, "{err}", errText(err))
}

// ErrConsumerNotFound is 10014 (nats.go ErrConsumerNotFound).
func ErrConsumerNotFound() *APIError { return NewAPIError(ErrCodeConsumerNotFound) }

// ErrConsumerNameNotMatchSubject is 10017.
func ErrConsumerNameNotMatchSubject() *APIError {
	return NewAPIError(ErrCodeConsumerNameNotMatchSubject)
}

// ErrInvalidJSON is 10025: a request body that does not decode.
func ErrInvalidJSON(err error) *APIError {
	return NewAPIError(ErrCodeInvalidJSON, "{err}", errText(err))
}

// ErrMaximumConsumersLimit is 10026.
func ErrMaximumConsumersLimit() *APIError { return NewAPIError(ErrCodeMaximumConsumersLimit) }

// ErrNoMessageFound is 10037.
func ErrNoMessageFound() *APIError { return NewAPIError(ErrCodeNoMessageFound) }

// ErrNotEnabledForAccount is 10039.
func ErrNotEnabledForAccount() *APIError { return NewAPIError(ErrCodeNotEnabledForAccount) }

// ErrNotEnabled is 10076.
func ErrNotEnabled() *APIError { return NewAPIError(ErrCodeNotEnabled) }

// ErrStreamInvalidConfig is 10052 with the reason (e.g. an unsupported
// feature, or a stream name that is not a valid Strata token).
func ErrStreamInvalidConfig(err error) *APIError {
	return NewAPIError(ErrCodeStreamInvalidConfig, "{err}", errText(err))
}

// ErrStreamMessageExceedsMaximum is 10054 (bigger than max_msg_size).
func ErrStreamMessageExceedsMaximum() *APIError {
	return NewAPIError(ErrCodeStreamMessageExceedsMaximum)
}

// ErrStreamMismatch is 10056: the name in the subject and body differ.
func ErrStreamMismatch() *APIError { return NewAPIError(ErrCodeStreamMismatch) }

// ErrStreamNameInUse is 10058: CREATE with a different config.
func ErrStreamNameInUse() *APIError { return NewAPIError(ErrCodeStreamNameInUse) }

// ErrStreamNotFound is 10059 (drives nats.go CreateOrUpdateStream).
func ErrStreamNotFound() *APIError { return NewAPIError(ErrCodeStreamNotFound) }

// ErrStreamNotMatch is 10060: Nats-Expected-Stream does not match.
func ErrStreamNotMatch() *APIError { return NewAPIError(ErrCodeStreamNotMatch) }

// ErrStreamSubjectOverlap is 10065.
func ErrStreamSubjectOverlap() *APIError { return NewAPIError(ErrCodeStreamSubjectOverlap) }

// ErrStreamWrongLastMsgID is 10070; id is the stream's actual last msg id.
func ErrStreamWrongLastMsgID(id string) *APIError {
	return NewAPIError(ErrCodeStreamWrongLastMsgID, "{id}", id)
}

// ErrStreamWrongLastSequence is 10071; seq is the actual last sequence
// (of the stream, or of the subject for …-Subject-Sequence).
func ErrStreamWrongLastSequence(seq uint64) *APIError {
	return NewAPIError(ErrCodeStreamWrongLastSequence, "{seq}", strconv.FormatUint(seq, 10))
}

// ErrStreamStoreFailed is 10077: the store refused the message (e.g. a
// discard:new limit).
func ErrStreamStoreFailed(err error) *APIError {
	return NewAPIError(ErrCodeStreamStoreFailed, "{err}", errText(err))
}

// ErrStreamNameContainsPathSep is 10128.
func ErrStreamNameContainsPathSep() *APIError {
	return NewAPIError(ErrCodeStreamNameContainsPathSep)
}

// ErrConsumerFilterSubjectMismatch is 10131: the filter in the CREATE
// subject differs from the config's.
func ErrConsumerFilterSubjectMismatch() *APIError {
	return NewAPIError(ErrCodeConsumerFilterSubjectMismatch)
}

// ErrConsumerDurableAndNameMismatch is 10132.
func ErrConsumerDurableAndNameMismatch() *APIError {
	return NewAPIError(ErrCodeConsumerDurableAndNameMismatch)
}

// ErrConsumerDuplicateFilterSubjects is 10136: both filter_subject and
// filter_subjects.
func ErrConsumerDuplicateFilterSubjects() *APIError {
	return NewAPIError(ErrCodeConsumerDuplicateFilterSubjects)
}

// ErrConsumerAlreadyExists is 10148: action "create" on a consumer that
// exists with a different config.
func ErrConsumerAlreadyExists() *APIError { return NewAPIError(ErrCodeConsumerAlreadyExists) }

// ErrConsumerDoesNotExist is 10149: action "update" on a missing consumer.
func ErrConsumerDoesNotExist() *APIError { return NewAPIError(ErrCodeConsumerDoesNotExist) }

// ErrConsumerInvalidPriorityGroup is 10160: CONSUMER.UNPIN (or a pull)
// names a group the consumer does not have.
func ErrConsumerInvalidPriorityGroup() *APIError {
	return NewAPIError(ErrCodeConsumerInvalidPriorityGroup)
}

// ErrConsumerInvalidGroupName is 10162: a priority group name that is not
// 1–16 of A-Z, a-z, 0-9, '-', '_', '/', '=' (ValidPriorityGroup).
func ErrConsumerInvalidGroupName() *APIError { return NewAPIError(ErrCodeConsumerInvalidGroupName) }

// ErrRequiredAPILevel is 10185 (412): Nats-Required-Api-Level above ours.
func ErrRequiredAPILevel() *APIError { return NewAPIError(ErrCodeRequiredAPILevel) }

// ErrQuotaExceeded is a tenant quota's refusal (429, 10429); err's text
// names the tenant, the quota, its limit and its use.
func ErrQuotaExceeded(err error) *APIError {
	return NewAPIError(ErrCodeQuotaExceeded, "{err}", err.Error())
}
