package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the module path; patterns starting with "./" are relative
// to it.
const module = "github.com/stratamesh/strata"

// Pattern syntax, in every column of the table:
//
//	"./broker"        the module package broker, exactly
//	"./broker/..."    broker and every package below it
//	"./..."           every package of the module
//	"net"             the standard-library package net, exactly
//	"net/..."         net and every package below it (net/http, ...)
//	"go.etcd.io/..."  a third-party tree (full import path)
//	"third-party"     any package that is neither the module's nor the
//	                  standard library's (its first path element has a dot)
//
// Direct rules look at a package's own (non-test) imports; transitive
// rules at everything it depends on. Test files are not checked.
type rule struct {
	name string   // what the failure message calls the rule
	pkgs []string // the packages the rule is about
	// transitive: check every dependency, not only the package's own
	// imports.
	transitive bool
	// not: the package must not import any of these.
	not []string
	// only: if set, the only module packages it may import (the standard
	// library and third parties are governed by not).
	only []string
}

var (
	// noIO is what a pure core keeps out of its own imports: no files,
	// sockets, locks, randomness, syscalls, unsafe or contexts.
	noIO = []string{"os/...", "net/...", "sync/...", "math/rand/...", "crypto/rand/...", "syscall/...", "unsafe/...", "context/..."}

	// below is every package that sits under region: they know nothing
	// of region (which wires them) or of the binary.
	below = []string{"./broker/...", "./bookie/...", "./replicator/...", "./tiered/...", "./tenancy/..."}
)

// rules is the layering of the module, top to bottom.
var rules = []rule{
	{
		name: "cmd/strata may import anything",
		pkgs: []string{"./cmd/strata"},
	},
	{
		name:       "below region: no region, no cmd",
		pkgs:       below,
		transitive: true,
		not:        []string{"./region/...", "./cmd/..."},
		// internal/... is not in this rule: internal/status imports region.
	},
	{
		name:       "internal packages: no cmd",
		pkgs:       []string{"./internal/..."},
		transitive: true,
		not:        []string{"./cmd/..."},
	},
	{
		name:       "admin holds no broker, bookie, tiering or region logic: only the name vocabularies, mesh.json's model and the audit's summaries",
		pkgs:       []string{"./admin"},
		transitive: true,
		only:       []string{"./admin", "./tenancy", "./broker/bundle", "./internal/meshfile", "./internal/audit"},
	},
	{
		name: "the audit core (summaries, their comparison, the run over an interface) does no network or file I/O: standard library only",
		pkgs: []string{"./internal/audit"},
		not:  []string{"net/...", "os/...", "syscall/...", "unsafe/...", "third-party", "./..."},
	},
	{
		name:       "nothing at or below the broker imports admin (region adapts them to it)",
		pkgs:       []string{"./broker/...", "./bookie/...", "./replicator/...", "./tiered/...", "./internal/meta/...", "./tenancy/..."},
		transitive: true,
		not:        []string{"./admin/..."},
	},
	{
		name:       "bookies know nothing of the broker",
		pkgs:       []string{"./bookie/..."},
		transitive: true,
		not:        []string{"./broker/..."},
	},
	{
		name:       "topology is the YAML model: no broker, bookie or region",
		pkgs:       []string{"./topology/..."},
		transitive: true,
		not:        []string{"./broker/...", "./bookie/...", "./region/..."},
	},
	{
		name: "tenancy is pure Go: no net, os or clock, no module package",
		pkgs: []string{"./tenancy"}, // not tenancy/store, the etcd driver
		not:  []string{"net/...", "os/...", "time/...", "./..."},
	},
	{
		name: "tenancy/creds signs credentials and does no I/O: no net, os or etcd; of the module, tenancy only",
		pkgs: []string{"./tenancy/creds"},
		not:  []string{"net/...", "os/...", "go.etcd.io/..."},
		only: []string{"./tenancy"},
	},
	{
		name: "the ledger core does no I/O and keeps no time",
		pkgs: []string{"./bookie/ledger/core"},
		not:  slices.Concat(noIO, []string{"time/..."}),
	},
	{
		name:       "the ledger core depends on no network, gRPC or etcd",
		pkgs:       []string{"./bookie/ledger/core"},
		transitive: true,
		not:        []string{"net/...", "google.golang.org/grpc/...", "go.etcd.io/..."},
	},
	{
		name: "the replicator core does no I/O: standard library, ackset and tenancy only",
		pkgs: []string{"./replicator"},
		not:  slices.Concat(noIO, []string{"log/...", "third-party"}),
		only: []string{"./internal/ackset", "./tenancy"},
	},
	{
		name:       "the replicator core depends on no network and not on the broker",
		pkgs:       []string{"./replicator"},
		transitive: true,
		not:        []string{"net/...", "./broker/..."},
	},
	{
		name: "the consumer core does no I/O and uses no third party",
		pkgs: []string{"./broker/consumer"},
		not:  slices.Concat(noIO, []string{"log/...", "third-party"}),
	},
	{
		name: "only the harness starts node processes: up and the bench mesh starters do not exec",
		pkgs: []string{"./internal/supervisor", "./bench/benchnode", "./bench/benchmesh"},
		not:  []string{"os/exec"},
	},
	{
		name: "jsapi is wire vocabulary: standard library only, no I/O packages",
		pkgs: []string{"./broker/jsapi"},
		not:  []string{"net", "os", "log", "log/slog", "sync", "time/tzdata", "third-party", "./..."},
	},
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

func TestLayering(t *testing.T) {
	pkgs, mine := list(t)
	for _, r := range rules {
		var about []string
		for _, p := range mine {
			if matchAny(r.pkgs, p) {
				about = append(about, p)
			}
		}
		if len(about) == 0 {
			t.Errorf("rule %q: %v matches no package of the module", r.name, r.pkgs)
			continue
		}
		for _, pat := range slices.Concat(r.not, r.only) {
			if strings.HasPrefix(pat, "./") && !slices.ContainsFunc(mine, func(p string) bool { return match(pat, p) }) {
				t.Errorf("rule %q: %s matches no package of the module", r.name, pat)
			}
		}
		for _, p := range about {
			imps := pkgs[p].Imports
			if r.transitive {
				imps = pkgs[p].Deps
			}
			for _, imp := range imps {
				bad := matchAny(r.not, imp)
				if r.only != nil && inModule(imp) && imp != p && !matchAny(r.only, imp) {
					bad = true
				}
				if !bad {
					continue
				}
				if r.transitive {
					t.Errorf("%s depends on %s (%s), breaking rule %q", rel(p), rel(imp), strings.Join(chain(pkgs, p, imp), " → "), r.name)
				} else {
					t.Errorf("%s imports %s, breaking rule %q", rel(p), rel(imp), r.name)
				}
			}
		}
	}
}

// list runs go list once over the whole module, from its root.
func list(t *testing.T) (all map[string]*pkg, mine []string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Deps,Standard", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	all = map[string]*pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		all[p.ImportPath] = p
		if inModule(p.ImportPath) {
			mine = append(mine, p.ImportPath)
		}
	}
	if len(mine) == 0 {
		t.Fatalf("go list in %s found no package of %s", root, module)
	}
	return all, mine
}

