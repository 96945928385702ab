// Package adminhttp is a node's admin HTTP server: /healthz (the process is
// up), /readyz (every registered readiness check passes), /metrics (from
// telemetry), and the /admin/v1 routes other packages mount.
//
// It owns: the listener (port 0 resolved to the real port), routing, the
// JSON error shape of docs/admin-api.md, and graceful shutdown.
// It must not: contain the logic behind the routes it serves.
//
// Concurrency: Handle and AddReadyCheck may be called before Start only;
// Close is idempotent and waits for in-flight requests up to its context.
package adminhttp
