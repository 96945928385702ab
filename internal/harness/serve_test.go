package harness

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
)

// serveFake serves h on dir/fault.sock until the test ends.
func serveFake(t *testing.T, h *Harness, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ln, err := ListenSocket(filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- ServeListener(ctx, h, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, SocketName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind: %v", err)
		}
	})
}

func TestSocketRoundTrip(t *testing.T) {
	h, dir, ex := fakeHarness(t, Config{})
	for _, s := range []NodeSpec{fakeSpec(t, dir, "r1", "m1", RoleMeta), fakeSpec(t, dir, "r1", "b1", RoleBroker), fakeSpec(t, dir, "r2", "b1", RoleBroker)} {
		if _, err := h.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Dial(dir); err == nil || !strings.Contains(err.Error(), "is `strata up --data-dir") {
		t.Errorf("Dial with no socket: %v", err)
	}
	serveFake(t, h, dir)
	fi, err := os.Stat(filepath.Join(dir, SocketName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	r, err := Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var f Faults = r
	infos, err := f.Nodes()
	if err != nil || len(infos) != 3 || infos[1].Region != "r1" || infos[1].ID != "b1" || infos[1].State != StateRunning || infos[1].Report.SerfWAN != "wan-r1/b1" {
		t.Fatalf("Nodes: %+v %v", infos, err)
	}
	b1, _ := h.Node("r1", "b1")
	if err := f.Freeze("r1", "b1"); err != nil || b1.State() != StateFrozen {
		t.Fatalf("remote Freeze: %v, state %s", err, b1.State())
	}
	if err := f.Thaw("r1", "b1"); err != nil || b1.State() != StateRunning {
		t.Fatalf("remote Thaw: %v, state %s", err, b1.State())
	}
	if err := f.Kill("r1", "b1"); err != nil || b1.State() != StateExited {
		t.Fatalf("remote Kill: %v, state %s", err, b1.State())
	}
	if infos, _ := f.Nodes(); infos[1].State != StateExited || !infos[1].Intended || infos[1].Exit != "signal: killed" {
		t.Errorf("after Kill: %+v", infos[1])
	}
	if err := f.Freeze("r1", "b1"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("remote Freeze of a dead node: %v", err)
	}
	if err := f.Restart("r1", "b1"); err != nil || b1.State() != StateRunning {
		t.Fatalf("remote Restart: %v, state %s", err, b1.State())
	}
	if err := f.FreezeRegion("r2"); err != nil {
		t.Fatal(err)
	}
	if err := f.ThawRegion("r2"); err != nil {
		t.Fatal(err)
	}
	if err := f.RestartRegion("r1"); err != nil {
		t.Fatal(err)
	}
	if err := f.KillRegion("r1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Kill("r9", "b1"); !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "r9/b1") {
		t.Errorf("remote Kill of an unknown node: %v", err)
	}
	if err := f.Cut("r1", "r2"); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("remote Cut on loopback: %v", err)
	}
	if err := f.Heal("r1", "r2"); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("remote Heal on loopback: %v", err)
	}
	if err := f.Cut("r1", "r1"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("remote Cut of a region with itself: %v", err)
	}
	testutil.Eventually(t, "OnExit for the region kill", 10*time.Second, func() bool { return len(ex.of("r1/m1")) == 2 })
}

func TestSocketBadRequests(t *testing.T) {
	h, dir, _ := fakeHarness(t, Config{})
	serveFake(t, h, dir)
	path := filepath.Join(dir, SocketName)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	defer c.CloseIdleConnections()
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, want         string
	}{
		{"POST", "/v1/faults", "", 400, "bad_request", "not a JSON object"},
		{"POST", "/v1/faults", "{", 400, "bad_request", "not a JSON object"},
		{"POST", "/v1/faults", `{"op":"explode","region":"r"}`, 400, "bad_request", `unknown op "explode"`},
		{"POST", "/v1/faults", `{"op":"kill","region":"r"}`, 400, "bad_request", `op "kill" needs id`},
		{"POST", "/v1/faults", `{"op":"kill","region":"r","id":"b1","colour":"red"}`, 400, "bad_request", `unknown field "colour"`},
		{"POST", "/v1/faults", `{"op":"kill","region":"r","id":"b1"} {}`, 400, "bad_request", "more than one JSON value"},
		{"POST", "/v1/faults", `{"op":"kill","region":"r","id":"b1"}`, 404, "unknown_node", "r/b1"},
		{"POST", "/v1/faults", `{"op":"kill-region","region":"r","id":"b1"}`, 400, "bad_request", `takes no id`},
		{"POST", "/v1/faults", `{"op":"cut","a":"x"}`, 400, "bad_request", `needs b`},
		{"POST", "/v1/faults", `{"op":"cut","a":"x","b":"y"}`, 409, "no_network", "network namespaces"},
		{"POST", "/v1/faults", `{"op":"kill","region":"` + strings.Repeat("r", 5000) + `","id":"b"}`, 400, "bad_request", "at most 4096"},
		{"GET", "/v1/faults", "", 405, "bad_request", "use POST"},
		{"DELETE", "/v1/nodes", "", 405, "bad_request", "use GET"},
		{"GET", "/v2/other", "", 404, "bad_request", "no route GET /v2/other"},
	} {
		req, _ := http.NewRequest(tc.method, "http://x"+tc.path, strings.NewReader(tc.body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e errorBody
		if resp.StatusCode != tc.status || json.Unmarshal(b, &e) != nil || e.Code != tc.code || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s %s %.60q: %d %s; want %d %s containing %q", tc.method, tc.path, tc.body, resp.StatusCode, b, tc.status, tc.code, tc.want)
		}
	}
	// A stale socket file is replaced; a non-socket is refused.
	other := filepath.Join(dir, "plain")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenSocket(other); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("ListenSocket on a file: %v", err)
	}
}

