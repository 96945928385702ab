package topology

import (
	"path/filepath"
	"strings"
)

// NATS client-certificate modes (TLS.NATSClientCerts).
const (
	// ClientCertsNone: NATS clients are not asked for a certificate.
	ClientCertsNone = "none"
	// ClientCertsVerify: a NATS client may present a certificate; one that
	// does must be signed by the CA.
	ClientCertsVerify = "verify"
	// ClientCertsRequire: every NATS client must present a certificate
	// signed by the CA.
	ClientCertsRequire = "require"
)

// TLS secures every listener and link of the mesh: NATS clients and the
// brokers' internal link, the admin HTTP API, bookie gRPC, replication
// links between regions, Serf gossip and the embedded etcd. All paths are
// absolute and are read when a node starts (the parse checks only their
// shape), so one file can be checked on a machine without the secrets.
type TLS struct {
	// CAFile is the PEM CA that signs every node's certificate and the
	// client certificates nodes accept (required).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the node's PEM certificate and key
	// (required): every listener serves it, and nodes present it as their
	// client certificate to each other (gRPC, the brokers' internal link,
	// replication links, etcd). Its SANs must name the hosts and IPs the
	// nodes are reached at.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// NATSClientCerts is what the brokers ask of NATS clients: none
	// (default), verify (checked when presented) or require.
	NATSClientCerts string `yaml:"nats_client_certs"`
	// GossipKeyFile holds the Serf keyring key, base64 of 16, 24 or 32
	// bytes (AES-128/192/256), which encrypts and authenticates gossip
	// (required).
	GossipKeyFile string `yaml:"gossip_key_file"`
	// EtcdPasswordFile holds the password of etcd's root user (optional).
	// When set, every Strata etcd client logs in as root, and a meta node
	// turns etcd authentication on (creating root with this password) the
	// first time it starts, so anonymous clients are refused.
	EtcdPasswordFile string `yaml:"etcd_password_file"`
}

// checkTLS reports problems with the tls section as written.
func (r *report) checkTLS(m *Mesh) {
	t := m.TLS
	if t == nil {
		return
	}
	for _, f := range []struct {
		key, value string
		required   bool
	}{
		{"ca_file", t.CAFile, true},
		{"cert_file", t.CertFile, true},
		{"key_file", t.KeyFile, true},
		{"gossip_key_file", t.GossipKeyFile, true},
		{"etcd_password_file", t.EtcdPasswordFile, false},
	} {
		p := field("tls", f.key)
		switch {
		case f.value == "" && f.required:
			r.missing(p)
		case f.value == "" && r.ix.has(p):
			r.errorf(p, "must not be empty")
		case f.value != "" && !filepath.IsAbs(f.value):
			r.errorf(p, "%s is not an absolute path (nodes read it wherever they run)", quoteShort(f.value))
		}
	}
	// With TLS on, etcd clients present the node certificate; an http://
	// endpoint would carry the metadata (and etcd's password) in clear.
	for i := range m.Regions {
		for j, ep := range m.Regions[i].Metadata.Etcd {
			if strings.HasPrefix(ep, "http://") {
				r.errorf(elem(field(elem("regions", i), "metadata.etcd"), j), "%s: with tls on, etcd endpoints must be https://", quoteShort(ep))
			}
		}
	}
	r.oneOf("tls.nats_client_certs", "client-certificate mode", t.NATSClientCerts, ClientCertsNone, ClientCertsVerify, ClientCertsRequire)
}
