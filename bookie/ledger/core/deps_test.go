package core

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDependencies: the core does no I/O and keeps no time (CONVENTIONS
// "dependency rules as tests"; tailscale's tstest/deptest is the model).
// Its own imports exclude os, net, time, sync, randomness and syscalls;
// nothing it depends on, transitively, is net, gRPC or etcd; its code
// starts no goroutine.
func TestDependencies(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		for _, bad := range []string{"os", "net", "time", "sync", "math/rand", "crypto/rand", "syscall", "unsafe", "context"} {
			if imp == bad || strings.HasPrefix(imp, bad+"/") {
				t.Errorf("core imports %s", imp)
			}
		}
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"net", "google.golang.org/grpc", "go.etcd.io"} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("core depends on %s", dep)
			}
		}
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
