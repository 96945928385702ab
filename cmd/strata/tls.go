package main

import (
	"crypto/tls"
	"errors"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/tlsconf"
)

// tlsFlags are the TLS files a client command connects with. Left empty,
// they come from the running mesh's mesh.json (its tls entry: the CA, and
// the client certificate `strata up --secure` made); a mesh without one
// is plaintext.
type tlsFlags struct {
	ca, cert, key string
}

func (t *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.ca, "tls-ca", "", "CA file (PEM) to trust for TLS (default: the tls.ca_file in <data-dir>/mesh.json, if the mesh serves TLS)")
	fs.StringVar(&t.cert, "tls-cert", "", "client certificate file (PEM) to present (default: the one in <data-dir>/mesh.json, if any)")
	fs.StringVar(&t.key, "tls-key", "", "key file (PEM) of --tls-cert")
}

// config is the client TLS config the flags (else dataDir's mesh.json)
// name; nil when neither names a CA.
func (t *tlsFlags) config(dataDir string) (*tls.Config, error) {
	ca, cert, key := t.ca, t.cert, t.key
	if ca == "" {
		mf, err := meshfile.Read(dataDirOr(dataDir, nil))
		if err != nil || mf.TLS == nil {
			if cert != "" || key != "" {
				return nil, errors.New("--tls-cert needs --tls-ca (no CA in mesh.json)")
			}
			return nil, nil
		}
		ca = mf.TLS.CAFile
		if cert == "" && key == "" {
			cert, key = mf.TLS.CertFile, mf.TLS.KeyFile
		}
	}
	return tlsconf.ClientFromFiles("--tls-ca", ca, "--tls-cert", cert, key)
}

// httpTransport is an HTTP transport for the admin API over the flags'
// TLS; a TLS setup that fails to load fails every request with its error
// (so commands report it where they report unreachable nodes).
func (t *tlsFlags) httpTransport(dataDir string) http.RoundTripper {
	cfg, err := t.config(dataDir)
	if err != nil {
		return failingTransport{err}
	}
	if cfg == nil {
		return http.DefaultTransport
	}
	return &http.Transport{TLSClientConfig: cfg, IdleConnTimeout: 30 * time.Second, Proxy: http.ProxyFromEnvironment}
}

type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }
