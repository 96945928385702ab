package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/stratamesh/strata/internal/tlsconf"
	"github.com/stratamesh/strata/topology"
)

// SecureDir is the directory, inside the data directory, where `strata up
// --secure` keeps the development mesh's secrets (tlsconf.EnsureDev's
// files): made on the first secure run and kept for the next; --fresh
// wipes it with the rest.
const SecureDir = "secure"

// secure prepares a --secure run: it makes (or keeps) the development CA,
// certificates, gossip key and etcd password in <data-dir>/secure, adds a
// tls section naming them (and `auth: {enabled: true}` when the topology
// has no auth section) to the topology the nodes read, and leaves room
// for the NATS accounts (secureNATSAccounts). Without --secure it refuses
// a data directory a secure run made while the topology has no tls
// section: its etcd requires a login the nodes would not have.
func (r *run) secure() error {
	dir := filepath.Join(r.cfg.DataDir, SecureDir)
	if !r.cfg.Secure {
		if _, err := os.Stat(dir); err == nil && r.cfg.Mesh.TLS == nil {
			return fmt.Errorf("supervisor: %s holds the secrets of a mesh started with --secure (its etcd takes only logged-in clients): start it with --secure again, or wipe it with --fresh", dir)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("supervisor: %w", err)
		}
		return nil
	}
	m := r.cfg.Mesh
	if m.TLS != nil {
		return errors.New("supervisor: --secure makes its own certificates, but the topology already has a tls section: drop one of the two")
	}
	if m.Auth != nil && !m.Auth.Enabled {
		return errors.New("supervisor: --secure turns auth on, but the topology's auth section says enabled: false: set it to true or drop the section")
	}
	dev, err := tlsconf.EnsureDev(dir)
	if err != nil {
		return err
	}
	// NATS logins (auth.nats): the operator's and the system account's
	// seeds, made once beside the certificates. They go into the auth
	// section --secure adds; a topology with an auth section of its own
	// keeps it as written (a YAML mapping cannot be extended by appending).
	var seeds *[2]string
	if m.Auth == nil {
		op, sys, err := GenerateNATSSeeds(dir)
		if err != nil {
			return err
		}
		seeds = &[2]string{op, sys}
	}
	yaml, err := secureTopology(r.cfg.TopologyYAML, dev.TLS(), m.Auth == nil, seeds)
	if err != nil {
		return err
	}
	secured, _, err := topology.Parse(topologyFile, yaml)
	if err != nil {
		return fmt.Errorf("supervisor: --secure could not add a tls section to the topology (write one in the file instead):\n%w", err)
	}
	if err := os.WriteFile(filepath.Join(r.cfg.DataDir, topologyFile), yaml, 0o644); err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	r.cfg.Mesh, r.cfg.TopologyYAML, r.dev = secured, yaml, &dev
	if dev.Made {
		fmt.Fprintf(r.out, "secure: made a development CA, node and client certificates, a gossip key and an etcd root password in %s\n", dir)
	} else {
		fmt.Fprintf(r.out, "secure: using the development CA and certificates in %s\n", dir)
	}
	if secured.NATSAuth() == nil {
		fmt.Fprintln(r.out, "secure: the topology's own auth section has no nats entry, so NATS clients need no credentials; add auth.nats (docs/topology.md) for tenant logins")
	}
	// PrepareNATSAuth (the superuser's system.creds) and DemoCreds (a
	// .creds file per tenant) run next, as for any topology with auth.nats.
	return nil
}

// secureTopology appends a tls section naming t's files (and an auth
// section turning auth on, when addAuth, with NATS logins when natsSeeds
// names the operator's and system account's seed files) to a topology
// file's text. Values are JSON strings, which YAML reads as double-quoted
// scalars.
func secureTopology(yaml []byte, t topology.TLS, addAuth bool, natsSeeds *[2]string) ([]byte, error) {
	var b bytes.Buffer
	b.Write(yaml)
	if len(yaml) > 0 && yaml[len(yaml)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString("\n# Added by `strata up --secure`.\ntls:\n")
	for _, kv := range [][2]string{
		{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile},
		{"gossip_key_file", t.GossipKeyFile}, {"etcd_password_file", t.EtcdPasswordFile},
		{"nats_client_certs", t.NATSClientCerts},
	} {
		v, err := json.Marshal(kv[1])
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "  %s: %s\n", kv[0], v)
	}
	if addAuth {
		b.WriteString("auth:\n  enabled: true\n")
		if natsSeeds != nil {
			op, _ := json.Marshal(natsSeeds[0])
			sys, _ := json.Marshal(natsSeeds[1])
			fmt.Fprintf(&b, "  nats:\n    operator_seed_file: %s\n    system_account_seed_file: %s\n", op, sys)
		}
	}
	return b.Bytes(), nil
}
