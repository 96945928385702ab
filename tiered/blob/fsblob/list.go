package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/internal/driver"
)

// List implements blob.Store. It walks only the directory that prefix's
// last "/" names and the sub-directories that can hold matching names;
// temporary files are never listed. Files or directories removed while
// it walks are skipped.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.Attrs, error) {
	if err := s.closed.Check("fsblob"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fsblob: list %q: %w", prefix, err)
	}
	if _, err := driver.ListPrefix("", prefix); err != nil {
		return nil, fmt.Errorf("fsblob: %w", err)
	}
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
		if start != s.root && !strings.HasPrefix(start, s.root+string(filepath.Separator)) {
			// ".." in a prefix: no name can match, and the walk must
			// not leave the root.
			return nil, nil
		}
	}
	var out []blob.Attrs
	err := s.walk(ctx, start, prefix, func(name string, size int64, mod time.Time) {
		out = append(out, blob.Attrs{Name: name, Size: size, Modified: mod})
	})
	if err != nil {
		return nil, fmt.Errorf("fsblob: list %q: %w", prefix, err)
	}
	driver.SortAttrs(out)
	return out, nil
}

// walk calls fn for every object under start whose name has prefix.
func (s *Store) walk(ctx context.Context, start, prefix string, fn func(name string, size int64, mod time.Time)) error {
	return filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // removed meanwhile, or start is an object's file
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == s.root {
			return nil
		}
		name := s.rel(p)
		if d.IsDir() {
			dirName := name + "/"
			if !strings.HasPrefix(dirName, prefix) && !strings.HasPrefix(prefix, dirName) {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(path.Base(name), blob.ReservedPrefix) || !strings.HasPrefix(name, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if fi.Mode().IsRegular() {
			fn(name, fi.Size(), fi.ModTime())
		}
		return nil
	})
}

// SweepTemp removes the temporary files that Puts interrupted by a crash
// left behind, if they are older than age, and returns how many it
// removed. Run it when no other process may be uploading to the same
// directory, or with an age longer than any upload takes (an hour).
func (s *Store) SweepTemp(ctx context.Context, age time.Duration) (int, error) {
	if err := s.closed.Check("fsblob"); err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-age)
	n := 0
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), blob.ReservedPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if os.Remove(p) == nil {
			n++
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("fsblob: sweep: %w", err)
	}
	return n, nil
}
