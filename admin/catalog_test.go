package admin

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestCatalog: codes are unique snake_case, each with a 4xx/5xx status
// and a description; every Code constant has a row and every row a
// constant; and no code is made up outside the catalog (a Code
// conversion anywhere in the packages that answer admin requests), so
// that every code the API emits is in the catalog.
func TestCatalog(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range catalog {
		if seen[c.Code] {
			t.Errorf("%s twice", c.Code)
		}
		seen[c.Code] = true
		if !snakeCase.MatchString(string(c.Code)) {
			t.Errorf("%q is not snake_case", c.Code)
		}
		if c.Status < 400 || c.Status > 599 || c.Description == "" {
			t.Errorf("bad row %+v", c)
		}
		if got, ok := Lookup(c.Code); !ok || got != c || c.Code.Status() != c.Status {
			t.Errorf("Lookup(%s) = %+v, %v", c.Code, got, ok)
		}
	}
	if len(Catalog()) != len(catalog) {
		t.Error("Catalog copy")
	}
	if Code("no_such_code").Status() != 500 {
		t.Error("an unknown code is not a 500")
	}

	// The constants, from the source.
	consts := codeConstants(t, ".")
	for name, value := range consts {
		if !seen[Code(value)] {
			t.Errorf("constant %s = %q has no catalog row", name, value)
		}
	}
	if len(consts) != len(catalog) {
		t.Errorf("%d Code constants, %d catalog rows: every row needs its constant", len(consts), len(catalog))
	}

	// No made-up codes: a conversion to Code outside catalog.go, in this
	// package or in those that answer admin requests with its errors.
	for _, dir := range []string{".", "../region", "../internal/adminhttp", "../cmd/strata"} {
		for _, file := range goFiles(t, dir) {
			if filepath.Base(file) == "catalog.go" {
				continue
			}
			fset := token.NewFileSet()
			af, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(af, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					return true
				}
				switch fn := call.Fun.(type) {
				case *ast.Ident:
					ok = fn.Name == "Code" && dir == "."
				case *ast.SelectorExpr:
					x, isIdent := fn.X.(*ast.Ident)
					ok = isIdent && x.Name == "admin" && fn.Sel.Name == "Code"
				default:
					ok = false
				}
				if ok && !strings.HasSuffix(file, "_test.go") {
					t.Errorf("%s: a code made up outside the catalog (use a Code constant)", fset.Position(call.Pos()))
				}
				return true
			})
		}
	}
}

// codeConstants returns the package's constants of type Code by name.
func codeConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, file := range goFiles(t, dir) {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Errorf("constant %s is not a string literal", name.Name)
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					out[name.Name] = v
				}
			}
		}
	}
	return out
}

func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}
