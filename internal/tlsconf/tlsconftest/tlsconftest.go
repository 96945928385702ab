// Package tlsconftest makes TLS material for tests: a development CA with
// node and client certificates (tlsconf.EnsureDev) in the test's temporary
// directory, loaded into a tlsconf.Bundle.
package tlsconftest

import (
	"path/filepath"
	"testing"

	"github.com/stratamesh/strata/internal/tlsconf"
)

// New makes a development CA and certificates for one test and loads
// them; it fails the test on any error.
func New(t testing.TB) (*tlsconf.Bundle, tlsconf.Dev) {
	t.Helper()
	d, err := tlsconf.EnsureDev(filepath.Join(t.TempDir(), "secure"))
	if err != nil {
		t.Fatal(err)
	}
	files := d.TLS()
	b, err := tlsconf.Load(&files)
	if err != nil {
		t.Fatal(err)
	}
	return b, d
}
