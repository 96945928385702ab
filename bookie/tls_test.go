package bookie

import (
	"path/filepath"
	"testing"

	"github.com/stratamesh/strata/internal/tlsconf"
)

// TestBookieMutualTLS: a bookie serving TLS with client certificates
// required takes a node's client and refuses a client without a
// certificate and a plaintext one.
func TestBookieMutualTLS(t *testing.T) {
	d, err := tlsconf.EnsureDev(filepath.Join(t.TempDir(), "secure"))
	if err != nil {
		t.Fatal(err)
	}
	files := d.TLS()
	tb, err := tlsconf.Load(&files)
	if err != nil {
		t.Fatal(err)
	}
	e := newBookieEnv(t)
	ctx := testCtx(t)
	cfg := e.config("b1", "127.0.0.1:0")
	cfg.TLS = tb.MutualServer()
	b := e.mustStart(cfg)

	c, err := Dial(ctx, b.Addr(), DialOptions{Instance: b.Instance(), TLS: tb.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := addSync(t, openAdds(t, c), addReq(1, 0)); err != nil {
		t.Fatalf("add over mutual TLS: %v", err)
	}

	anon, err := tlsconf.ClientFromFiles("ca", d.Path(tlsconf.DevCAFile), "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]DialOptions{
		"no client certificate": {TLS: anon},
		"plaintext":             {},
	} {
		// An empty Instance makes Dial call Info: the refused handshake
		// fails it.
		if c, err := Dial(ctx, b.Addr(), opts); err == nil {
			c.Close()
			t.Errorf("%s: the bookie answered", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