// moduleRoot is the nearest directory at or above the test's own (the
// working directory of a test) holding a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = up
	}
}

// chain is one import path from p to dep, both included.
func chain(all map[string]*pkg, p, dep string) []string {
	from := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == dep {
			var path []string
			for ; cur != ""; cur = from[cur] {
				path = append([]string{rel(cur)}, path...)
			}
			return path
		}
		if all[cur] == nil {
			continue
		}
		for _, next := range all[cur].Imports {
			if _, seen := from[next]; !seen {
				from[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return []string{rel(p), "…", rel(dep)}
}

func matchAny(patterns []string, path string) bool {
	for _, pat := range patterns {
		if match(pat, path) {
			return true
		}
	}
	return false
}

// match reports whether the import path matches one pattern of the
// table (see the syntax above rule).
func match(pat, path string) bool {
	if pat == "third-party" {
		first, _, _ := strings.Cut(path, "/")
		return !inModule(path) && strings.Contains(first, ".")
	}
	if rest, ok := strings.CutPrefix(pat, "."); ok {
		pat = module + rest
	}
	if base, ok := strings.CutSuffix(pat, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pat
}

func inModule(path string) bool {
	return path == module || strings.HasPrefix(path, module+"/")
}

// rel shortens the module's import paths for messages.
func rel(path string) string {
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

// nodeCommand is how code runs `strata node` itself: an exec.Command whose
// arguments begin with "node", or a "node" argument list handed to one.
var nodeCommand = regexp.MustCompile(`exec\.Command(Context)?\([^\n]*"node"|\[\]string\{"node"`)

// TestOnlyHarnessStartsNodes: no Go file of the module, tests included,
// starts a `strata node` process except internal/harness (issue 26: one
// copy of the process code). Packages may still exec other programs
// (git, wrk, the strata CLI, `strata up`). A "node" argument list is
// allowed where it is handed to the harness (SpecFromArgs drops it).
func TestOnlyHarnessStartsNodes(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		r, _ := filepath.Rel(root, path)
		if strings.HasPrefix(filepath.ToSlash(r), "internal/harness/") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		if !strings.Contains(src, `"os/exec"`) {
			return nil // a "node" argument list without exec goes to the harness
		}
		for i, line := range strings.Split(src, "\n") {
			if nodeCommand.MatchString(line) {
				t.Errorf("%s:%d starts `strata node` itself; start nodes through internal/harness:\n\t%s", r, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
