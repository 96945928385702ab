package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
)

// ErrForeignJournal: the journal directory holds the journal of another
// data directory (or one this data directory cannot vouch for). Replaying
// it would make up entries; opening without it would lose acknowledged
// ones. Open refuses. Fix the mount, or wipe both directories to start
// as a new bookie instance.
var ErrForeignJournal = errors.New("bookie: journal directory belongs to another data directory")

// The journal directory may live on its own device (Config.JournalDir,
// BookKeeper's journalDirectories), so it and the data directory can be
// swapped or replaced apart. An owner id, random and kept in both (the
// file OWNER in the journal directory, the index key ownerKey), ties them
// together, as BookKeeper's cookie in each of its directories does.
const journalOwnerFile = "OWNER"

var ownerKey = []byte("o")

// ownerAction is what opening does about the owner ids.
type ownerAction int

const (
	ownerMatch      ownerAction = iota // both hold the same id
	ownerCreate                        // neither holds one: new id, file first, then index
	ownerAdoptIndex                    // write the index's id to the journal directory
	ownerAdoptFile                     // write the journal directory's id to the index
)

// ownerState is what opening finds.
type ownerState struct {
	index, file  []byte // the ids, nil when absent
	indexFresh   bool   // the index has no checkpoint and no ledgers
	journalFiles bool   // the journal directory holds journal files
	noSync       bool   // Config.DisableFsync: the OWNER file may not have survived a crash
}

// decideOwner is the owner check as a pure function. Ids are written file
// first, then index, so a crash in between leaves "file only"; that is
// adopted into the index when the index is an older build's (not fresh)
// or when there is no journal to be wrong about. Errors: ErrForeignJournal
// (wrapped, naming the case).
func decideOwner(s ownerState) (ownerAction, error) {
	switch {
	case s.index != nil && s.file != nil:
		if bytes.Equal(s.index, s.file) {
			return ownerMatch, nil
		}
		return 0, fmt.Errorf("%w: its owner id %s is not this data directory's %s", ErrForeignJournal, s.file, s.index)
	case s.index == nil && s.file == nil:
		if s.indexFresh && s.journalFiles {
			return 0, fmt.Errorf("%w: it holds journal files without an owner id, and this data directory is new (its index is gone?)", ErrForeignJournal)
		}
		return ownerCreate, nil // a new bookie, or an index written before owner ids
	case s.index != nil:
		if s.journalFiles {
			return 0, fmt.Errorf("%w: it holds journal files but no owner id (this data directory's is %s)", ErrForeignJournal, s.index)
		}
		if s.indexFresh && !s.noSync {
			// The id went into the index after the file (ownerCreate), so
			// the journal directory was emptied or replaced, and with no
			// checkpoint yet every add acknowledged so far lived only in
			// that journal. Nothing would tell the loss apart later.
			return 0, fmt.Errorf("%w: it is empty, while this data directory (owner %s) has no checkpoint yet: any acknowledged adds were only in the journal that was there; restore it, or empty the data directory too to start a new bookie", ErrForeignJournal, s.index)
		}
		// An empty journal directory after a checkpoint: a replaced
		// journal device, or one emptied after a clean stop. The replay
		// finds the checkpoint's journal file missing and refuses.
		return ownerAdoptIndex, nil
	default:
		if s.indexFresh && s.journalFiles {
			return 0, fmt.Errorf("%w: it holds the journal of owner %s, and this data directory is new; if both are meant to start empty (as after wiping the data directory by hand), remove the journal directory's *.jnl, *.spare and OWNER files too", ErrForeignJournal, s.file)
		}
		return ownerAdoptFile, nil
	}
}

// checkJournalOwner runs decideOwner on what is on disk and writes the ids
// it says to write, durably. Errors: ErrForeignJournal, I/O errors.
func (e *Engine) checkJournalOwner() error {
	var s ownerState
	v, ok, err := e.ix.get(ownerKey)
	if err != nil {
		return err
	}
	if ok {
		s.index = v
	}
	path := filepath.Join(e.journalDir, journalOwnerFile)
	if s.file, err = e.readSmallFile(path); err != nil {
		return fmt.Errorf("bookie: read %s: %w", path, err)
	}
	_, hasCP, err := e.ix.checkpoint()
	if err != nil {
		return err
	}
	s.indexFresh = !hasCP && len(e.ledgers) == 0
	s.noSync = e.cfg.DisableFsync
	names, err := e.cfg.FS.List(e.journalDir)
	if err != nil {
		return fmt.Errorf("bookie: list journal: %w", err)
	}
	for _, n := range names {
		if _, ok := parseIDFileName(n, journalExt); ok {
			s.journalFiles = true
		}
	}
	action, err := decideOwner(s)
	if err != nil {
		return fmt.Errorf("%w (journal %s, data %s)", err, e.journalDir, e.cfg.Dir)
	}
	id := s.index
	switch action {
	case ownerCreate:
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		id = []byte(hex.EncodeToString(raw[:]))
		if err := e.writeOwnerFile(path, id); err != nil {
			return err
		}
		err = e.ix.db.Set(ownerKey, id, e.ix.write)
	case ownerAdoptIndex:
		err = e.writeOwnerFile(path, id)
	case ownerAdoptFile:
		id = s.file
		err = e.ix.db.Set(ownerKey, id, e.ix.write)
	}
	e.salt = saltOf(id)
	return err
}

// readSmallFile returns the contents of a file of at most 1 KiB, or nil
// if it does not exist.
func (e *Engine) readSmallFile(path string) ([]byte, error) {
	f, err := e.cfg.FS.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 1<<10)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n == 0 {
		return nil, nil // created, not yet written: as absent
	}
	return buf[:n], nil
}

// writeOwnerFile writes id to path durably (file and directory entry).
func (e *Engine) writeOwnerFile(path string, id []byte) error {
	f, err := e.cfg.FS.Create(path)
	if err != nil {
		return fmt.Errorf("bookie: write journal owner: %w", err)
	}
	_, err = f.WriteAt(id, 0)
	if err == nil && !e.cfg.DisableFsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !e.cfg.DisableFsync {
		err = e.cfg.FS.SyncDir(e.journalDir)
	}
	if err != nil {
		return fmt.Errorf("bookie: write journal owner: %w", err)
	}
	return nil
}
