package consumer

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestNoGoroutinesNoClock: the core keeps no clock and starts no
// goroutine (CONVENTIONS.md item 1 and "dependency rules as tests"). It
// may use time's types and arithmetic, never the wall clock or timers.
// What it may import (no I/O packages, no third parties) is
// internal/layering's table.
func TestNoGoroutinesNoClock(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		timeName := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: the core starts a goroutine", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == timeName && clock[n.Sel.Name] {
					t.Errorf("%s: the core reads the clock (time.%s)", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
}
