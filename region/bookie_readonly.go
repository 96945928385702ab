package region

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratamesh/strata/admin"
)

// readOnlyFile in a bookie node's directory records that an operator set
// the bookie read-only, so that it stays so across restarts until lifted.
const readOnlyFile = "READ_ONLY"

// setReadOnly applies PUT /admin/v1/bookie/read-only (BookKeeper's manual
// read-only mode, e.g. to drain a bookie before taking it away): with
// read_only true the bookie refuses new adds (CODE_READ_ONLY; ledger
// writers place other bookies), keeps serving reads and fences, and its
// registration says read-only; false lifts it (the disk threshold still
// applies). The setting survives restarts (readOnlyFile). It returns the
// bookie's view; wrong_bookie (409) when req names another bookie;
// internal (500) if the setting could not be recorded on disk (then
// nothing changed).
func (n *Node) setReadOnly(req admin.ReadOnlyRequest) (admin.BookieView, error) {
	ro := *req.ReadOnly
	if (req.Bookie != "" && req.Bookie != n.cfg.ID) || (req.Region != "" && req.Region != n.cfg.Region) {
		meant := req.Bookie
		if req.Region != "" {
			meant = req.Region + "/" + req.Bookie
		}
		return admin.BookieView{}, admin.Errorf(admin.CodeWrongBookie, "bookie",
			"this is bookie %s/%s, not %s: nothing changed (check the URL)", n.cfg.Region, n.cfg.ID, meant)
	}
	// One setting at a time: the file and the engine agree after each.
	n.readOnlyMu.Lock()
	defer n.readOnlyMu.Unlock()
	if err := setReadOnlyFile(n.dir(), ro); err != nil {
		// The file may or may not have changed: the engine follows what
		// is on disk, so that a restart changes nothing.
		now, serr := readOnlySet(n.dir())
		if serr == nil {
			n.engine.SetReadOnly(now)
			n.bookie.Registrar().Refresh()
		}
		return admin.BookieView{}, admin.Errorf(admin.CodeInternal, "",
			"recording the read-only setting: %v (the bookie is read-only by an operator: %v, as on disk)", err, n.engine.ReadOnlyBySet())
	}
	n.engine.SetReadOnly(ro)
	n.bookie.Registrar().Refresh() // publish the new state now
	n.logger.Info("bookie read-only set by an operator", "read_only", ro)
	return n.localBookie(), nil
}

// setReadOnlyFile records (ro) or removes the operator's read-only
// setting in dir, durably.
func setReadOnlyFile(dir string, ro bool) error {
	name := filepath.Join(dir, readOnlyFile)
	if ro {
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "read-only set by an operator at %s\n", time.Now().UTC().Format(time.RFC3339))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readOnlySet reports whether an operator left the bookie in dir
// read-only. Errors: the file could not be checked (not its absence).
func readOnlySet(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, readOnlyFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking the operator's read-only setting: %w", err)
	}
	return true, nil
}
