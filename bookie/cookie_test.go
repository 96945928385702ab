package bookie

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/bookietest"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/meta"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestPlanCookie is the decision table, without I/O.
func TestPlanCookie(t *testing.T) {
	ck := func(id, inst string) *Cookie { return &Cookie{BookieID: id, Instance: inst, Created: t0} }
	fresh := Cookie{BookieID: "b1", Instance: "new", Created: t0.Add(time.Hour)}
	cases := []struct {
		name         string
		disk, remote *Cookie
		hasData      bool
		want         cookieAction
		instance     string
		err          string
	}{
		{name: "(a) nothing anywhere: new instance", want: cookieCreate, instance: "new"},
		{name: "(b) disk matches etcd: same instance", disk: ck("b1", "i1"), remote: ck("b1", "i1"), want: cookieKeep, instance: "i1"},
		{name: "(c) disk lost, etcd knows the id: new instance", remote: ck("b1", "i1"), want: cookieReplace, instance: "new"},
		{name: "(d) disk of another id", disk: ck("b2", "i1"), err: `belongs to bookie "b2"`},
		{name: "(d) disk of another id, etcd empty", disk: ck("b2", "i1"), remote: ck("b1", "i1"), err: `belongs to bookie "b2"`},
		{name: "etcd cookie names another id", remote: ck("b9", "i1"), err: `names bookie "b9"`},
		{name: "disk and etcd name different instances", disk: ck("b1", "i1"), remote: ck("b1", "i2"), err: "another disk took this id over"},
		{name: "etcd lost: restored from disk", disk: ck("b1", "i1"), want: cookieRestore, instance: "i1"},
		{name: "data but no cookie on disk, etcd knows the id", remote: ck("b1", "i1"), hasData: true, err: "holds bookie data (journal, entry logs or index) but no COOKIE.json (etcd has instance i1"},
		{name: "data but no cookie anywhere", hasData: true, err: "but no COOKIE.json (etcd has no cookie for it either)"},
		{name: "data with its cookie: same instance", disk: ck("b1", "i1"), remote: ck("b1", "i1"), hasData: true, want: cookieKeep, instance: "i1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := planCookie("b1", c.disk, c.remote, c.hasData, fresh)
			if c.err != "" {
				if !errors.Is(err, ErrCookieMismatch) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrCookieMismatch with %q", err, c.err)
				}
				return
			}
			if err != nil || p.action != c.want || p.cookie.Instance != c.instance || p.cookie.BookieID != "b1" {
				t.Fatalf("plan = %v %+v, %v; want %v with instance %s", p.action, p.cookie, err, c.want, c.instance)
			}
		})
	}
}

func TestCookieFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if c, err := ReadCookieFile(dir); c != nil || err != nil {
		t.Fatalf("missing cookie = %v, %v", c, err)
	}
	want := Cookie{BookieID: "b1", Instance: "i1", Created: t0}
	if err := WriteCookieFile(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCookieFile(dir)
	if err != nil || *got != want {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, CookieFile+".tmp")); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	for name, content := range map[string]string{
		"corrupt":     "{not json",
		"no instance": `{"bookie_id":"b1"}`,
		"bad id":      `{"bookie_id":"b/1","instance":"x"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, CookieFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if c, err := ReadCookieFile(dir); err == nil {
			t.Errorf("%s cookie accepted: %+v", name, c)
		}
	}
}

// bookieEnv starts bookies of one id against one etcd prefix, each on a
// fresh bookietest.Mem (as if each start opened the disk found in dir).
type bookieEnv struct {
	t     *testing.T
	store *meta.Store
	dir   string
	mems  []*bookietest.Mem
}

func newBookieEnv(t *testing.T) *bookieEnv {
	return &bookieEnv{t: t, store: openStore(t), dir: filepath.Join(t.TempDir(), "b1")}
}

func (e *bookieEnv) config(id, listen string) BookieConfig {
	return BookieConfig{
		ID: id, DataDir: e.dir, ListenAddr: listen, Meta: e.store,
		OpenStorage: func(context.Context) (storage.Storage, error) {
			m := bookietest.NewMem()
			e.mems = append(e.mems, m)
			return m, nil
		},
		RegistrationTTL: meta.MinLeaseTTL,
		RefreshInterval: 20 * time.Millisecond,
	}
}

func (e *bookieEnv) start(cfg BookieConfig) (*Bookie, error) {
	b, err := StartBookie(testCtx(e.t), cfg)
	if err == nil {
		e.t.Cleanup(func() { b.Stop(context.Background()) })
	}
	return b, err
}

func (e *bookieEnv) mustStart(cfg BookieConfig) *Bookie {
	e.t.Helper()
	b, err := e.start(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *bookieEnv) etcdCookie() (Cookie, int64) {
	e.t.Helper()
	c, kv, err := meta.GetJSON[Cookie](testCtx(e.t), e.store, CookieKey("b1"))
	if err != nil {
		e.t.Fatal(err)
	}
	return c, kv.ModRevision
}

func (e *bookieEnv) stop(b *Bookie) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// TestCookieLifecycle runs cases (a) to (d) against etcd: a new bookie,
// a restart on the same disk, a restart on an empty disk at the same
// address (a new instance; its old instance refused over the wire), and a
// disk of another bookie id.
func TestCookieLifecycle(t *testing.T) {
	e := newBookieEnv(t)
	ctx := testCtx(t)

	// (a) Nothing anywhere: a new instance, written to disk and etcd.
	b := e.mustStart(e.config("b1", "127.0.0.1:0"))
	first := b.Cookie()
	addr := b.Addr()
	disk, err := ReadCookieFile(e.dir)
	if err != nil || disk == nil || *disk != first {
		t.Fatalf("(a) disk cookie %+v, %v; bookie runs %+v", disk, err, first)
	}
	if c, _ := e.etcdCookie(); c != first {
		t.Fatalf("(a) etcd cookie %+v, want %+v", c, first)
	}
	old, err := Dial(ctx, addr, DialOptions{Instance: first.Instance})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	s := openAdds(t, old)
	if err := addSync(t, s, addReq(1, 0)); err != nil {
		t.Fatal(err)
	}
	e.stop(b)

	// (b) Same disk: same instance, etcd untouched.
	_, rev := e.etcdCookie()
	b = e.mustStart(e.config("b1", addr))
	if b.Instance() != first.Instance {
		t.Fatalf("(b) restart changed the instance: %s → %s", first.Instance, b.Instance())
	}
	if _, rev2 := e.etcdCookie(); rev2 != rev {
		t.Fatalf("(b) etcd cookie rewritten (rev %d → %d)", rev, rev2)
	}
	e.stop(b)

	// (c) The disk is wiped; the bookie comes back at the same address
	// with a new instance, and refuses requests for the old one.
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatal(err)
	}
	b = e.mustStart(e.config("b1", addr))
	if b.Addr() != addr || b.Instance() == first.Instance {
		t.Fatalf("(c) restarted at %s as %s; old %s at %s", b.Addr(), b.Instance(), first.Instance, addr)
	}
	if c, _ := e.etcdCookie(); c.Instance != b.Instance() {
		t.Fatalf("(c) etcd cookie %+v not replaced by %s", c, b.Instance())
	}
	if disk, _ := ReadCookieFile(e.dir); disk == nil || disk.Instance != b.Instance() {
		t.Fatalf("(c) disk cookie %+v", disk)
	}
	// The old client reconnects to the same address, with the old instance.
	s2 := openAdds(t, old)
	if err := addSync(t, s2, addReq(1, 1)); !errors.Is(err, ErrWrongInstance) {
		t.Fatalf("(c) add for the old instance: %v", err)
	}
	if _, err := old.Read(ctx, 1, 0); !errors.Is(err, ErrWrongInstance) {
		t.Fatalf("(c) read for the old instance: %v", err)
	}
	mem := e.mems[len(e.mems)-1]
	if mem.Adds() != 0 {
		t.Fatalf("(c) the new instance's engine took %d adds meant for the old one", mem.Adds())
	}
	reg, _, err := meta.GetJSON[Registration](ctx, e.store, RegistrationKey("b1"))
	if err != nil || reg.Instance != b.Instance() || reg.Address != addr {
		t.Fatalf("(c) registration %+v, %v", reg, err)
	}
	fresh, err := Dial(ctx, addr, DialOptions{Instance: reg.Instance})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := addSync(t, openAdds(t, fresh), addReq(1, 0)); err != nil {
		t.Fatalf("(c) add for the new instance: %v", err)
	}
	e.stop(b)

	// (d) A data directory of another bookie: refused before the storage
	// is opened.
	opened := len(e.mems)
	_, err = e.start(e.config("b2", "127.0.0.1:0"))
	if !errors.Is(err, ErrCookieMismatch) || !strings.Contains(err.Error(), `belongs to bookie "b1"`) {
		t.Fatalf("(d) start as b2 on b1's disk: %v", err)
	}
	if len(e.mems) != opened {
		t.Fatal("(d) storage opened despite the cookie mismatch")
	}
}

// TestCookieInstanceConflict: a disk whose instance etcd no longer knows
// (another disk took the id over) refuses to start; a disk cookie whose
// etcd copy was lost is written back.
func TestCookieInstanceConflict(t *testing.T) {
	e := newBookieEnv(t)
	ctx := testCtx(t)
	b := e.mustStart(e.config("b1", "127.0.0.1:0"))
	inst := b.Instance()
	e.stop(b)

	// etcd lost the cookie: restored from disk, same instance.
	if err := e.store.Delete(ctx, CookieKey("b1")); err != nil {
		t.Fatal(err)
	}
	b = e.mustStart(e.config("b1", "127.0.0.1:0"))
	if b.Instance() != inst {
		t.Fatalf("instance %s after restore, want %s", b.Instance(), inst)
	}
	if c, _ := e.etcdCookie(); c.Instance != inst {
		t.Fatalf("etcd cookie not restored: %+v", c)
	}
	e.stop(b)

	// Another instance owns the id in etcd.
	other, _ := json.Marshal(Cookie{BookieID: "b1", Instance: "someone-else", Created: t0})
	if _, err := e.store.Put(ctx, CookieKey("b1"), other); err != nil {
		t.Fatal(err)
	}
	if _, err := e.start(e.config("b1", "127.0.0.1:0")); !errors.Is(err, ErrCookieMismatch) || !strings.Contains(err.Error(), "someone-else") {
		t.Fatalf("start with a superseded disk: %v", err)
	}
}

// TestDeterministicCookie: Now and NewInstance make the cookie a pure
// function of the configuration.
func TestDeterministicCookie(t *testing.T) {
	e := newBookieEnv(t)
	cfg := e.config("b1", "127.0.0.1:0")
	cfg.Now = func() time.Time { return t0 }
	cfg.NewInstance = func() string { return "11111111-2222-3333-4444-555555555555" }
	b := e.mustStart(cfg)
	want := Cookie{BookieID: "b1", Instance: "11111111-2222-3333-4444-555555555555", Created: t0}
	if b.Cookie() != want {
		t.Fatalf("cookie %+v, want %+v", b.Cookie(), want)
	}
}
