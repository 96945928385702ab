package topology

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeShowsDefaultMesh keeps the README's copy of the default mesh
// (the file without its header comment) identical to the embedded one.
func TestReadmeShowsDefaultMesh(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(DefaultYAML()), "\n")
	i := 0
	for i < len(lines) && (lines[i] == "" || strings.HasPrefix(lines[i], "#")) {
		i++
	}
	body := strings.TrimRight(strings.Join(lines[i:], "\n"), "\n")
	if !strings.Contains(string(readme), "```yaml\n"+body+"\n```") {
		t.Fatal("README.md's default mesh differs from topology/default-mesh.yaml; copy the file (without its header comment) into the README")
	}
}
