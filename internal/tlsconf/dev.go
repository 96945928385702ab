package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/stratamesh/strata/topology"
)

// File names in a development secrets directory (DevFiles).
const (
	DevCAFile           = "ca.pem"
	DevCAKeyFile        = "ca-key.pem"
	DevNodeCertFile     = "node.pem"
	DevNodeKeyFile      = "node-key.pem"
	DevClientCertFile   = "client.pem"
	DevClientKeyFile    = "client-key.pem"
	DevGossipKeyFile    = "gossip.key"
	DevEtcdPasswordFile = "etcd-root.password"
)

// devValidity is how long development certificates last.
const devValidity = 365 * 24 * time.Hour

// Dev is a development mesh's secrets directory.
type Dev struct {
	// Dir holds the files (0700; keys and secrets 0600).
	Dir string
	// Made is true when EnsureDev made them now, false when it kept
	// the ones already there.
	Made bool
}

// TLS is the topology tls section that names the directory's files.
func (d Dev) TLS() topology.TLS {
	return topology.TLS{
		CAFile: d.Path(DevCAFile), CertFile: d.Path(DevNodeCertFile), KeyFile: d.Path(DevNodeKeyFile),
		GossipKeyFile: d.Path(DevGossipKeyFile), EtcdPasswordFile: d.Path(DevEtcdPasswordFile),
		NATSClientCerts: topology.ClientCertsNone,
	}
}

// Path is the path of one of the directory's files.
func (d Dev) Path(name string) string { return filepath.Join(d.Dir, name) }

// EnsureDev makes a development mesh's secrets in dir (absolute), unless
// a complete and loadable set is already there (kept, so that a restarted
// mesh keeps its CA): a CA (ECDSA P-256), a node certificate for
// 127.0.0.1, ::1 and localhost usable as server and client certificate, a
// client certificate for tools and users, a gossip key and an etcd root
// password. A partial or unusable set is replaced as a whole.
func EnsureDev(dir string) (Dev, error) {
	d := Dev{Dir: dir}
	if !filepath.IsAbs(dir) {
		return d, fmt.Errorf("tlsconf: secrets directory %s is not absolute", dir)
	}
	t := d.TLS()
	if _, err := Load(&t); err == nil {
		if _, err := ClientFromFiles("client", d.Path(DevCAFile), "client", d.Path(DevClientCertFile), d.Path(DevClientKeyFile)); err == nil {
			return d, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return d, fmt.Errorf("tlsconf: %w", err)
	}
	if err := writeDev(d); err != nil {
		return d, fmt.Errorf("tlsconf: making development secrets in %s: %w", dir, err)
	}
	d.Made = true
	return d, nil
}

func writeDev(d Dev) error {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Strata development CA", Organization: []string{"Strata dev mesh"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(5 * devValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	leaf := func(cn string, usages []x509.ExtKeyUsage, dns []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn, Organization: []string{"Strata dev mesh"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(devValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usages,
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", kb), nil
	}
	nodeCert, nodeKey, err := leaf("strata-node", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		[]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
	if err != nil {
		return err
	}
	clientCert, clientKey, err := leaf("strata-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	if err != nil {
		return err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return err
	}
	gossip := make([]byte, 32)
	password := make([]byte, 24)
	if _, err := rand.Read(gossip); err != nil {
		return err
	}
	if _, err := rand.Read(password); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{DevCAFile, pemBlock("CERTIFICATE", caDER), 0o644},
		{DevCAKeyFile, pemBlock("EC PRIVATE KEY", caKeyDER), 0o600},
		{DevNodeCertFile, nodeCert, 0o644},
		{DevNodeKeyFile, nodeKey, 0o600},
		{DevClientCertFile, clientCert, 0o644},
		{DevClientKeyFile, clientKey, 0o600},
		{DevGossipKeyFile, []byte(base64.StdEncoding.EncodeToString(gossip) + "\n"), 0o600},
		{DevEtcdPasswordFile, []byte(base64.RawURLEncoding.EncodeToString(password) + "\n"), 0o600},
	}
	var errs []error
	for _, f := range files {
		errs = append(errs, os.WriteFile(d.Path(f.name), f.data, f.mode))
	}
	return errors.Join(errs...)
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
