// Package adminhttp is a node's admin HTTP server: the listener, the mux
// on which region mounts the admin package's routes (admin.Mount), the
// readiness checks /readyz runs (Ready, the routes' admin.Health), and
// the answer to a request no route takes (404 not_found, or 405
// method_not_allowed with Allow, in admin's error shape).
//
// It owns: the listener (port 0 resolved to the real port), routing and
// graceful shutdown.
// It must not: define routes, their types or error codes (package admin
// does), or contain the logic behind them.
//
// Concurrency: Handle and AddReadyCheck may be called before Start only;
// Close is idempotent and waits for in-flight requests up to its context.
package adminhttp
