package meta

import (
	"crypto/tls"
	"github.com/stratamesh/strata/internal/tlsconf/tlsconftest"
	"strings"
	"testing"
)

// TestEmbeddedTLSAndAuth: an embedded etcd with TLS and a root password
// serves a client with the node certificate that logs in as root, keeps
// doing so after a restart, and refuses a client without a certificate
// and one that does not log in.
func TestEmbeddedTLSAndAuth(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b, _ := tlsconftest.New(t)
	cfg := DefaultEmbeddedConfig()
	cfg.Dir = t.TempDir()
	cfg.Fast = true
	cfg.TLS = &EmbeddedTLS{CAFile: b.Files().CAFile, CertFile: b.Files().CertFile, KeyFile: b.Files().KeyFile}
	cfg.RootPassword = b.EtcdPassword
	for round := range 2 { // the second start finds auth on already
		e, err := StartEmbedded(ctx, cfg)
		if err != nil {
			t.Fatalf("start %d: %v", round, err)
		}
		if !strings.HasPrefix(e.ClientURL(), "https://") {
			t.Errorf("client URL %s", e.ClientURL())
		}
		eps := []string{e.ClientURL()}
		s, err := Open(ctx, Config{Endpoints: eps, TLS: b.Client(), Username: RootUser, Password: b.EtcdPassword})
		if err != nil {
			t.Fatalf("start %d: root over TLS: %v", round, err)
		}
		if _, err := s.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatalf("start %d: put as root: %v", round, err)
		}
		s.Close()
		refused := map[string]Config{
			"anonymous with the node certificate": {TLS: b.Client()},
			"wrong password":                      {TLS: b.Client(), Username: RootUser, Password: "guess"},
			"no client certificate":               {TLS: &tls.Config{RootCAs: b.Client().RootCAs}, Username: RootUser, Password: b.EtcdPassword},
		}
		for name, c := range refused {
			c.Endpoints, c.DialTimeout = eps, 2e9
			s, err := Open(ctx, c)
			if err == nil {
				_, err = s.Get(ctx, "k")
				s.Close()
			}
			if err == nil {
				t.Errorf("start %d: %s: served", round, name)
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
