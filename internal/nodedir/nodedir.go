// Package nodedir owns where a node keeps its data and the lock that
// keeps one process at a time in it. The node (region) takes the lock
// before touching its directory; `strata up --fresh` (supervisor) asks
// whether any node's directory is in use before wiping. It must not
// import the node's packages: it only knows paths and the lock.
package nodedir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stratamesh/strata/internal/vfs"
	"github.com/stratamesh/strata/topology"
)

// LockFile is the lock file in a node's directory.
const LockFile = "node.lock"

// ErrInUse is returned by Lock and CheckNotInUse when another process
// holds a node directory's lock.
var ErrInUse = errors.New("node directory in use by another process")

// Dir is where node n of region keeps its data: the topology's data_dir
// for the node when set, else <dataDir>/<region>/<id> (meta nodes:
// <dataDir>/<region>/meta).
func Dir(dataDir, region string, n topology.Node) string {
	switch {
	case n.DataDir != "":
		return n.DataDir
	case n.Role == topology.RoleMeta:
		return filepath.Join(dataDir, region, "meta")
	default:
		return filepath.Join(dataDir, region, n.ID)
	}
}

// Lock creates dir if needed (mode 0700, and makes an existing one 0700)
// and locks it for this process (flock on
// LockFile, vfs.Lock): held until the returned io.Closer is closed or the
// process ends. Errors: ErrInUse (with vfs.ErrLocked, naming the holder's
// pid when known), or the file system's.
func Lock(dir string) (io.Closer, error) {
	// Owner only: a node's directory holds message data (journals, entry
	// logs), metadata and secrets; other local users must not read it.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := vfs.Lock(vfs.Default, filepath.Join(dir, LockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("%w: %s: %w", ErrInUse, dir, err)
	}
	return l, err
}

// CheckNotInUse returns ErrInUse when a process holds dir's lock, and nil
// when none does or dir does not exist. It takes the lock for a moment.
func CheckNotInUse(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	l, err := Lock(dir)
	if err != nil {
		return err
	}
	return l.Close()
}
