package jsapi

import (
	"fmt"
	"strconv"
	"time"
)

// Headers and statuses of JetStream publishing and delivery (spec §1.6,
// §2.4–§2.6). Header keys are case-sensitive in nats.go: use them byte for
// byte. Status lines are written by natsproto.AppendStatusHeader; this file
// only names them.

// Publish headers (client → server).
const (
	HdrMsgID                         = "Nats-Msg-Id"
	HdrExpectedStream                = "Nats-Expected-Stream"
	HdrExpectedLastSequence          = "Nats-Expected-Last-Sequence"
	HdrExpectedLastSubjectSequence   = "Nats-Expected-Last-Subject-Sequence"
	HdrExpectedLastSubjectSeqSubject = "Nats-Expected-Last-Subject-Sequence-Subject"
	HdrExpectedLastMsgID             = "Nats-Expected-Last-Msg-Id"
	HdrRequiredAPILevel              = "Nats-Required-Api-Level"
)

// Delivery and status headers (server → client).
const (
	HdrPendingMessages = "Nats-Pending-Messages" // with 408 and 409 statuses
	HdrPendingBytes    = "Nats-Pending-Bytes"    // with 408 and 409 statuses
	HdrPinID           = "Nats-Pin-Id"           // on messages to the pinned client
	HdrLastConsumer    = "Nats-Last-Consumer"    // with 100 Idle Heartbeat
	HdrLastStream      = "Nats-Last-Stream"      // with 100 Idle Heartbeat
	HdrSubject         = "Nats-Subject"          // with 503: the request's subject
	// HdrStatus and HdrDescription are the pseudo-headers nats.go makes
	// from the status line "NATS/1.0 <status> <description>".
	HdrStatus      = "Status"
	HdrDescription = "Description"
)

// Status codes of pull-consumer status messages (header only, empty
// payload, sent to the request's inbox).
const (
	StatusIdleHeartbeat      = 100
	StatusBadRequest         = 400
	StatusNoMessages         = 404
	StatusTimeout            = 408
	StatusConflict           = 409
	StatusPreconditionFailed = 412
	StatusPinIDMismatch      = 423
	// StatusNoResponders answers a pull on a consumer or stream that does
	// not exist: the reference has no subscription there, so its core
	// no-responders reply goes out (with HdrSubject).
	StatusNoResponders = 503
)

// Status descriptions. nats.go matches 409 descriptions by lower-cased
// substring ("message size exceeds maxbytes", "batch completed", "consumer
// deleted", "leadership change"), so keep these texts exact.
const (
	DescIdleHeartbeat      = "Idle Heartbeat"                // 100
	DescNoMessages         = "No Messages"                   // 404
	DescRequestTimeout     = "Request Timeout"               // 408
	DescMaxBytesExceeded   = "Message Size Exceeds MaxBytes" // 409
	DescBatchCompleted     = "Batch Completed"               // 409
	DescExceededMaxWaiting = "Exceeded MaxWaiting"           // 409
	DescConsumerPushBased  = "Consumer is push based"        // 409
	DescConsumerDeleted    = "Consumer Deleted"              // 409
	DescLeadershipChange   = "Leadership Change"             // 409
	DescPinIDMismatch      = "Nats-Pin-Id mismatch"          // 423, a pull with another pin id
	DescWrongPinID         = "Nats-Wrong-Pin-Id"             // 423 with pending headers: the pin moved while the request waited
	DescRequiredAPILevel   = "Required Api Level"            // 412
	descBadRequest         = "Bad Request"                   // 400
)

// DescBadRequest is the 400 description: "Bad Request - <detail>", or
// "Bad Request" when detail is empty.
func DescBadRequest(detail string) string {
	if detail == "" {
		return descBadRequest
	}
	return descBadRequest + " - " + detail
}

// DescExceededMaxRequestBatch is the 409 for a batch over max_batch.
func DescExceededMaxRequestBatch(n int) string {
	return "Exceeded MaxRequestBatch of " + strconv.Itoa(n)
}

// DescExceededMaxRequestExpires is the 409 for expires over max_expires
// (the reference prints the Go duration, e.g. "5s").
func DescExceededMaxRequestExpires(d time.Duration) string {
	return fmt.Sprintf("Exceeded MaxRequestExpires of %v", d)
}

// DescExceededMaxRequestMaxBytes is the 409 for max_bytes over the
// consumer's max_bytes.
func DescExceededMaxRequestMaxBytes(n int) string {
	return "Exceeded MaxRequestMaxBytes of " + strconv.Itoa(n)
}

// RequiredAPILevelOK reports whether a request's Nats-Required-Api-Level
// value ("" when absent) is met by APILevel. A value that does not parse is
// not met, as in the reference; an API request that fails gets
// ErrRequiredAPILevel, a pull request gets "412 Required Api Level".
func RequiredAPILevelOK(v string) bool {
	if v == "" {
		return true
	}
	n, err := strconv.Atoi(v)
	return err == nil && n <= APILevel
}
