package topology

import (
	"strings"
	"testing"
)

func TestByteOrderMarkIgnored(t *testing.T) {
	src := "\xEF\xBB\xBFmesh: m\nregions:\n  - name: r1\n"
	if _, _, err := Parse("bom.yaml", []byte(src)); err != nil {
		t.Fatalf("a file starting with a UTF-8 BOM: %v", err)
	}
}

func TestDeepNestingRefused(t *testing.T) {
	deep := "mesh: m\nregions: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n"
	_, _, err := Parse("deep.yaml", []byte(deep))
	want := "deep.yaml:2:74: $: flow collections ([ ] and { }) nest deeper than 64 levels"
	if err == nil || err.Error() != want {
		t.Fatalf("deep nesting: %v, want %q", err, want)
	}
	// Brackets inside quotes and comments do not count.
	ok := "mesh: m # " + strings.Repeat("[", 100) + "\nregions:\n  - name: r1\n    wan_join: ['" + strings.Repeat("{", 100) + "']\n"
	_, _, err = Parse("quoted.yaml", []byte(ok))
	if err != nil && strings.Contains(err.Error(), "nest deeper") {
		t.Fatalf("brackets in quotes or comments counted: %v", err)
	}
}

func TestHugeFileRefused(t *testing.T) {
	big := "mesh: m\n#" + strings.Repeat("x", MaxFileSize) + "\n"
	if _, _, err := Parse("big.yaml", []byte(big)); err == nil || !strings.Contains(err.Error(), "may be at most") {
		t.Fatalf("huge file: %v", err)
	}
}
