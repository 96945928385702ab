package topology

import (
	_ "embed"
	"slices"
)

// DefaultFilename is the file name used in problem positions for the
// embedded default mesh.
const DefaultFilename = "default-mesh.yaml"

//go:embed default-mesh.yaml
var defaultYAML []byte

// DefaultYAML returns the embedded default mesh file: three regions
// (us-east, eu-west, ap-south) of 2 brokers and 4 bookies each, a demo
// tenant without quotas and a metered tenant with some. The result is a
// copy.
func DefaultYAML() []byte {
	return slices.Clone(defaultYAML)
}

// Default returns the default mesh, parsed afresh on each call so that the
// caller may change it. It panics if the embedded file is invalid, which a
// test rules out.
func Default() *Mesh {
	m, _, err := Parse(DefaultFilename, defaultYAML)
	if err != nil {
		panic("topology: the embedded default mesh is invalid:\n" + err.Error())
	}
	return m
}