func TestDecodeRequest(t *testing.T) {
	good := map[string]Request{
		`{"op":"kill","region":"r","id":"b"}`:  {Op: OpKill, Region: "r", ID: "b"},
		`{"op":"restart-region","region":"r"}`: {Op: OpRestartRegion, Region: "r"},
		` {"op":"heal","a":"x","b":"y"} `:      {Op: OpHeal, A: "x", B: "y"},
	}
	for body, want := range good {
		got, err := DecodeRequest([]byte(body))
		if err != nil || got != want {
			t.Errorf("%s: %+v %v", body, got, err)
		}
	}
	for _, body := range []string{``, `null`, `[]`, `"kill"`, `{"op":""}`, `{"op":"KILL","region":"r","id":"b"}`,
		`{"op":"freeze","id":"b"}`, `{"op":"thaw","region":"r","id":"b","a":"x"}`, `{"op":"cut","a":"x","b":"x"}`,
		`{"op":"cut","a":"x","b":"y","region":"r"}`, `{"op":"kill","region":"r","id":"b"}x`, `{"op":1}`} {
		if _, err := DecodeRequest([]byte(body)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v, want ErrBadRequest", body, err)
		}
	}
}

// FuzzDecodeRequest: any body either fails with ErrBadRequest or yields a
// request that passes its own check and survives a JSON round trip.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"op":"kill","region":"r","id":"b"}`, `{"op":"cut","a":"x","b":"y"}`, `{"op":"thaw-region","region":"eu"}`, `{`, `{"op":"kill"}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error not ErrBadRequest: %v", err)
			}
			return
		}
		if err := r.check(); err != nil {
			t.Fatalf("decoded request fails its check: %v", err)
		}
		b, _ := json.Marshal(r)
		r2, err := DecodeRequest(b)
		if err != nil || r2 != r {
			t.Fatalf("round trip: %+v → %s → %+v %v", r, b, r2, err)
		}
	})
}
