package region

import (
	"context"
	"crypto/tls"
	"net/http"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/tlsconf"
)

// TLS wiring (topology tls section). With it, every listener of the node
// serves TLS and every client the node opens trusts the mesh CA and
// presents the node certificate:
//
//	NATS (brokers)        TLS after INFO; client certificates per tls.nats_client_certs
//	internal link         mutual TLS between the region's brokers
//	bookie gRPC           mutual TLS: only nodes' certificates are served
//	admin HTTP            HTTPS (tokens, not certificates, authorize)
//	replication links     nats.go with the CA and the node certificate
//	Serf LAN and WAN      keyring encryption with tls.gossip_key_file
//	embedded etcd         client and peer TLS with client certificates
//	                      required; auth on when tls.etcd_password_file is set
//
// Without a tls section every one of them is plaintext and etcd takes
// anonymous clients.

// loadTLS reads the topology's TLS files, if it has a tls section.
func (n *Node) loadTLS() error {
	if n.cfg.Mesh.TLS == nil {
		return nil
	}
	b, err := tlsconf.Load(n.cfg.Mesh.TLS)
	if err != nil {
		return err
	}
	n.tls = b
	return nil
}

// metaConfig adds TLS and etcd's login to a Store config.
func (n *Node) metaConfig(c meta.Config) meta.Config {
	if n.tls == nil {
		return c
	}
	c.TLS = n.tls.Client()
	if n.tls.EtcdPassword != "" {
		c.Username, c.Password = meta.RootUser, n.tls.EtcdPassword
	}
	return c
}

// embeddedTLS sets an embedded etcd's TLS and root password.
func (n *Node) embeddedTLS(c *meta.EmbeddedConfig) {
	if n.tls == nil {
		return
	}
	f := n.tls.Files()
	c.TLS = &meta.EmbeddedTLS{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}
	c.RootPassword = n.tls.EtcdPassword
}

// brokerTLS is the broker's Config.TLS.
func (n *Node) brokerTLS() *broker.TLSConfig {
	if n.tls == nil {
		return nil
	}
	return &broker.TLSConfig{Clients: n.tls.NATSServer(), RouteServer: n.tls.MutualServer(), RouteClient: n.tls.Client()}
}

// clientTLS is the config of the node's clients of other nodes (bookie
// gRPC, replication links); nil without TLS.
func (n *Node) clientTLS() *tls.Config {
	if n.tls == nil {
		return nil
	}
	return n.tls.Client()
}

// mutualTLS is the server config of listeners only nodes use (bookie
// gRPC); nil without TLS.
func (n *Node) mutualTLS() *tls.Config {
	if n.tls == nil {
		return nil
	}
	return n.tls.MutualServer()
}

// adminTLS is the admin HTTP server's config; nil without TLS.
func (n *Node) adminTLS() *tls.Config {
	if n.tls == nil {
		return nil
	}
	return n.tls.Server(tls.NoClientCert)
}

// gossipKey is the Serf keyring key; nil without TLS.
func (n *Node) gossipKey() []byte {
	if n.tls == nil {
		return nil
	}
	return n.tls.GossipKey
}

// adminClient is the HTTP client nodes call each other's admin API with.
func (n *Node) adminClient() *http.Client {
	if n.tls == nil {
		return http.DefaultClient
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: n.tls.Client(), IdleConnTimeout: 30 * time.Second}}
}

// adminProbe is registration's probe of a key holder's admin endpoint,
// over the node's admin client.
func (n *Node) adminProbe() func(ctx context.Context, admin string) bool {
	hc := n.adminClient()
	return func(ctx context.Context, admin string) bool { return adminAnswersWith(ctx, hc, admin) }
}
