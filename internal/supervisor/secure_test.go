package supervisor

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratamesh/strata/topology"
)

func secureRun(t *testing.T, yaml string, secure bool) (*run, *bytes.Buffer) {
	t.Helper()
	m, _, err := topology.Parse("mesh.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	return &run{cfg: Config{Mesh: m, TopologyYAML: []byte(yaml), DataDir: t.TempDir(), Secure: secure}, out: &out}, &out
}

func TestSecureAddsTLSAndAuth(t *testing.T) {
	for name, yaml := range map[string]string{
		"default mesh":       string(topology.DefaultYAML()),
		"no final newline":   "mesh: m\nregions:\n  - name: r",
		"auth already on":    "mesh: m\nregions:\n  - name: r\nauth: {enabled: true}\n",
		"comment at the end": "mesh: m\nregions:\n  - name: r\n# the end\n",
	} {
		t.Run(name, func(t *testing.T) {
			r, out := secureRun(t, yaml, true)
			if err := r.secure(); err != nil {
				t.Fatal(err)
			}
			m := r.cfg.Mesh
			dir := filepath.Join(r.cfg.DataDir, SecureDir)
			if m.TLS == nil || m.TLS.CAFile != filepath.Join(dir, "ca.pem") || m.TLS.EtcdPasswordFile == "" {
				t.Fatalf("TLS %+v", m.TLS)
			}
			if m.Auth == nil || !m.Auth.Enabled {
				t.Errorf("auth %+v", m.Auth)
			}
			if name != "auth already on" {
				n := m.NATSAuth()
				if n == nil || n.OperatorSeedFile != filepath.Join(dir, OperatorSeedFile) || n.SystemAccountSeedFile != filepath.Join(dir, SystemSeedFile) {
					t.Errorf("auth.nats %+v", n)
				}
				for _, f := range []string{OperatorSeedFile, SystemSeedFile} {
					if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
						t.Errorf("%s: %v %v", f, st, err)
					}
				}
			} else if m.NATSAuth() != nil || !strings.Contains(out.String(), "add auth.nats") {
				t.Errorf("a topology with its own auth got auth.nats %+v / no note: %q", m.NATSAuth(), out.String())
			}
			onDisk, err := os.ReadFile(filepath.Join(r.cfg.DataDir, topologyFile))
			if err != nil || !bytes.Equal(onDisk, r.cfg.TopologyYAML) {
				t.Errorf("the nodes' topology copy differs (%v)", err)
			}
			if !strings.Contains(out.String(), "made a development CA") || r.dev == nil || !r.dev.Made {
				t.Errorf("output %q", out.String())
			}
		})
	}
}

func TestSecureRefusals(t *testing.T) {
	const base = "mesh: m\nregions:\n  - name: r\n"
	withTLS := base + "tls: {ca_file: /a, cert_file: /b, key_file: /c, gossip_key_file: /d}\n"
	for _, tc := range []struct {
		name, yaml string
		secure     bool
		prepare    func(dataDir string)
		want       string
	}{
		{"topology has tls", withTLS, true, nil, "already has a tls section"},
		{"auth disabled", base + "auth: {enabled: false}\n", true, nil, "turns auth on, but the topology's auth section says enabled: false"},
		{"flow-style topology", "{mesh: m, regions: [{name: r}]}\n", true, nil, "could not add a tls section"},
		{"secure data dir started open", base, false, func(d string) { os.MkdirAll(filepath.Join(d, SecureDir), 0o700) }, "start it with --secure again, or wipe it with --fresh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := secureRun(t, tc.yaml, tc.secure)
			if tc.prepare != nil {
				tc.prepare(r.cfg.DataDir)
			}
			if err := r.secure(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Open and with no secrets directory: nothing to do.
	r, _ := secureRun(t, base, false)
	if err := r.secure(); err != nil || r.cfg.Mesh.TLS != nil {
		t.Errorf("open run: %v, TLS %+v", err, r.cfg.Mesh.TLS)
	}
}
