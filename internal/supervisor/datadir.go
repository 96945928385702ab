package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

const (
	topologyFile = "topology.yaml"
	lockFile     = "up.lock"
)

// ErrLocked is returned when another `strata up` holds the data directory.
var ErrLocked = errors.New("supervisor: another strata up is running with this data directory")

// prepareDataDir creates the data directory, takes its lock (held until the
// returned func runs), wipes it when Fresh, and writes the topology and the
// logs directory.
func prepareDataDir(cfg Config) (unlock func(), err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("supervisor: data dir: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(cfg.DataDir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("supervisor: lock: %w", err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%w (%s)", ErrLocked, cfg.DataDir)
	}
	unlock = func() { lf.Close() }
	if cfg.Fresh {
		if err := wipe(cfg.DataDir); err != nil {
			unlock()
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "logs"), 0o755); err != nil {
		unlock()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.DataDir, topologyFile), cfg.TopologyYAML, 0o644); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// wipe empties dir, keeping the lock file. It refuses a directory that
// holds other files but no topology.yaml: that is not a Strata data
// directory, and --fresh must never delete someone's files.
func wipe(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	ours := false
	for _, e := range entries {
		if e.Name() == topologyFile {
			ours = true
		}
	}
	if !ours && len(entries) > 1 {
		return fmt.Errorf("supervisor: --fresh refuses to wipe %s: it has files but no %s, so it is not a Strata data directory", dir, topologyFile)
	}
	for _, e := range entries {
		if e.Name() == lockFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("supervisor: --fresh: %w", err)
		}
	}
	return nil
}
