package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stratamesh/strata/internal/vfs"
	"github.com/stratamesh/strata/internal/vfs/pebblevfs"
)

// JournalOwnedBy reports whether the journal in journalDir belongs to the
// bookie data directory dataDir: both hold the same owner id (the OWNER
// file and the index's, journal_owner.go). It is false when either has
// none (a journal directory without an owner id and without journal files
// holds nothing to lose). Call it only while no bookie has dataDir open:
// it opens the index read-only. Errors: reading either id failed (then the
// caller must assume the journal is not dataDir's).
func JournalOwnedBy(dataDir, journalDir string) (bool, error) {
	file, err := os.ReadFile(filepath.Join(journalDir, journalOwnerFile))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(file) == 0) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bookie: journal owner: %w", err)
	}
	ixDir := filepath.Join(dataDir, indexDirName)
	if _, err := os.Stat(ixDir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	db, err := pebble.Open(ixDir, &pebble.Options{ReadOnly: true, FS: pebblevfs.New(vfs.Default), Logger: pebbleLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		return false, fmt.Errorf("bookie: journal owner: open index: %w", err)
	}
	defer db.Close()
	v, closer, err := db.Get(ownerKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bookie: journal owner: %w", err)
	}
	defer closer.Close()
	return bytes.Equal(v, file), nil
}

// RemoveJournal deletes the journal's files from dir — journal files,
// spares and the owner id (OWNER) — and nothing else, so
// that a bookie whose data directory is wiped can start afresh with its
// journal kept elsewhere (Config.JournalDir; `strata up --fresh`). Only
// call it for the journal of a data directory being wiped
// (JournalOwnedBy): the journal alone holds acknowledged entries not yet
// flushed. It returns how many files it removed; a missing dir is not an
// error. Errors: ErrInUse while a bookie has dir open (nothing removed),
// or the file system's, naming the file.
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
	lock, err := lockDir(fsys, dir)
	if err != nil {
		return 0, fmt.Errorf("bookie: remove journal: %w", err)
	}
	defer lock.Close()
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

// CheckNotInUse returns ErrInUse when a bookie (of any process) has the
// data or journal directory dir open, and nil otherwise, also when dir
// does not exist; `strata up --fresh` asks before wiping. It takes the
// directory's lock for a moment (dir must then exist). Errors: ErrInUse,
// or the file system's.
func CheckNotInUse(fsys vfs.FS, dir string) error {
	if fsys == nil {
		fsys = vfs.Default
	}
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	lock, err := lockDir(fsys, dir)
	if err != nil {
		return err
	}
	return lock.Close()
}
