package replicator

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestDependencies: the core does no I/O, keeps no clock, draws no random
// numbers and starts no goroutine (CONVENTIONS.md item 1 and "dependency
// rules as tests"). Its non-test files import neither net nor os nor the
// broker, directly or (for net and the broker) through any dependency.
// It may use time's types and arithmetic, never the wall clock or timers.
func TestDependencies(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		for _, bad := range []string{"os", "net", "sync", "math/rand", "crypto/rand", "syscall", "unsafe", "context", "log"} {
			if imp == bad || strings.HasPrefix(imp, bad+"/") {
				t.Errorf("replicator imports %s", imp)
			}
		}
		// internal/ackset (the subscription sets' ranges) and tenancy (the
		// topic names) are plain Go on the standard library too.
		if strings.Contains(imp, ".") && imp != "github.com/stratamesh/strata/internal/ackset" && imp != "github.com/stratamesh/strata/tenancy" {
			t.Errorf("replicator imports %s (the core uses the standard library only)", imp)
		}
	}

	// Transitively: go list -deps over the non-test files.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net" || strings.HasPrefix(dep, "net/") ||
			dep == "github.com/stratamesh/strata/broker" || strings.HasPrefix(dep, "github.com/stratamesh/strata/broker/") {
			t.Errorf("replicator depends on %s", dep)
		}
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
