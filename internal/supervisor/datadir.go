package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/nodedir"
	"github.com/stratamesh/strata/internal/vfs"
	"github.com/stratamesh/strata/topology"
)

const (
	// markerFile marks a directory as a Strata data directory: only a
	// directory that has it (or is empty) is used, and only such a
	// directory is ever wiped by --fresh.
	markerFile = ".strata-data-dir"
	// topologyFile is the copy of the topology the node processes read.
	topologyFile = "strata-topology.yaml"
	lockFile     = "up.lock"
)

// ErrLocked is returned when another `strata up` holds the data directory.
var ErrLocked = errors.New("supervisor: another strata up is running with this data directory")

// ErrNotDataDir is returned for a non-empty directory without the marker:
// `up` will not write into (or wipe) a directory it did not create.
var ErrNotDataDir = errors.New("supervisor: not a Strata data directory")

// prepareDataDir checks that the data directory is new, empty or one of
// ours, takes its lock (held until the returned func runs), wipes it when
// Fresh, and writes the marker, the topology and the logs directory.
func prepareDataDir(cfg Config) (unlock func(), err error) {
	if err := checkOurs(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("supervisor: data dir: %w", err)
	}
	l, err := vfs.Lock(vfs.Default, filepath.Join(cfg.DataDir, lockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w (%s): %w", ErrLocked, cfg.DataDir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("supervisor: lock: %w", err)
	}
	unlock = func() { l.Close() }
	if err := populate(cfg); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// checkOurs accepts a missing or empty directory, or one with the marker.
func checkOurs(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("supervisor: data dir: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s has files but no %s; give `up` a new or empty directory (--data-dir)", ErrNotDataDir, dir, markerFile)
}

func populate(cfg Config) error {
	if cfg.Fresh {
		if err := nodesInUse(cfg); err != nil {
			return err
		}
		journals := ownedJournals(cfg) // before wipe: it reads the data
		if err := wipe(cfg.DataDir); err != nil {
			return err
		}
		for _, j := range journals {
			if _, err := storage.RemoveJournal(nil, j.dir); err != nil {
				return fmt.Errorf("supervisor: --fresh: bookie %s: %w", j.node, err)
			}
		}
	}
	marker := "This directory holds the data of a Strata mesh run by `strata up`.\n`strata up --fresh` deletes everything in it.\n"
	for _, f := range []struct {
		name string
		data []byte
	}{{markerFile, []byte(marker)}, {topologyFile, cfg.TopologyYAML}} {
		if err := os.WriteFile(filepath.Join(cfg.DataDir, f.name), f.data, 0o644); err != nil {
			return fmt.Errorf("supervisor: %w", err)
		}
	}
	return os.MkdirAll(filepath.Join(cfg.DataDir, "logs"), 0o755)
}

// wipe empties a data directory (checkOurs has accepted it), keeping the
// lock file.
func wipe(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
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

// ownedJournal is a bookie's journal_dir that --fresh empties.
type ownedJournal struct{ node, dir string }

// ownedJournals returns the journal_dirs that --fresh must empty with the
// data directory: those of bookies whose data lies in it (default
// data_dir, or one under it) while the journal lies outside, and that
// hold that data's journal (the same owner id, storage.JournalOwnedBy).
// A bookie refuses a journal its new data directory cannot vouch for
// (storage.ErrForeignJournal), so without this `up --fresh` would stop at
// it. Any other journal stays: it may be another data directory's, with
// acknowledged entries only it holds. Those are logged.
func ownedJournals(cfg Config) []ownedJournal {
	if cfg.Mesh == nil {
		return nil
	}
	var out []ownedJournal
	for i := range cfg.Mesh.Regions {
		r := &cfg.Mesh.Regions[i]
		for _, n := range r.NodesOf(topology.RoleBookie) {
			data := n.DataDir
			if data == "" {
				data = filepath.Join(cfg.DataDir, r.Name, n.ID)
			}
			if n.JournalDir == "" || !within(cfg.DataDir, data) || within(cfg.DataDir, n.JournalDir) {
				continue
			}
			name := r.Name + "/" + n.ID
			owned, err := storage.JournalOwnedBy(data, n.JournalDir)
			if err != nil || !owned {
				if cfg.Logger != nil {
					cfg.Logger.Warn("--fresh keeps a journal_dir that is not the wiped data's journal", "bookie", name, "journal_dir", n.JournalDir, "err", err)
				}
				continue
			}
			out = append(out, ownedJournal{node: name, dir: n.JournalDir})
		}
	}
	return out
}

// nodesInUse returns an error naming the node when a process (a node
// left from an earlier run, or one started by hand) still runs a node
// whose directory --fresh would wipe (nodedir.CheckNotInUse), or has a
// bookie's journal_dir open (storage.CheckNotInUse): wiping files under
// a running node loses what it holds (a meta node's etcd data, a
// bookie's acknowledged entries) and leaves it running on nothing.
func nodesInUse(cfg Config) error {
	if cfg.Mesh == nil {
		return nil
	}
	for i := range cfg.Mesh.Regions {
		r := &cfg.Mesh.Regions[i]
		for _, n := range r.Nodes {
			dir := nodedir.Dir(cfg.DataDir, r.Name, n)
			if !within(cfg.DataDir, dir) {
				continue
			}
			err := nodedir.CheckNotInUse(dir)
			if err == nil && n.Role == topology.RoleBookie && n.JournalDir != "" {
				err = storage.CheckNotInUse(nil, n.JournalDir)
			}
			if err != nil {
				return fmt.Errorf("supervisor: --fresh: %s %s/%s: %w; stop that process first", n.Role, r.Name, n.ID, err)
			}
		}
	}
	return nil
}

// within reports whether path is dir or lies under it.
func within(dir, path string) bool {
	d, err1 := filepath.Abs(dir)
	p, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Running reports whether a `strata up` holds dataDir's lock right now
// (so its mesh.json describes a live mesh, not one left by a killed up).
func Running(dataDir string) bool {
	lf, err := os.Open(filepath.Join(dataDir, lockFile))
	if err != nil {
		return false
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return false
}
