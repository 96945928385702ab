// Package benchnode holds what the bench/ programs share: starting a
// `strata node` process (through the fault harness, internal/harness)
// and reading its one-line report, the raw write+fsync loop that measures
// the disk's physical limit, and latency percentiles.
package benchnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/stratamesh/strata/internal/harness"
)

// Node is a running `strata node` and the endpoints it reported.
type Node struct {
	*harness.Node
	Report harness.Report
}

// nodes is the one harness of the benchmark process (made on first use).
var nodes struct {
	sync.Mutex
	h *harness.Harness
}

func theHarness() *harness.Harness {
	nodes.Lock()
	defer nodes.Unlock()
	if nodes.h == nil {
		nodes.h = harness.New(harness.Config{StopGrace: 30 * time.Second})
	}
	return nodes.h
}

// Start runs `strata <args>` (args begin with "node" and name --region
// and --id), waits for its one-line JSON report and returns it. With
// profile set, the node writes its CPU profile there when stopped
// (STRATA_CPUPROFILE). env (KEY=VALUE items) is added to the node's
// environment. Its output goes to <region>-<id>.log beside its --data-dir.
// The node dies with this process (parent-death signal).
func Start(strata string, args []string, profile string, env ...string) (*Node, error) {
	spec := harness.SpecFromArgs(strata, args)
	if profile != "" {
		env = append(env, "STRATA_CPUPROFILE="+profile)
	}
	spec.Env = env
	dir := os.TempDir()
	for i, a := range spec.Args {
		if a == "--data-dir" && i+1 < len(spec.Args) {
			dir = filepath.Dir(spec.Args[i+1])
		}
	}
	spec.Log = filepath.Join(dir, spec.Region+"-"+spec.ID+".log")
	n, err := theHarness().Start(spec)
	if err != nil {
		return nil, err
	}
	return &Node{Node: n, Report: n.Report()}, nil
}

// KillAll sends SIGKILL to every node Start has run (for an interrupted
// benchmark about to remove their data) and waits for them to exit.
func KillAll() {
	h := theHarness()
	for _, n := range h.Nodes() {
		_ = h.Kill(n.Spec().Region, n.Spec().ID)
	}
}

// Stop sends SIGTERM (so a node run with a profile writes it) and waits
// for the node to exit (SIGKILL after 30 s).
func (n *Node) Stop() {
	_, _ = theHarness().Stop(n.Spec().Region, n.Spec().ID)
}

// RawWriteFsync appends rounds batches of batch entries of size bytes to a
// file in dir, with an fsync after each batch, and returns entries/s: the
// disk's write+fsync limit at that batch size.
func RawWriteFsync(dir string, size, batch, rounds int) (float64, error) {
	return rawLoop(dir, size, batch, rounds, false, false)
}

// RawZeroedFdatasync is RawWriteFsync without the file-system metadata
// work: the file is zero-filled and synced first, and each batch then
// overwrites the next part of it and is made durable with fdatasync(2),
// so no batch allocates blocks or changes the file's size (what the
// bookie's journal does in its zero-filled reserve and recycled files).
// On ext4 this is about twice as fast as appending at small batches.
// Returns entries/s; the zero-filling is not timed.
func RawZeroedFdatasync(dir string, size, batch, rounds int) (float64, error) {
	return rawLoop(dir, size, batch, rounds, true, false)
}

// RawZeroedWithEntryLog is RawZeroedFdatasync with an EntryLogLoad
// writing every batch's bytes again to an entry log on the same disk, as
// a bookie whose journal and entry logs share a disk must. Returns
// entries/s of the journal loop.
func RawZeroedWithEntryLog(dir string, size, batch, rounds int) (float64, error) {
	return rawLoop(dir, size, batch, rounds, true, true)
}

func rawLoop(dir string, size, batch, rounds int, overwrite, withLog bool) (float64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("raw-%v-%v.log", overwrite, withLog)))
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name()) // runs after Close: each loop's GiBs are freed before the next
	defer f.Close()
	buf := make([]byte, size*batch)
	if overwrite {
		zeros := make([]byte, 1<<20)
		total := int64(len(buf)) * int64(rounds)
		for off := int64(0); off < total; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), total-off)], off); err != nil {
				return 0, err
			}
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		syscall.Sync()
	}
	var entryLog *EntryLogLoad
	if withLog {
		name := filepath.Join(dir, "raw-entries.log")
		if entryLog, err = StartEntryLogLoad(name); err != nil {
			return 0, err
		}
		defer os.Remove(name)
	}
	start := time.Now()
	for i := 0; i < rounds; i++ {
		if overwrite {
			if _, err = f.WriteAt(buf, int64(i)*int64(len(buf))); err == nil {
				err = syscall.Fdatasync(int(f.Fd()))
			}
		} else if _, err = f.Write(buf); err == nil {
			err = f.Sync()
		}
		if err != nil {
			break
		}
		if entryLog != nil {
			entryLog.Add(len(buf))
		}
	}
	elapsed := time.Since(start)
	if entryLog != nil {
		err = errors.Join(err, entryLog.Stop())
	}
	if err != nil {
		return 0, err
	}
	return float64(rounds*batch) / elapsed.Seconds(), nil
}

// Pct is the p-quantile (0..1) of lat, rounded to a microsecond.
func Pct(lat []time.Duration, p float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))].Round(time.Microsecond)
}
