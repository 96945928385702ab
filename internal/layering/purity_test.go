package layering

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// purity lists the deterministic cores (CONVENTIONS.md item 1) and what
// their code must not do, beyond what they may import (the layering
// table): start goroutines, or read the wall clock and make timers (time's
// types and arithmetic are fine: time is passed in).
var purity = []struct {
	dir     string
	noClock bool
}{
	{"bookie/ledger/core", false}, // imports no time at all (the layering table)
	{"broker/consumer", true},
	{"replicator", true},
	{"replicator/failback", true},
	{"tenancy", true}, // imports no time at all
}

// TestCoresArePure: no core in purity starts a goroutine; those marked
// noClock call none of time's clock or timer functions.
func TestCoresArePure(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true}
	for _, p := range purity {
		pkg, err := build.ImportDir(filepath.Join(root, p.dir), 0)
		if err != nil {
			t.Fatalf("%s: %v", p.dir, err)
		}
		fset := token.NewFileSet()
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			timeName := ""
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
					timeName = "time"
					if imp.Name != nil {
						timeName = imp.Name.Name
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: the core %s starts a goroutine", fset.Position(n.Pos()), p.dir)
				case *ast.SelectorExpr:
					if id, ok := n.X.(*ast.Ident); ok && p.noClock && id.Name == timeName && clock[n.Sel.Name] {
						t.Errorf("%s: the core %s reads the clock (time.%s)", fset.Position(n.Pos()), p.dir, n.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
