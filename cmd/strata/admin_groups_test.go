package main

import (
	"bytes"
	"strings"
	"testing"
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
