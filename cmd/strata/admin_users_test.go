package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratamesh/strata/admin"
)

// TestUsersAddWritesCreds: `users add` sends the flags as the request,
// writes the answer's .creds to -o with mode 0600, prints how to use it,
// and refuses to overwrite a file (before asking the mesh).
func TestUsersAddWritesCreds(t *testing.T) {
	var got admin.UserRequest
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/admin/v1/tenants/pay/users" {
			http.NotFound(w, r)
			return
		}
		calls++
		_ = json.NewDecoder(r.Body).Decode(&got)
		admin.WriteJSON(w, http.StatusCreated, admin.UserCreated{UserInfo: admin.UserInfo{Tenant: "pay", Name: got.Name, PublicKey: "UABC"}, Creds: "CREDS TEXT\n"})
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "sub", "alice.creds")
	run := func() (string, error) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"admin", "tenants", "users", "add", "pay", "alice", "--url", srv.URL,
			"--pub", "pay.orders.>", "--pub", "$JS.API.>", "--sub", "_INBOX.>", "--deny-sub", "pay.secret", "--expiry", "30d", "-o", file})
		err := root.Execute()
		return out.String(), err
	}
	out, err := run()
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "alice" || strings.Join(got.Pub.Allow, " ") != "pay.orders.> $JS.API.>" || got.Sub.Allow[0] != "_INBOX.>" ||
		got.Sub.Deny[0] != "pay.secret" || got.Expiry.String() != "30d" {
		t.Fatalf("request %+v", got)
	}
	b, err := os.ReadFile(file)
	st, _ := os.Stat(file)
	if err != nil || string(b) != "CREDS TEXT\n" || st.Mode().Perm() != 0o600 {
		t.Fatalf("creds file %q %v %v", b, st.Mode(), err)
	}
	if !strings.Contains(out, "nats --creds "+file) {
		t.Fatalf("output does not say how to use the file:\n%s", out)
	}
	if _, err := run(); err == nil || !strings.Contains(err.Error(), "exists") || calls != 1 {
		t.Fatalf("a second add over the file: %v (%d calls)", err, calls)
	}
}

// TestUsersArgs: bad names and expiries are refused before any request.
func TestUsersArgs(t *testing.T) {
	for _, args := range [][]string{
		{"add", "pay", "a.b"}, {"add", "p y", "al"}, {"add", "pay", "al", "--expiry", "soon"},
		{"revoke", "pay", "a>"}, {"list", "p.y"},
	} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"admin", "tenants", "users"}, append(args, "--url", "http://127.0.0.1:1")...))
		err := root.Execute()
		if err == nil || strings.Contains(err.Error(), "connect") {
			t.Errorf("%v: %v, want a refusal before any request", args, err)
		}
	}
}
