package bookie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/stratamesh/strata/internal/meta"
)

// A cookie names one incarnation of a bookie: its id (stable, what
// ensembles name) and an instance UUID that changes whenever the bookie's
// disk is lost or replaced. The bookie keeps it in its data directory
// (CookieFile) and in etcd (CookieKey). At start the two are compared
// (planCookie) and the bookie serves the resulting instance; requests
// naming another instance are refused, so a bookie that came back empty
// cannot accept writes, or answer "no such entry", for data it never had.

// CookieFile is the cookie's file name in the bookie's data directory.
const CookieFile = "COOKIE.json"

// CookiePrefix is where cookies live in etcd (relative to the region's
// metadata prefix). It is outside RegistrationPrefix so that listing
// registrations never returns cookies.
const CookiePrefix = "bookie-cookies/"

// CookieKey is the etcd key of a bookie's cookie.
func CookieKey(id string) string { return CookiePrefix + id }

// Cookie identifies one incarnation of a bookie's disk.
type Cookie struct {
	BookieID string    `json:"bookie_id"`
	Instance string    `json:"instance"`
	Created  time.Time `json:"created"`
}

func (c *Cookie) check() error {
	if err := ValidateID(c.BookieID); err != nil {
		return err
	}
	if c.Instance == "" || len(c.Instance) > maxInstance {
		return fmt.Errorf("bookie: cookie of %q has a malformed instance %q", c.BookieID, c.Instance)
	}
	return nil
}

// cookieAction is what starting with a pair of cookies requires.
type cookieAction int

const (
	// cookieKeep: disk and etcd agree; the instance stays.
	cookieKeep cookieAction = iota + 1
	// cookieCreate: no cookie anywhere: a new bookie; write etcd (only if
	// still absent), then disk.
	cookieCreate
	// cookieReplace: etcd knows the id but the disk has no cookie: the
	// disk was lost, wiped or replaced. A new instance replaces the old
	// one in etcd (only if unchanged since read), then goes to disk.
	cookieReplace
	// cookieRestore: the disk has a cookie, etcd none (its metadata was
	// lost or reset): the disk's instance is written back to etcd.
	cookieRestore
)

func (a cookieAction) String() string {
	switch a {
	case cookieKeep:
		return "keep"
	case cookieCreate:
		return "create"
	case cookieReplace:
		return "replace"
	case cookieRestore:
		return "restore"
	}
	return fmt.Sprintf("cookieAction(%d)", int(a))
}

// cookiePlan is planCookie's decision.
type cookiePlan struct {
	action cookieAction
	cookie Cookie // the cookie the bookie runs with
}

// planCookie decides, from the configured id, the cookies found on disk
// and in etcd (nil: none) and whether the data directory holds storage
// data (hasData), which instance the bookie runs as. fresh is the cookie
// to use when a new instance is needed (new UUID, now). It refuses
// (ErrCookieMismatch) when the disk belongs to another bookie id; when
// disk and etcd name different instances of this id (another bookie took
// the id over from this disk, and only an operator can tell which one is
// right); and when the directory holds data but no cookie (its cookie
// file was removed, or it is another disk's: as BookKeeper's cookie check,
// which refuses non-empty directories without a cookie, rather than give
// the data up as a new instance).
func planCookie(id string, disk, remote *Cookie, hasData bool, fresh Cookie) (cookiePlan, error) {
	if disk != nil && disk.BookieID != id {
		return cookiePlan{}, fmt.Errorf("%w: the data directory belongs to bookie %q (instance %s), but this bookie is configured as %q",
			ErrCookieMismatch, disk.BookieID, disk.Instance, id)
	}
	if remote != nil && remote.BookieID != id {
		return cookiePlan{}, fmt.Errorf("%w: the cookie in etcd for %q names bookie %q", ErrCookieMismatch, id, remote.BookieID)
	}
	switch {
	case disk == nil && hasData:
		known := "etcd has no cookie for it either"
		if remote != nil {
			known = fmt.Sprintf("etcd has instance %s (created %s)", remote.Instance, remote.Created.Format(time.RFC3339))
		}
		return cookiePlan{}, fmt.Errorf("%w: the data directory holds bookie data (journal, entry logs or index) but no %s (%s): "+
			"the cookie file was removed, or the directory is another disk's; put the cookie file back, "+
			"or empty the directory to join as a new instance, giving up the data it holds",
			ErrCookieMismatch, CookieFile, known)
	case disk == nil && remote == nil:
		return cookiePlan{action: cookieCreate, cookie: fresh}, nil
	case disk == nil:
		return cookiePlan{action: cookieReplace, cookie: fresh}, nil
	case remote == nil:
		return cookiePlan{action: cookieRestore, cookie: *disk}, nil
	case disk.Instance != remote.Instance:
		return cookiePlan{}, fmt.Errorf("%w: bookie %q has instance %s on disk but %s in etcd (created %s): another disk took this id over; "+
			"remove this data directory to join as a new instance, or delete the etcd cookie if this disk is the right one",
			ErrCookieMismatch, id, disk.Instance, remote.Instance, remote.Created.Format(time.RFC3339))
	default:
		return cookiePlan{action: cookieKeep, cookie: *disk}, nil
	}
}

