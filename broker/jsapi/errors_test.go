package jsapi

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func TestCatalog(t *testing.T) {
	seen := map[ErrCode]bool{}
	for _, e := range catalog {
		if seen[e.ErrCode] {
			t.Errorf("%d twice", e.ErrCode)
		}
		seen[e.ErrCode] = true
		if e.ErrCode < 10000 || e.Code < 400 || e.Code > 599 || e.Template == "" {
			t.Errorf("bad row %+v", e)
		}
	}
	// Every ErrCode constant has a row: constants are declared in
	// errors.go; keep this list in step with them.
	for _, c := range []ErrCode{
		ErrCodeBadRequest, ErrCodeConsumerCreate, ErrCodeConsumerNameExist, ErrCodeConsumerNotFound,
		ErrCodeConsumerNameNotMatchSubject, ErrCodeInsufficientResources, ErrCodeInvalidJSON,
		ErrCodeMaximumConsumersLimit, ErrCodeMaximumStreamsLimit, ErrCodeNoMessageFound,
		ErrCodeNotEnabledForAccount, ErrCodeStreamInvalidConfig, ErrCodeStreamMessageExceedsMaximum,
		ErrCodeStreamMismatch, ErrCodeStreamNameInUse, ErrCodeStreamNotFound, ErrCodeStreamNotMatch,
		ErrCodeStreamSubjectOverlap, ErrCodeStreamWrongLastMsgID, ErrCodeStreamWrongLastSequence,
		ErrCodeNotEnabled, ErrCodeStreamStoreFailed, ErrCodeConsumerBadDurableName,
		ErrCodeConsumerNameContainsPathSep, ErrCodeStreamNameContainsPathSep,
		ErrCodeConsumerFilterSubjectMismatch, ErrCodeConsumerDurableAndNameMismatch,
		ErrCodeConsumerDuplicateFilterSubjects, ErrCodeConsumerOverlappingFilters, ErrCodeConsumerEmptyFilter,
		ErrCodeConsumerAlreadyExists, ErrCodeConsumerDoesNotExist, ErrCodeStreamWrongLastSequenceConstant,
		ErrCodeConsumerInvalidPriorityGroup, ErrCodeConsumerInvalidGroupName, ErrCodeRequiredAPILevel,
		ErrCodeQuotaExceeded,
	} {
		if _, ok := Lookup(c); !ok {
			t.Errorf("%d has no catalog row", c)
		}
	}
	if len(seen) != 37 {
		t.Errorf("catalog has %d rows; update the constant list above", len(seen))
	}
	if len(Catalog()) != len(catalog) {
		t.Error("Catalog copy")
	}
}

// The codes clients test for (spec §2.7) with their HTTP-like codes.
func TestSpecCodes(t *testing.T) {
	for _, tc := range []struct {
		err  *APIError
		code ErrCode
		http int
		desc string
	}{
		{ErrStreamNotFound(), 10059, 404, "stream not found"},
		{ErrConsumerNotFound(), 10014, 404, "consumer not found"},
		{ErrStreamNameInUse(), 10058, 400, "stream name already in use with a different configuration"},
		{ErrStreamWrongLastSequence(2), 10071, 400, "wrong last sequence: 2"},
		{NewAPIError(ErrCodeStreamWrongLastSequenceConstant), 10164, 400, "wrong last sequence"},
		{ErrStreamWrongLastMsgID("id-1"), 10070, 400, "wrong last msg ID: id-1"},
		{ErrStreamNotMatch(), 10060, 400, "expected stream does not match"},
		{ErrConsumerAlreadyExists(), 10148, 400, "consumer already exists"},
		{ErrConsumerDoesNotExist(), 10149, 400, "consumer does not exist"},
		{ErrMaximumConsumersLimit(), 10026, 400, "maximum consumers limit reached"},
		{ErrNoMessageFound(), 10037, 404, "no message found"},
		{ErrNotEnabledForAccount(), 10039, 503, "JetStream not enabled for account"},
		{ErrNotEnabled(), 10076, 503, "JetStream not enabled"},
		{ErrBadRequest(), 10003, 400, "bad request"},
		{ErrInvalidJSON(errors.New("unexpected end of JSON input")), 10025, 400, "invalid JSON: unexpected end of JSON input"},
		{ErrStreamInvalidConfig(errors.New("sources are not supported")), 10052, 500, "sources are not supported"},
		{ErrStreamMismatch(), 10056, 400, "stream name in subject does not match request"},
		{ErrStreamSubjectOverlap(), 10065, 400, "subjects overlap with an existing stream"},
		{ErrConsumerFilterSubjectMismatch(), 10131, 400, "Consumer create request did not match filtered subject from create subject"},
		{ErrConsumerNameNotMatchSubject(), 10017, 400, "consumer name in subject does not match durable name in request"},
		{ErrConsumerDurableAndNameMismatch(), 10132, 400, "Consumer Durable and Name have to be equal if both are provided"},
		{ErrConsumerDuplicateFilterSubjects(), 10136, 400, "consumer cannot have both FilterSubject and FilterSubjects specified"},
		{ErrStreamMessageExceedsMaximum(), 10054, 400, "message size exceeds maximum allowed"},
		{ErrStreamStoreFailed(errors.New("maximum messages exceeded")), 10077, 503, "maximum messages exceeded"},
		{ErrRequiredAPILevel(), 10185, 412, "JetStream minimum api level required"},
		{ErrConsumerCreate(errors.New("consumer is push based")), 10012, 500, "consumer is push based"},
		{ErrStreamNameContainsPathSep(), 10128, 400, "Stream name can not contain path separators"},
	} {
		e := tc.err
		if e.ErrCode != tc.code || e.Code != tc.http || e.Description != tc.desc {
			t.Errorf("got %+v, want %d/%d/%q", e, tc.code, tc.http, tc.desc)
		}
		if strings.Contains(e.Description, "{") {
			t.Errorf("unfilled placeholder: %q", e.Description)
		}
	}
}

func TestAPIErrorIs(t *testing.T) {
	err := fmt.Errorf("create ORDERS: %w", ErrStreamNameInUse())
	if !errors.Is(err, ErrStreamNameInUse()) || errors.Is(err, ErrStreamNotFound()) {
		t.Error("errors.Is by err_code")
	}
	if !errors.Is(ErrStreamWrongLastSequence(1), ErrStreamWrongLastSequence(99)) {
		t.Error("description must not matter")
	}
	if c, ok := ErrCodeOf(err); !ok || c != ErrCodeStreamNameInUse {
		t.Errorf("ErrCodeOf = %d %v", c, ok)
	}
	if _, ok := ErrCodeOf(errors.New("x")); ok {
		t.Error("ErrCodeOf plain error")
	}
	if s := ErrStreamNotFound().Error(); s != "stream not found (10059)" {
		t.Errorf("Error() = %q", s)
	}
	if e := NewAPIError(1); e.Code != 500 || e.ErrCode != 1 {
		t.Errorf("unknown code: %+v", e)
	}
	var nilErr *APIError
	if nilErr.Is(ErrBadRequest()) {
		t.Error("nil Is")
	}
}

// Placeholders in templates are only those the constructors fill.
func TestTemplatePlaceholders(t *testing.T) {
	re := regexp.MustCompile(`\{[a-z]+\}`)
	for _, e := range catalog {
		for _, p := range re.FindAllString(e.Template, -1) {
			if p != "{err}" && p != "{seq}" && p != "{id}" {
				t.Errorf("%d: placeholder %s has no constructor", e.ErrCode, p)
			}
		}
	}
}
