package core

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"testing"
)

// TestNoGoroutines: the core's code starts no goroutine (CONVENTIONS
// "dependency rules as tests"). What it may import (no os, net, time,
// sync, randomness, syscalls; no net, gRPC or etcd underneath) is
// internal/layering's table.
func TestNoGoroutines(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: the core starts a goroutine", fset.Position(g.Pos()))
			}
			return true
		})
	}
}
