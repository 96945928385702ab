// Package live is the driver of `strata drill failover`: it runs the
// drill's producers and replicated-subscription consumer against a
// running mesh with nats.go, cuts the region through a Fault (the fault
// harness's socket served by `strata up`, or the operator's hook
// commands), moves the clients to a surviving region, heals, waits for
// catch-up, and hands the recorded drill.Log to the measurement core
// (internal/drill).
//
// Concurrency: Run owns every goroutine it starts (producer, consumer,
// progress ticker) and waits for them before it returns. Progress is
// called from one goroutine at a time and must not block for long.
package live
