package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/stratamesh/strata/internal/vfs"
)

// RemoveJournal deletes the journal's files from dir — journal files,
// spares and the owner id (OWNER) — and nothing else, so that a bookie
// whose data directory was wiped can start afresh with its journal kept
// elsewhere (Config.JournalDir; `strata up --fresh`). Only call it when the
// data directory that owns the journal is being wiped too: the journal
// alone holds acknowledged entries not yet flushed. It returns how many
// files it removed; a missing dir is not an error. Errors are the file
// system's, naming the file.
func RemoveJournal(fsys vfs.FS, dir string) (int, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("bookie: remove journal: %w", err)
	}
	removed := 0
	for _, n := range names {
		if n != journalOwnerFile && !strings.HasSuffix(n, journalExt) && !strings.HasSuffix(n, spareExt) {
			continue
		}
		if err := fsys.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("bookie: remove journal: %w", err)
		}
		removed++
	}
	if removed > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			return removed, fmt.Errorf("bookie: remove journal: %w", err)
		}
	}
	return removed, nil
}
