// Package jsapi is the JetStream wire vocabulary of Strata's brokers
// (shared/specs/nats-wire.md §2, mapped onto Strata by §4): the API
// subjects and their parser, the JSON request and reply types, the enums
// nats.go decodes strictly, the err_code catalog, the publish and delivery
// headers and status texts, and the $JS.ACK reply subject and ack bodies.
//
// What it owns:
//   - ParseAPISubject: "$JS[.<domain>].API.<op>…" → APIRequest (Kind,
//     stream, consumer, filter). Unknown or malformed subjects are errors,
//     never a guess.
//   - JSON types whose tags match the reference server and nats.go v1.55:
//     StreamConfig/StreamInfo/StreamState, ConsumerConfig/ConsumerInfo,
//     PubAck, AccountInfo, PullRequest, paged list/names replies and the
//     Response envelope. Durations are time.Duration (integer ns on the
//     wire); times are time.Time, which callers set in UTC.
//   - Enums as string types. Replies must carry only values nats.go
//     decodes (Validate): an unknown value, including priority_policy
//     "none", makes the whole reply undecodable. PriorityNone is "" and
//     omitted.
//   - The error catalog (errors.go): one table of err_code, HTTP-like code
//     and description template, copied from the reference's errors.json.
//     The catalog rule: every error that crosses the wire to a JetStream
//     client is an *APIError built from a catalog row (a constructor such as
//     ErrStreamNotFound, or NewAPIError); codes are never invented inline
//     or reused for another meaning, because clients branch on err_code
//     alone. errors.Is compares *APIErrors by err_code.
//   - Header names, status codes and status descriptions (headers.go),
//     FormatAckSubject/ParseAckSubject and ParseAck.
//
// What it must not do: hold broker state, do I/O, start goroutines, log,
// or decide policy that needs a stream, a topic or an account (overlaps,
// limits, ownership, dedup). Handlers in the broker decide; this package
// only says how the decision looks on the wire. It imports the standard
// library only (internal/layering checks it).
//
// Concurrency: values are plain data; functions are pure and safe for
// concurrent use. The catalog is read-only after init.
//
// Caller's duties: decode request bodies with DecodeRequest and answer a
// decode error with ErrInvalidJSON (10025), as the reference does (enum
// fields reject unknown values while decoding); answer failed requests
// with ErrorResponse (each reply type in the reference's shape); call
// SetDefaults then Validate on configs before echoing them; answer
// features listed by StreamConfig.Unsupported with ErrStreamInvalidConfig
// instead of dropping them (nats.go checks the echo).
package jsapi
