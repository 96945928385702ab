package replicator

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestInteraction runs the scripts in testdata/ against a simulated mesh
// (mesh_test.go), as etcd-io/raft's interaction tests do. Rewrite the
// expected output with -rewrite. Commands:
//
//	regions us eu ap [batch=N] [inflight=N] [bytes=N] [size=N]
//	        [ack-timeout=D] [backoff=D] [backoff-max=D] [stall=D]
//	                       start a mesh (sizes in bytes, D a Go duration)
//	publish R n=N          R's clients publish N messages (origin R)
//	partition A B          cut the links between A and B (queued packets are lost)
//	heal A B               restore them
//	fail-send A B [once|n=N]  B's store fails for the next N batches from A
//	crash R                R loses its memory; restarts from persisted state
//	recreate R             R's topic is deleted and re-created (new incarnation)
//	rebuild R              R restarts from an empty data dir (new incarnation)
//	trim R upto=N          retention at R trims its messages up to origin seq N
//	send                   senders send what their windows allow
//	deliver A B [n=N]      deliver the next N packets on the link A->B
//	tick d=D               time passes; senders tick, persist, send
//	stabilize              send and deliver until nothing is queued
//	state                  each region's stored messages, HWMs, senders
//	check                  the final invariants of a quiescent mesh
//
// Trace lines: "A->B #3 msgs 4-6: stored hwm=6" is batch #3 of A's
// sender to B, delivered at B, with B's answer ("A->B #3 msgs 4-6: lost
// (partitioned)" when the link is cut); "A<-B #3 stored hwm=6: pos 6" is
// that answer delivered to A's sender, with its position after. tick and
// stabilize also report ack timeouts and health changes ("A->B:
// backing-off -> stalled").
//
// Every command is followed by the step invariants (checkStep); a
// violation is printed and fails the test.
func TestInteraction(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata/: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) { runScript(t, path) })
	}
}

// runScript runs one script; a mesh lives from its regions command to
// the end of the file.
func runScript(t *testing.T, path string) {
	var m *mesh
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "regions" && m == nil {
			d.Fatalf(t, "%s before regions", d.Cmd)
		}
		if m != nil {
			m.out.Reset()
		}
		extra := run(t, d, &m)
		m.checkStep()
		if len(m.violations) > 0 {
			t.Errorf("%s: %s", d.Pos, strings.Join(m.violations, "; "))
			m.violations = nil
		}
		return m.out.String() + extra
	})
}

// run executes one command and returns output beyond the trace.
func run(t *testing.T, d *datadriven.TestData, mp **mesh) string {
	pos := positional(d)
	m := *mp
	switch d.Cmd {
	case "regions":
		cfg := DefaultConfig()
		intArg(t, d, "batch", &cfg.MaxBatchMsgs)
		intArg(t, d, "inflight", &cfg.MaxInFlight)
		intArg(t, d, "bytes", &cfg.MaxBatchBytes)
		durArg(t, d, "ack-timeout", &cfg.AckTimeout)
		durArg(t, d, "backoff", &cfg.BackoffInitial)
		durArg(t, d, "backoff-max", &cfg.BackoffMax)
		durArg(t, d, "stall", &cfg.StallAfter)
		if err := cfg.Validate(); err != nil {
			d.Fatalf(t, "%v", err)
		}
		*mp = newMesh(cfg, pos...)
		intArg(t, d, "size", &(*mp).size)
		return ""
	case "publish":
		n := 1
		intArg(t, d, "n", &n)
		m.publish(one(t, d, pos), n)
		m.pump()
	case "partition", "heal":
		a, b := two(t, d, pos)
		m.partition(a, b, d.Cmd == "partition")
	case "fail-send":
		a, b := two(t, d, pos)
		n := 1
		intArg(t, d, "n", &n)
		m.regions[b].fail[a] += n
	case "crash":
		m.crash(one(t, d, pos))
	case "recreate":
		m.recreate(one(t, d, pos))
	case "rebuild":
		m.rebuild(one(t, d, pos))
	case "trim":
		var upto uint64
		d.ScanArgs(t, "upto", &upto)
		m.trim(one(t, d, pos), upto)
	case "send":
		m.pump()
	case "deliver":
		a, b := two(t, d, pos)
		n := 1
		intArg(t, d, "n", &n)
		for range n {
			if !m.deliver(a, b) {
				break
			}
		}
	case "tick":
		var dur time.Duration
		durArg(t, d, "d", &dur)
		m.tick(dur)
	case "stabilize":
		if err := m.stabilize(); err != nil {
			d.Fatalf(t, "%v", err)
		}
	case "state":
		return m.formatState()
	case "check":
		if bad := m.checkFinal(); len(bad) > 0 {
			t.Errorf("%s: %s", d.Pos, strings.Join(bad, "; "))
			return strings.Join(bad, "\n") + "\n"
		}
		return "ok\n"
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return ""
}

// positional returns the arguments without values (region names, once).
func positional(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && a.Key != "once" {
			out = append(out, a.Key)
		}
	}
	return out
}

func one(t *testing.T, d *datadriven.TestData, pos []string) string {
	if len(pos) != 1 {
		d.Fatalf(t, "%s wants one region, got %v", d.Cmd, pos)
	}
	return pos[0]
}

func two(t *testing.T, d *datadriven.TestData, pos []string) (string, string) {
	if len(pos) != 2 {
		d.Fatalf(t, "%s wants two regions, got %v", d.Cmd, pos)
	}
	return pos[0], pos[1]
}

func intArg(t *testing.T, d *datadriven.TestData, key string, dst *int) {
	if a, ok := d.Arg(key); ok {
		v, err := strconv.Atoi(a.SingleVal(t))
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		*dst = v
	}
}

func durArg(t *testing.T, d *datadriven.TestData, key string, dst *time.Duration) {
	if a, ok := d.Arg(key); ok {
		v, err := time.ParseDuration(a.SingleVal(t))
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		*dst = v
	}
}
