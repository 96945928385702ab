package storage

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/stratamesh/strata/internal/vfs"
)

// Journal files are recycled, as BookKeeper's journalReuseFiles and
// PostgreSQL's WAL segments are: a file that a checkpoint has passed is
// renamed to a spare (%016x.spare) instead of deleted, up to
// maxSpareJournals of them (and only if it is at least half the rotation
// size: a file cut short by a restart is not worth keeping), and the next
// journal file is made from a spare when there is one. Its blocks are
// allocated and written, and its size is already nearly that of a full
// file, so the batches written into it overwrite (see reserve for why
// that makes fdatasync cheap) without the zero-filling a new file needs.
// What the file held before stays behind the new batches; the file id in
// every batch header tells the two apart (scanJournal).
const (
	spareExt         = ".spare"
	maxSpareJournals = 4
)

// sparePool is the set of spare journal files, by path.
type sparePool struct {
	mu       sync.Mutex
	names    []string
	retiring int // renames to a spare in progress (they count against the limit)
}

// findSpares fills the pool from the spares in the journal directory,
// removing those too short to be worth reusing (see retire).
func (j *journal) findSpares() error {
	names, err := j.cfg.fs.List(j.cfg.dir)
	if err != nil {
		return fmt.Errorf("bookie: list journal: %w", err)
	}
	j.spares.mu.Lock()
	defer j.spares.mu.Unlock()
	for _, n := range names {
		if !strings.HasSuffix(n, spareExt) {
			continue
		}
		name := filepath.Join(j.cfg.dir, n)
		if st, err := j.cfg.fs.Stat(name); err != nil || st.Size() < j.cfg.maxFileSize/2 || len(j.spares.names) >= maxSpareJournals {
			j.cfg.fs.Remove(name)
			continue
		}
		j.spares.names = append(j.spares.names, name)
	}
	return nil
}

// takeSpare removes a spare from the pool and returns its path, or "".
func (j *journal) takeSpare() string {
	j.spares.mu.Lock()
	defer j.spares.mu.Unlock()
	n := len(j.spares.names)
	if n == 0 {
		return ""
	}
	name := j.spares.names[n-1]
	j.spares.names = j.spares.names[:n-1]
	return name
}

// retire disposes of journal file id, which a checkpoint has passed: it
// becomes a spare if the pool has room and the file is at least half the
// rotation size (a short file, cut by a restart, would save little), else
// it is removed.
func (j *journal) retire(id uint64) error {
	name := j.path(id)
	st, err := j.cfg.fs.Stat(name)
	if err != nil {
		return err
	}
	j.spares.mu.Lock()
	keep := st.Size() >= j.cfg.maxFileSize/2 && len(j.spares.names)+j.spares.retiring < maxSpareJournals
	if keep {
		j.spares.retiring++
	}
	j.spares.mu.Unlock()
	if !keep {
		return j.cfg.fs.Remove(name)
	}
	spare := filepath.Join(j.cfg.dir, idFileName(id, spareExt))
	err = j.cfg.fs.Rename(name, spare)
	j.spares.mu.Lock()
	j.spares.retiring--
	if err == nil {
		j.spares.names = append(j.spares.names, spare)
	}
	j.spares.mu.Unlock()
	if err != nil {
		return j.cfg.fs.Remove(name)
	}
	return nil
}

// recycle turns spare into journal file id: the new file header is
// written and synced first, then the file is renamed, so that a file
// named as journal file id always says so. It returns the open file and
// its size.
func (j *journal) recycle(spare string, id uint64) (vfs.File, int64, error) {
	f, err := j.cfg.fs.OpenReadWrite(spare)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil && st.Size() < fileHeaderSize {
		err = fmt.Errorf("spare of %d bytes", st.Size())
	}
	if err == nil {
		_, err = f.WriteAt(encodeFileHeader(id), 0)
	}
	if err == nil && !j.cfg.noSync {
		err = vfs.SyncData(f)
	}
	if err == nil {
		err = j.cfg.fs.Rename(spare, j.path(id))
	}
	if err == nil && !j.cfg.noSync {
		err = j.cfg.fs.SyncDir(j.cfg.dir)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}
