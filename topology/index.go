package topology

import (
	"strconv"
	"strings"
)

// pos is a 1-based line and column in a topology file.
type pos struct{ line, col int }

func (p pos) before(q pos) bool {
	return p.line < q.line || (p.line == q.line && p.col < q.col)
}

// index remembers where the decoder found each field path, so that the
// checks, which work on the decoded structs, can point into the text and
// can tell a field written as 0 from a field left out.
//
// Paths look like "regions[1].ledger.write_quorum"; the root is "".
type index struct {
	vals map[string]pos  // path → its value; null values are not recorded
	keys map[string]pos  // path → the key naming it (mapping fields only)
	bad  map[string]bool // paths whose value could not be decoded
}

func newIndex() *index {
	return &index{vals: map[string]pos{}, keys: map[string]pos{}, bad: map[string]bool{}}
}

// has reports whether path was written with a non-null value.
func (ix *index) has(path string) bool {
	_, ok := ix.vals[path]
	return ok
}

// at returns the position of path's value, or of its nearest ancestor that
// was written (a missing field points at its mapping), or 1:1.
func (ix *index) at(path string) pos {
	for {
		if p, ok := ix.vals[path]; ok {
			return p
		}
		if path == "" {
			return pos{1, 1}
		}
		path = parentPath(path)
	}
}

// isBad reports whether path or one of its ancestors failed to decode.
func (ix *index) isBad(path string) bool {
	for {
		if ix.bad[path] {
			return true
		}
		if path == "" {
			return false
		}
		path = parentPath(path)
	}
}

// field joins a mapping path and a key: field("regions[0]", "name").
func field(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// elem joins a list path and an index: elem("regions", 1) = "regions[1]".
func elem(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// parentPath strips the last step: "regions[1].ledger" → "regions[1]" →
// "regions" → "".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}
