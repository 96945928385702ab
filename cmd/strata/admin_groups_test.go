package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stratamesh/strata/admin"
)

// TestAdminGroupsRefuseUnknownSubcommands: a typo under `admin` or one of
// its groups is an error (non-zero exit), not the group's help with exit
// 0; the bare group prints its help.
func TestAdminGroupsRefuseUnknownSubcommands(t *testing.T) {
	for _, args := range [][]string{
		{"admin", "lst"}, {"admin", "bookies", "lst"}, {"admin", "ledgers", "lst"},
		{"admin", "topics", "lst"}, {"admin", "bundles", "lst"},
	} {
		root := newRoot()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), `unknown command "lst"`) {
			t.Errorf("strata %s: %v, want an unknown-command error", strings.Join(args, " "), err)
		}
	}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"admin", "bookies"})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "list") {
		t.Fatalf("strata admin bookies: %v, output %q; want its help", err, out.String())
	}
}

// TestReadOnlyNamesTheBookie: `admin bookies read-only ID` sends the id it
// means, so that a bookie reached by a wrong --url refuses (409) instead
// of being drained under another name; the refusal is the command's error.
func TestReadOnlyNamesTheBookie(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != "/admin/v1/bookie/read-only" {
			http.NotFound(w, r)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		admin.WriteError(w, admin.Errorf(admin.CodeWrongBookie, "bookie", "this is bookie r1/k1, not k2: nothing changed (check the URL)"))
	}))
	defer srv.Close()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"admin", "bookies", "read-only", "k2", "on", "--url", srv.URL, "--region", "r2"})
	err := root.Execute()
	if got["bookie"] != "k2" || got["region"] != "r2" || got["read_only"] != true {
		t.Fatalf("request body %v, want read_only true for bookie r2/k2", got)
	}
	if err == nil || !strings.Contains(err.Error(), "wrong_bookie") || strings.Contains(out.String(), "read-only") {
		t.Fatalf("a refusal by another bookie: err %v, output %q", err, out.String())
	}
}
