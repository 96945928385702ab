// Package drill is the measurement core of `strata drill failover`
// (issue 26 item 2): from a recorded event log of a drill — publishes
// acknowledged and messages delivered, each with its region and time; the
// cut, the heal and the end of catch-up; what the surviving region held
// right after the cut and what every region held after catch-up — it
// computes the report (RPO, RTO, lost, duplicates against the design's
// bound, catch-up time), checks it against thresholds and renders it as a
// table or JSON.
//
// It owns those definitions and nothing else: no sockets, files, clocks or
// goroutines. Time comes in as the timestamps of the log; the driver
// (internal/drill/live) runs the clients and faults and fills the log.
// Everything here is deterministic and driven directly by tests with
// scripted logs.
package drill
