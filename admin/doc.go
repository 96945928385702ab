// Package admin is Strata's admin HTTP API (shared/specs/admin-api.md,
// docs/admin-api.md, docs/admin-api.yaml): every route, its request and
// response types, the one error catalog, and the client that `strata
// admin`, `strata status`, tools and tests use.
//
// It owns:
//   - the route table (Routes): for each route its method, pattern, who
//     may call it (Policy) and its handler. Handlers check path and query
//     parameters (Token, TopicName, LedgerID, BundleID, …: 400 naming the
//     parameter), decode bodies with DecodeBody (MaxBodyBytes, 413 before
//     the body is read whole; unknown fields, wrong types and trailing
//     data are 400 naming the field), ask a backend, and answer JSON;
//   - the wire types of every request and answer (BookieView, TopicStats,
//     OffloadStatus, …): the JSON on the wire is theirs;
//   - the error catalog (catalog.go): stable snake_case codes, each with
//     its one HTTP status; *Error renders {"error": {code, message,
//     field}};
//   - auth at the door (Authorize, Mount): with an Authenticator, a
//     route's Policy decides 401/403 before its handler runs; without one
//     (nil) auth is off and everything is allowed;
//   - the client (Client, APIError, Targets, NodeTarget).
//
// It must not: hold state, or logic that belongs to tenancy, the broker
// or the bookie. What a route answers comes from a backend (Backends: one
// small interface per area), which region implements for its node,
// converting domain values (jetstream, mledger, ledger metadata) into
// this package's types and domain errors into catalog codes. The
// package imports no broker, bookie, replicator, tiered or region package
// (only the name vocabularies tenancy and broker/bundle), and nothing at
// or below the broker imports it (internal/layering checks both); region
// only mounts its routes (region/admin.go).
//
// Adding a route: add its row to an area's route function (or a new area
// file with its types, its backend interface, a field in Backends and a
// line in Routes), choose its Policy, use only catalog codes, describe it
// in docs/admin-api.yaml (TestRoutesInOpenAPI) and list it in
// docs/admin-api.md. TestRoutePolicies calls every route with each kind
// of token.
//
// Concurrency: Routes and Mount run before the server starts; handlers
// run concurrently, and backends must be safe for concurrent use.
package admin
