package admin

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/stratamesh/strata/"

// TestImports: admin holds no broker, bookie, tiering or region logic:
// besides the standard library it imports only the name vocabularies
// (tenancy, broker/bundle) and mesh.json's model (for the client's
// targets).
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		module + "admin": true, module + "tenancy": true, module + "broker/bundle": true, module + "internal/meshfile": true,
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) && !allowed[p] {
			t.Errorf("admin depends on %s", p)
		}
	}
}

// TestNotImportedBelow: nothing at or below the broker imports admin
// (the broker, bookies, the replicator, tiering, metadata and tenancy
// know nothing of the admin API; region adapts them to it).
func TestNotImportedBelow(t *testing.T) {
	pkgs := []string{"../broker/...", "../bookie/...", "../replicator/...", "../tiered/...", "../internal/meta/...", "../tenancy/..."}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[min(1, len(fields)):] {
			if imp == module+"admin" {
				t.Errorf("%s imports admin", fields[0])
			}
		}
	}
}
