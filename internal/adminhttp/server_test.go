package adminhttp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"github.com/stratamesh/strata/internal/tlsconf/tlsconftest"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/tlsconf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("decode %s: %v", url, err)
	}
	return resp.StatusCode, body
}

func TestHealthAndReadiness(t *testing.T) {
	var ready atomic.Bool
	s := New(nil)
	admin.Mount(s, admin.Routes(admin.Backends{Health: s}), nil)
	s.AddReadyCheck("etcd", func(context.Context) error {
		if !ready.Load() {
			return errors.New("etcd not reachable")
		}
		return nil
	})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	if code, _ := get(t, s.URL()+"/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	code, body := get(t, s.URL()+"/readyz")
	if code != 503 || body["failing"].(map[string]any)["etcd"] != "etcd not reachable" {
		t.Fatalf("readyz before ready = %d %v", code, body)
	}
	ready.Store(true)
	if code, body := get(t, s.URL()+"/readyz"); code != 200 {
		t.Fatalf("readyz when ready = %d %v", code, body)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := http.Get(s.URL() + "/healthz"); err == nil {
		t.Fatal("server still answers after Close")
	}
}

func TestRoutesAndErrors(t *testing.T) {
	s := New(nil)
	admin.Mount(s, admin.Routes(admin.Backends{Health: s}), nil)
	s.Handle("GET /admin/v1/thing", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteError(w, admin.Errorf(admin.CodeNotFound, "name", "no thing"))
	}))
	s.Handle("PUT /admin/v1/thing/setting", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	want := []string{"GET /admin/v1/thing", "GET /healthz", "GET /readyz", "PUT /admin/v1/thing/setting"}
	got := s.Routes()
	if len(got) != len(want) {
		t.Fatalf("Routes = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Routes = %v, want %v", got, want)
		}
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if code, body := get(t, s.URL()+"/admin/v1/nope"); code != 404 || body["error"].(map[string]any)["code"] != "not_found" {
		t.Fatalf("unknown path = %d %v, want a JSON 404", code, body)
	}
	code, body := get(t, s.URL()+"/admin/v1/thing")
	e := body["error"].(map[string]any)
	if code != 404 || e["code"] != "not_found" || e["field"] != "name" {
		t.Fatalf("error response = %d %v", code, body)
	}
	// A path that exists, with another method: 405 naming the methods.
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPost, "/admin/v1/thing", "GET, HEAD"},
		{http.MethodDelete, "/admin/v1/thing/setting", "PUT"},
		{http.MethodGet, "/admin/v1/thing/setting", "PUT"},
	} {
		req, err := http.NewRequest(c.method, s.URL()+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		e, _ := body["error"].(map[string]any)
		if err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") != c.allow || e["code"] != "method_not_allowed" ||
			!strings.Contains(e["message"].(string), "takes "+c.allow) {
			t.Errorf("%s %s = %d Allow %q %v (%v); want 405 allowing %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), body, err, c.allow)
		}
	}
}

func TestHTTPS(t *testing.T) {
	b, _ := tlsconftest.New(t)
	s := New(nil)
	admin.Mount(s, admin.Routes(admin.Backends{Health: s}), nil)
	if err := s.StartTLS("127.0.0.1:0", b.Server(tls.NoClientCert)); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s", s.URL())
	}
	ca, err := tlsconf.ClientFromFiles("ca", b.Files().CAFile, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: ca}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(s.URL() + "/healthz")
	if err != nil {
		t.Fatalf("HTTPS with the CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: plain}).Get("http://" + s.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served")
		}
	}
	untrusting := &http.Transport{}
	defer untrusting.CloseIdleConnections()
	if _, err := (&http.Client{Transport: untrusting}).Get(s.URL() + "/healthz"); err == nil {
		t.Error("a client without the CA trusted the server")
	}
}