// establishCookie reads the cookies of bookie id, applies planCookie's
// decision and returns the cookie to run with and its etcd mod revision
// (the registration's write condition). etcd is written before the disk:
// a crash in between leaves at worst an etcd cookie without a disk cookie,
// which the next start treats as a lost disk (a new instance, which
// nobody used yet), never as a mismatch.
func establishCookie(ctx context.Context, st *meta.Store, dir, id string, hasData func() (bool, error), fresh Cookie, log *slog.Logger) (Cookie, int64, error) {
	disk, err := ReadCookieFile(dir)
	if err != nil {
		return Cookie{}, 0, err
	}
	remote, rev, err := readRemoteCookie(ctx, st, id)
	if err != nil {
		return Cookie{}, 0, err
	}
	data := false
	if disk == nil && hasData != nil {
		if data, err = hasData(); err != nil {
			return Cookie{}, 0, err
		}
	}
	plan, err := planCookie(id, disk, remote, data, fresh)
	if err != nil {
		return Cookie{}, 0, err
	}
	c := plan.cookie
	switch plan.action {
	case cookieKeep:
		log.Info("bookie cookie matches", "instance", c.Instance)
		return c, rev, nil
	case cookieCreate:
		log.Info("new bookie: created cookie", "instance", c.Instance)
	case cookieReplace:
		log.Warn("bookie data directory has no cookie but etcd has one: the disk was lost or replaced; "+
			"starting as a new instance, requests for the old instance will be refused",
			"old_instance", remote.Instance, "old_created", remote.Created, "instance", c.Instance, "dir", dir)
	case cookieRestore:
		log.Warn("bookie cookie missing in etcd; restoring it from the data directory", "instance", c.Instance)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return Cookie{}, 0, err
	}
	newRev, err := st.CAS(ctx, CookieKey(id), b, rev)
	if err != nil {
		return Cookie{}, 0, fmt.Errorf("bookie: write cookie of %q to etcd (another start of the same id at once?): %w", id, err)
	}
	if plan.action != cookieRestore {
		if err := WriteCookieFile(dir, c); err != nil {
			return Cookie{}, 0, err
		}
	}
	return c, newRev, nil
}

func readRemoteCookie(ctx context.Context, st *meta.Store, id string) (*Cookie, int64, error) {
	c, kv, err := meta.GetJSON[Cookie](ctx, st, CookieKey(id))
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("bookie: read cookie of %q from etcd: %w", id, err)
	}
	if err := c.check(); err != nil {
		return nil, 0, fmt.Errorf("bookie: cookie in etcd at %s: %w", CookieKey(id), err)
	}
	return &c, kv.ModRevision, nil
}

// ReadCookieFile reads the cookie in dir: nil (and no error) when there is
// none.
func ReadCookieFile(dir string) (*Cookie, error) {
	path := filepath.Join(dir, CookieFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bookie: read cookie: %w", err)
	}
	var c Cookie
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("bookie: cookie file %s is corrupt: %w", path, err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("bookie: cookie file %s: %w", path, err)
	}
	return &c, nil
}

// WriteCookieFile writes c to dir (created if missing) atomically: a
// temporary file, fsynced, renamed over CookieFile, and the directory
// fsynced.
func WriteCookieFile(dir string, c Cookie) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bookie: write cookie: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, CookieFile+".tmp")
	if err := writeSync(tmp, append(b, '\n')); err != nil {
		return fmt.Errorf("bookie: write cookie: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, CookieFile)); err != nil {
		return fmt.Errorf("bookie: write cookie: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("bookie: write cookie: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("bookie: write cookie: sync %s: %w", dir, err)
	}
	return nil
}

func writeSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
