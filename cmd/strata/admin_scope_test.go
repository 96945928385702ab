package main

import "testing"

// TestScopedPath: the list commands' optional tenant[/namespace] scope,
// and the malformed arguments it refuses.
func TestScopedPath(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "/admin/v1/bundles"},
		{[]string{"demo"}, "/admin/v1/bundles/demo"},
		{[]string{"demo/streams"}, "/admin/v1/bundles/demo/streams"},
	} {
		if got, err := scopedPath("/admin/v1/bundles", tc.args); err != nil || got != tc.want {
			t.Errorf("scopedPath(%v) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "/ns", "demo/", "demo/a/b", "de mo", "demo/ns?x"} {
		if got, err := scopedPath("/admin/v1/bundles", []string{bad}); err == nil {
			t.Errorf("scopedPath(%q) = %q, accepted", bad, got)
		}
	}
}
