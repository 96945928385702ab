package bookie

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestBookieRegistersAndServes: a started bookie is registered with its
// address and instance, republishes read-only and free-space changes,
// serves its instance, and deregisters on Stop.
func TestBookieRegistersAndServes(t *testing.T) {
	e := newBookieEnv(t)
	ctx := testCtx(t)
	cfg := e.config("b1", "127.0.0.1:0")
	cfg.FreeBytesDelta = 1 << 20
	b := e.mustStart(cfg)
	mem := e.mems[0]

	getReg := func() (Registration, error) {
		r, _, err := meta.GetJSON[Registration](ctx, e.store, RegistrationKey("b1"))
		return r, err
	}
	reg, err := getReg()
	want := Registration{ID: "b1", Address: b.Addr(), Instance: b.Instance(), FreeBytes: 1 << 30, TotalBytes: 2 << 30}
	if err != nil || reg != want {
		t.Fatalf("registration %+v, %v; want %+v", reg, err, want)
	}
	regs, err := ListRegistrations(ctx, e.store)
	if err != nil || len(regs) != 1 || regs[0] != want {
		t.Fatalf("ListRegistrations = %+v, %v", regs, err)
	}

	info := b.Info()
	if info.BookieID != "b1" || info.Instance != b.Instance() || info.Address != b.Addr() || info.FreeBytes != 1<<30 {
		t.Fatalf("Info = %+v", info)
	}
	c, err := Dial(ctx, b.Addr(), DialOptions{Instance: reg.Instance})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := addSync(t, openAdds(t, c), addReq(1, 0)); err != nil {
		t.Fatal(err)
	}

	// Read-only flips are published.
	mem.SetReadOnly(true)
	took := testutil.Eventually(t, "read-only registration", 10*time.Second, func() bool {
		r, err := getReg()
		return err == nil && r.ReadOnly
	})
	t.Logf("read-only published after %v", took)
	// A small change of free space is not; a large one is.
	mem.SetUsage(storage.Usage{FreeBytes: 1<<30 - 1000, TotalBytes: 2 << 30, ReadOnly: true})
	b.Registrar().Refresh()
	mem.SetUsage(storage.Usage{FreeBytes: 1<<30 - 2<<20, TotalBytes: 2 << 30, ReadOnly: true})
	testutil.Eventually(t, "free space registration", 10*time.Second, func() bool {
		r, err := getReg()
		return err == nil && r.FreeBytes == 1<<30-2<<20
	})

	e.stop(b)
	if _, err := getReg(); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("registration after Stop: %v", err)
	}
	if _, err := e.store.Get(ctx, CookieKey("b1")); err != nil {
		t.Fatalf("cookie gone after Stop: %v", err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestRegistrationChanged(t *testing.T) {
	base := Registration{ID: "b1", Address: "a:1", Instance: "i", FreeBytes: 10 << 30, TotalBytes: 20 << 30}
	cases := []struct {
		name  string
		mod   func(*Registration)
		delta int64
		want  bool
	}{
		{"same", func(*Registration) {}, 0, false},
		{"read-only", func(r *Registration) { r.ReadOnly = true }, 0, true},
		{"address", func(r *Registration) { r.Address = "a:2" }, 0, true},
		{"instance", func(r *Registration) { r.Instance = "j" }, 0, true},
		{"free -100 MiB under the 1% default (204 MiB)", func(r *Registration) { r.FreeBytes -= 100 << 20 }, 0, false},
		{"free -300 MiB over the 1% default", func(r *Registration) { r.FreeBytes -= 300 << 20 }, 0, true},
		{"free +300 MiB over the 1% default", func(r *Registration) { r.FreeBytes += 300 << 20 }, 0, true},
		{"free -100 MiB over an explicit 50 MiB", func(r *Registration) { r.FreeBytes -= 100 << 20 }, 50 << 20, true},
	}
	for _, c := range cases {
		cur := base
		c.mod(&cur)
		if got := registrationChanged(base, cur, c.delta); got != c.want {
			t.Errorf("%s: changed = %v, want %v", c.name, got, c.want)
		}
	}
	// A 1 GiB disk: 1% is 10 MiB, below the 64 MiB floor.
	small := Registration{FreeBytes: 512 << 20, TotalBytes: 1 << 30}
	for _, c := range []struct {
		free int64
		want bool
	}{{512<<20 - 32<<20, false}, {512<<20 - 64<<20, true}} {
		cur := small
		cur.FreeBytes = c.free
		if got := registrationChanged(small, cur, 0); got != c.want {
			t.Errorf("small disk, free %d MiB: changed = %v, want %v", c.free>>20, got, c.want)
		}
	}
}

// TestRegistrarSuperseded: when another instance replaces the cookie in
// etcd, the running bookie stops registering and reports it on Fatal.
func TestRegistrarSuperseded(t *testing.T) {
	e := newBookieEnv(t)
	ctx := testCtx(t)
	b := e.mustStart(e.config("b1", "127.0.0.1:0"))
	if _, err := meta.PutJSON(ctx, e.store, CookieKey("b1"), Cookie{BookieID: "b1", Instance: "usurper", Created: t0}); err != nil {
		t.Fatal(err)
	}
	e.mems[0].SetReadOnly(true) // a change to publish
	b.Registrar().Refresh()
	err := recv(t, b.Fatal(), 10*time.Second, "fatal error")
	if !errors.Is(err, ErrCookieMismatch) || !strings.Contains(err.Error(), "took the id over") {
		t.Fatalf("fatal = %v", err)
	}
	testutil.Eventually(t, "registration revoked", 10*time.Second, func() bool {
		_, err := e.store.Get(ctx, RegistrationKey("b1"))
		return errors.Is(err, meta.ErrNotFound)
	})
}

// TestRegistrarReregistersAfterLeaseLoss: when the lease expires (the
// bookie paused, etcd lost it), the Registrar registers again under a new
// lease.
func TestRegistrarReregistersAfterLeaseLoss(t *testing.T) {
	e := newBookieEnv(t)
	ctx := testCtx(t)
	b := e.mustStart(e.config("b1", "127.0.0.1:0"))
	kv, err := e.store.Get(ctx, RegistrationKey("b1"))
	if err != nil {
		t.Fatal(err)
	}
	b.reg.mu.Lock()
	l := b.reg.lease
	b.reg.mu.Unlock()
	l.Orphan()
	took := testutil.Eventually(t, "registration under a new lease", 20*time.Second, func() bool {
		kv2, err := e.store.Get(ctx, RegistrationKey("b1"))
		return err == nil && kv2.Lease != kv.Lease
	})
	t.Logf("re-registered %v after the lease was orphaned (TTL %v)", took, l.TTL())
}

func TestConfigValidation(t *testing.T) {
	err := BookieConfig{ListenAddr: "0.0.0.0:0", RegistrationTTL: time.Second, RefreshInterval: -1, FreeBytesDelta: -1,
		Limits: Limits{MaxEntrySize: MaxMessageSize, MaxAddsInFlight: -1}}.Validate()
	for _, want := range []string{"bookie id", "DataDir is required", "Meta is required", "OpenStorage is required",
		"AdvertiseAddr is required", "RegistrationTTL 1s", "RefreshInterval", "FreeBytesDelta", "MaxEntrySize", "MaxAddsInFlight"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("BookieConfig.Validate() = %v; want it to mention %q", err, want)
		}
	}
	if err := (BookieConfig{ListenAddr: "nonsense"}).Validate(); err == nil || !strings.Contains(err.Error(), "ListenAddr") {
		t.Errorf("bad ListenAddr: %v", err)
	}
	err = ServerConfig{BookieID: "a/b"}.Validate()
	for _, want := range []string{"Storage is required", `"a/b"`, "Instance is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ServerConfig.Validate() = %v; want it to mention %q", err, want)
		}
	}
	err = RegistrarConfig{TTL: time.Second}.Validate()
	for _, want := range []string{"Store is required", "State is required", "TTL 1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RegistrarConfig.Validate() = %v; want it to mention %q", err, want)
		}
	}
	if _, err := StartBookie(context.Background(), BookieConfig{}); err == nil {
		t.Error("StartBookie accepted an empty config")
	}
}

// TestStartBookieFailureCleansUp: a failing start (storage cannot open,
// port taken) leaves nothing running and nothing registered.
func TestStartBookieFailureCleansUp(t *testing.T) {
	e := newBookieEnv(t)
	cfg := e.config("b1", "127.0.0.1:0")
	cfg.OpenStorage = func(context.Context) (storage.Storage, error) { return nil, errors.New("no disk") }
	if _, err := e.start(cfg); err == nil || !strings.Contains(err.Error(), "no disk") {
		t.Fatalf("start with failing storage: %v", err)
	}
	b := e.mustStart(e.config("b1", "127.0.0.1:0"))
	_, err := e.start(e.config("b1", b.Addr()))
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("start on a taken port: %v", err)
	}
	if !closedMem(e.mems[len(e.mems)-1]) {
		t.Fatal("storage of the failed start left open")
	}
}

// closedMem reports whether m was closed.
func closedMem(m interface{ LAC(int64) (int64, error) }) bool {
	_, err := m.LAC(0)
	return errors.Is(err, storage.ErrClosed)
}
