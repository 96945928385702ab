package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/stratamesh/strata/topology"
)

// ErrInvalid marks every error Load returns for a file that exists but
// does not hold what its field needs.
var ErrInvalid = errors.New("tlsconf: invalid")

// Bundle is a node's loaded TLS material. Its methods return fresh
// *tls.Config values, safe to modify.
type Bundle struct {
	files topology.TLS
	pool  *x509.CertPool
	cert  tls.Certificate
	// GossipKey is the Serf keyring's primary key (16, 24 or 32 bytes).
	GossipKey []byte
	// EtcdPassword is etcd's root password; empty when the topology names
	// no etcd_password_file (etcd auth stays off).
	EtcdPassword string
}

// Load reads every file t names and checks that they fit together: the CA
// parses, the node's certificate and key match and the CA signs the
// certificate, the gossip key decodes to a valid AES key size, the etcd
// password is not empty.
func Load(t *topology.TLS) (*Bundle, error) {
	if t == nil {
		return nil, errors.New("tlsconf: no tls section")
	}
	b := &Bundle{files: *t}
	var err error
	if b.pool, err = loadCA("tls.ca_file", t.CAFile); err != nil {
		return nil, err
	}
	if b.cert, err = loadPair("tls", t.CertFile, t.KeyFile, b.pool, t.CAFile); err != nil {
		return nil, err
	}
	if b.GossipKey, err = loadGossipKey(t.GossipKeyFile); err != nil {
		return nil, err
	}
	if t.EtcdPasswordFile != "" {
		if b.EtcdPassword, err = loadPassword(t.EtcdPasswordFile); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Files are the paths the bundle was loaded from (etcd's embedded server
// takes file names).
func (b *Bundle) Files() topology.TLS { return b.files }

// Server is a server config that presents the node certificate and treats
// client certificates as clientAuth says (verified against the CA).
func (b *Bundle) Server(clientAuth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{b.cert},
		ClientCAs:    b.pool,
		ClientAuth:   clientAuth,
	}
}

// MutualServer is Server(tls.RequireAndVerifyClientCert) for listeners
// only nodes use (bookie gRPC, the brokers' internal link), which also
// requires the peer's certificate to be a node certificate: one valid for
// server authentication (extended key usage serverAuth), as every node's
// is. A certificate for clientAuth only — what NATS clients and tools are
// given (tls.nats_client_certs, `up --secure`'s client certificate) — is
// refused there, although the same CA signed it: a tenant holding one
// must not speak to bookies or act as a broker.
func (b *Bundle) MutualServer() *tls.Config {
	c := b.Server(tls.RequireAndVerifyClientCert)
	c.VerifyPeerCertificate = requireNodeCert
	return c
}

// ErrNotNodeCert is MutualServer's refusal of a certificate that is not
// valid for server authentication.
var ErrNotNodeCert = errors.New("tlsconf: the peer's certificate is not a node certificate (no serverAuth extended key usage): internal listeners take node certificates only")

func requireNodeCert(_ [][]byte, chains [][]*x509.Certificate) error {
	for _, chain := range chains {
		if len(chain) == 0 {
			continue
		}
		for _, u := range chain[0].ExtKeyUsage {
			if u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny {
				return nil
			}
		}
	}
	return ErrNotNodeCert
}

// NATSServer is the brokers' NATS listener config, asking clients for
// certificates as tls.nats_client_certs says.
func (b *Bundle) NATSServer() *tls.Config { return b.Server(ClientAuth(b.files.NATSClientCerts)) }

// Client is a client config that trusts the CA and presents the node
// certificate. ServerName is left empty: net/http, gRPC and nats.go set it
// from the address dialled; other callers set it themselves.
func (b *Bundle) Client() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      b.pool,
		Certificates: []tls.Certificate{b.cert},
	}
}

// ClientAuth maps a tls.nats_client_certs mode to crypto/tls's (none and
// unknown modes: no client certificate asked).
func ClientAuth(mode string) tls.ClientAuthType {
	switch mode {
	case topology.ClientCertsVerify:
		return tls.VerifyClientCertIfGiven
	case topology.ClientCertsRequire:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// ClientFromFiles is a client config for tools: it trusts caFile and, when
// certFile and keyFile are given, presents that certificate. The flag
// names go into errors.
func ClientFromFiles(caFlag, caFile, certFlag, certFile, keyFile string) (*tls.Config, error) {
	pool, err := loadCA(caFlag, caFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, fmt.Errorf("%s: a client certificate needs both its certificate and its key file", certFlag)
		}
		pair, err := loadPair(certFlag, certFile, keyFile, nil, "")
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

func loadCA(field, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s %s: no PEM certificate in it", ErrInvalid, field, path)
	}
	return pool, nil
}

// loadPair loads a certificate and its key; with a pool it also checks
// that the CA signs the certificate and that it is valid now.
func loadPair(field, certFile, keyFile string, pool *x509.CertPool, caFile string) (tls.Certificate, error) {
	certField, keyField := field+".cert_file", field+".key_file"
	if !strings.HasPrefix(field, "tls") {
		certField, keyField = field, field
	}
	for _, f := range []struct{ name, path string }{{certField, certFile}, {keyField, keyFile}} {
		if _, err := os.Stat(f.path); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: %s %s and %s %s: %v", ErrInvalid, certField, certFile, keyField, keyFile, err)
	}
	if pool == nil {
		return pair, nil
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("%w: %s %s: %v", ErrInvalid, certField, certFile, err)
		}
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: %s %s is not usable with tls.ca_file %s: %v", ErrInvalid, certField, certFile, caFile, err)
	}
	return pair, nil
}

func loadGossipKey(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls.gossip_key_file: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil, fmt.Errorf("%w: tls.gossip_key_file %s: want the base64 of 16, 24 or 32 random bytes: %v", ErrInvalid, path, err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("%w: tls.gossip_key_file %s: the key is %d bytes; want 16, 24 or 32 (AES-128, -192 or -256)", ErrInvalid, path, len(key))
}

func loadPassword(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("tls.etcd_password_file: %w", err)
	}
	pw := strings.TrimRight(string(raw), "\r\n")
	if strings.TrimSpace(pw) == "" {
		return "", fmt.Errorf("%w: tls.etcd_password_file %s is empty", ErrInvalid, path)
	}
	return pw, nil
}
