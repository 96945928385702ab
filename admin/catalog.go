package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable snake_case error code of the admin API
// (shared/specs/admin-api.md "Errors"). Every code is one of the
// constants below and has one row in the catalog, which fixes its HTTP
// status; TestCatalog checks both. Clients test codes, never messages.
type Code string

// The catalog's codes. General ones first; the specific ones after them
// are those the routes answered before this package existed, kept
// because clients (strata admin, scripts) test them.
const (
	// General.
	CodeBadRequest       Code = "bad_request"
	CodeInvalidField     Code = "invalid_field"
	CodeInvalidBody      Code = "invalid_body"
	CodeUnauthorized     Code = "unauthorized"
	CodeForbidden        Code = "forbidden"
	CodeNotFound         Code = "not_found"
	CodeMethodNotAllowed Code = "method_not_allowed"
	CodeConflict         Code = "conflict"
	CodeAlreadyExists    Code = "already_exists"
	CodeNotEmpty         Code = "not_empty"
	CodeBodyTooLarge     Code = "body_too_large"
	CodeQuotaExceeded    Code = "quota_exceeded"
	CodeInternal         Code = "internal"
	CodeNotReady         Code = "not_ready"
	CodeNoOwner          Code = "no_owner"
	CodeTimeout          Code = "timeout"

	// Metadata, bookies and ledgers.
	CodeMetadataUnavailable Code = "metadata_unavailable"
	CodeLedgersUnavailable  Code = "ledgers_unavailable"
	CodeBookiesUnavailable  Code = "bookies_unavailable"
	CodeBadLedgerID         Code = "bad_ledger_id"
	CodeNoSuchLedger        Code = "no_such_ledger"
	CodeBadRange            Code = "bad_range"
	CodeBadFrom             Code = "bad_from"
	CodeBadTo               Code = "bad_to"
	CodeWrongBookie         Code = "wrong_bookie"

	// Topics, subscriptions, offload.
	CodeTopicNotFound        Code = "topic_not_found"
	CodeNamespaceNotFound    Code = "namespace_not_found"
	CodeInvalidSubscription  Code = "invalid_subscription"
	CodeSubscriptionNotFound Code = "subscription_not_found"
	CodeNoTier               Code = "no_tier"

	// Tenants, namespaces, tokens.
	CodeTenantNotFound Code = "tenant_not_found"
	CodeTokenNotFound  Code = "token_not_found"
	CodeUserNotFound   Code = "user_not_found"
	CodeNATSAuthOff    Code = "nats_auth_off"

	// Quotas.
	CodeQuotaUnavailable Code = "quota_unavailable"

	// Bundles and operations.
	CodeInvalidBundle     Code = "invalid_bundle"
	CodeBundleNotFound    Code = "bundle_not_found"
	CodeBrokerNotLive     Code = "broker_not_live"
	CodeOperationNotFound Code = "operation_not_found"

	// Audit.
	CodeTestHooksOff Code = "test_hooks_off"
)

// CodeInfo is one catalog row: a code, the HTTP status it is always
// answered with, and what it means.
type CodeInfo struct {
	Code        Code   `json:"code"`
	Status      int    `json:"status"`
	Description string `json:"description"`
}

var catalog = []CodeInfo{
	{CodeBadRequest, http.StatusBadRequest, "the request is malformed in a way no more specific code names"},
	{CodeInvalidField, http.StatusBadRequest, "a path or query parameter is malformed; field names it"},
	{CodeInvalidBody, http.StatusBadRequest, "the request body is not the JSON object the route takes (syntax, unknown field, wrong type, missing field, data after it); field names the field when there is one"},
	{CodeUnauthorized, http.StatusUnauthorized, "auth is on and the request has no valid bearer token"},
	{CodeForbidden, http.StatusForbidden, "the token is valid but may not do this (another tenant, or superuser only)"},
	{CodeNotFound, http.StatusNotFound, "no such path or object"},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, "the path exists but not with this method (Allow lists those it takes)"},
	{CodeConflict, http.StatusConflict, "the request conflicts with the object's current state (e.g. a version mismatch)"},
	{CodeAlreadyExists, http.StatusConflict, "the object already exists with another definition"},
	{CodeNotEmpty, http.StatusConflict, "the object is not empty: deleting it needs ?force=true"},
	{CodeBodyTooLarge, http.StatusRequestEntityTooLarge, "the request body is over MaxBodyBytes; it was not read further"},
	{CodeQuotaExceeded, http.StatusTooManyRequests, "a tenant quota refuses the request"},
	{CodeInternal, http.StatusInternalServerError, "the node failed to do what was asked; the message says why"},
	{CodeNotReady, http.StatusServiceUnavailable, "the node is not ready to answer this yet"},
	{CodeNoOwner, http.StatusServiceUnavailable, "the object has no owning broker yet (it is being placed), or its owner did not answer"},
	{CodeTimeout, http.StatusServiceUnavailable, "the answer did not come in time"},
	{CodeMetadataUnavailable, http.StatusServiceUnavailable, "the region's metadata (etcd) did not answer"},
	{CodeLedgersUnavailable, http.StatusServiceUnavailable, "the node's ledger client could not be opened"},
	{CodeBookiesUnavailable, http.StatusServiceUnavailable, "the ledger's bookies did not answer"},
	{CodeBadLedgerID, http.StatusBadRequest, "a ledger id is not a decimal integer from 0 to 2^63-1 without sign or leading zeros"},
	{CodeNoSuchLedger, http.StatusNotFound, "the region has no ledger with that id"},
	{CodeBadRange, http.StatusBadRequest, "an entry range is not 0 <= from <= to"},
	{CodeBadFrom, http.StatusBadRequest, "the from query parameter is not an integer"},
	{CodeBadTo, http.StatusBadRequest, "the to query parameter is not an integer"},
	{CodeWrongBookie, http.StatusConflict, "the request names another bookie than the one that answers: nothing changed"},
	{CodeTopicNotFound, http.StatusNotFound, "the region has no such topic"},
	{CodeNamespaceNotFound, http.StatusNotFound, "the tenant has no such namespace (or there is no such tenant)"},
	{CodeInvalidSubscription, http.StatusBadRequest, "the subscription name or definition is refused"},
	{CodeSubscriptionNotFound, http.StatusNotFound, "the topic has no such subscription"},
	{CodeNoTier, http.StatusConflict, "the region has no tier to offload to"},
	{CodeTenantNotFound, http.StatusNotFound, "the mesh has no such tenant"},
	{CodeTokenNotFound, http.StatusNotFound, "the mesh has no admin token with that id"},
	{CodeUserNotFound, http.StatusNotFound, "the tenant has no NATS user of that name"},
	{CodeNATSAuthOff, http.StatusConflict, "the mesh's NATS accounts are off (no auth.nats in the topology): clients need no credentials, so there are no users to manage"},
	{CodeQuotaUnavailable, http.StatusServiceUnavailable, "no quota coordinator of the region answered (none is elected yet, or quotas are not served on this node): the tenant's usage is not known here now"},
	{CodeInvalidBundle, http.StatusBadRequest, "a bundle range is not 0xLLLLLLLL_0xHHHHHHHH with low < high"},
	{CodeBundleNotFound, http.StatusNotFound, "the region has no such bundle"},
	{CodeBrokerNotLive, http.StatusBadRequest, "no live broker of the region has the name given"},
	{CodeOperationNotFound, http.StatusNotFound, "the region has no operation with that id"},
	{CodeTestHooksOff, http.StatusForbidden, "test hooks are off on this node (they are served only with STRATA_TEST_HOOKS=1, for tests)"},
}

var byCode = func() map[Code]CodeInfo {
	m := make(map[Code]CodeInfo, len(catalog))
	for _, c := range catalog {
		m[c.Code] = c
	}
	return m
}()

// Catalog returns a copy of the catalog, in declaration order.
func Catalog() []CodeInfo { return append([]CodeInfo(nil), catalog...) }

// Lookup returns code's catalog row.
func Lookup(code Code) (CodeInfo, bool) {
	c, ok := byCode[code]
	return c, ok
}

// Status is the HTTP status code is answered with (500 for a code not
// in the catalog, which TestCatalog keeps from happening).
func (c Code) Status() int {
	if info, ok := byCode[c]; ok {
		return info.Status
	}
	return http.StatusInternalServerError
}

// Error is an admin API error: a catalog code, a message for people and
// optionally the request field (body field, path or query parameter) at
// fault. On the wire: {"error": {"code", "message", "field"}} with the
// code's status.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Status is the HTTP status of e's code.
func (e *Error) Status() int { return e.Code.Status() }

// Errorf returns an *Error with code, about field ("" for none).
func Errorf(code Code, field, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Field: field}
}

// ErrorBody is the error shape on the wire.
type ErrorBody struct {
	Error Error `json:"error"`
}

// AsError returns err as an *Error: itself when it is (or wraps) one,
// else an internal error carrying err's text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// WriteJSON writes v as indented JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// WriteError writes err in the error shape with its code's status (an
// error that is not an *Error is internal, 500).
func WriteError(w http.ResponseWriter, err error) {
	e := AsError(err)
	WriteJSON(w, e.Status(), ErrorBody{Error: *e})
}
