package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/stratamesh/strata/internal/vfs"
)

// HasData reports whether the data directory dir holds an engine's data:
// journal files or spares (in dir's default journal directory), entry
// logs, or a location index. A bookie compares it with its cookie: data
// without a cookie means the cookie file was removed or the directory is
// another disk's, and the bookie refuses to start rather than give the
// data up (BookKeeper's cookie check refuses non-empty directories
// without a cookie likewise). A missing dir holds nothing. fsys nil is
// the OS. Errors: the file system's, naming the directory.
func HasData(fsys vfs.FS, dir string) (bool, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	for _, sub := range []struct {
		name string
		is   func(string) bool
	}{
		{journalDir, func(n string) bool { return strings.HasSuffix(n, journalExt) || strings.HasSuffix(n, spareExt) }},
		{logsDir, func(n string) bool { return strings.HasSuffix(n, entryLogExt) }},
		{indexDirName, func(string) bool { return true }},
	} {
		path := filepath.Join(dir, sub.name)
		names, err := fsys.List(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("bookie: look for data in %s: %w", path, err)
		}
		for _, n := range names {
			if sub.is(n) {
				return true, nil
			}
		}
	}
	return false, nil
}
