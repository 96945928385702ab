package topology

import (
	"strings"
	"testing"
)

const tlsBase = "mesh: m\nregions:\n  - name: r\n"

func TestTLSParses(t *testing.T) {
	data := tlsBase + `tls:
  ca_file: /etc/strata/ca.pem
  cert_file: /etc/strata/node.pem
  key_file: /etc/strata/node-key.pem
  gossip_key_file: /etc/strata/gossip.key
  etcd_password_file: /etc/strata/etcd.password
`
	m, _, err := Parse("t.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := TLS{CAFile: "/etc/strata/ca.pem", CertFile: "/etc/strata/node.pem", KeyFile: "/etc/strata/node-key.pem",
		GossipKeyFile: "/etc/strata/gossip.key", EtcdPasswordFile: "/etc/strata/etcd.password", NATSClientCerts: ClientCertsNone}
	if m.TLS == nil || *m.TLS != want {
		t.Errorf("TLS = %+v, want %+v", m.TLS, want)
	}
	m, _, err = Parse("t.yaml", []byte(strings.Replace(data, "tls:\n", "tls:\n  nats_client_certs: require\n", 1)))
	if err != nil || m.TLS.NATSClientCerts != ClientCertsRequire {
		t.Fatalf("require: %v %+v", err, m.TLS)
	}
	if m, _, _ := Parse("t.yaml", []byte(tlsBase)); m.TLS != nil {
		t.Errorf("no tls section: TLS = %+v", m.TLS)
	}
}

func TestTLSMalformed(t *testing.T) {
	full := "  ca_file: /a/ca.pem\n  cert_file: /a/n.pem\n  key_file: /a/k.pem\n  gossip_key_file: /a/g.key\n"
	for _, tc := range []struct{ name, tls, want string }{
		{"not a mapping", "tls: yes\n", "t.yaml:4:6: tls: expected a mapping, got"},
		{"list", "tls: [a]\n", "tls: expected a mapping"},
		{"empty mapping", "tls: {}\n", "tls.ca_file: required field missing"},
		{"missing cert", "tls:\n  ca_file: /a/ca.pem\n  key_file: /a/k.pem\n  gossip_key_file: /a/g\n", "tls.cert_file: required field missing"},
		{"missing gossip key", "tls:\n  ca_file: /a/ca.pem\n  cert_file: /a/n.pem\n  key_file: /a/k.pem\n", "tls.gossip_key_file: required field missing"},
		{"empty ca", "tls:\n  ca_file: \"\"\n  cert_file: /a/n.pem\n  key_file: /a/k.pem\n  gossip_key_file: /a/g\n", "t.yaml:5:12: tls.ca_file: must not be empty"},
		{"relative path", "tls:\n" + strings.Replace(full, "/a/n.pem", "certs/n.pem", 1), `tls.cert_file: "certs/n.pem" is not an absolute path`},
		{"empty password file", "tls:\n" + full + "  etcd_password_file: \"\"\n", "tls.etcd_password_file: must not be empty"},
		{"unknown mode", "tls:\n" + full + "  nats_client_certs: maybe\n", `tls.nats_client_certs: unknown client-certificate mode "maybe": want none, verify or require`},
		{"mode not a string", "tls:\n" + full + "  nats_client_certs: [x]\n", "tls.nats_client_certs: expected a string"},
		{"path not a string", "tls:\n" + strings.Replace(full, "/a/ca.pem", "{x: 1}", 1), "tls.ca_file: expected a string"},
		{"unknown field", "tls:\n" + full + "  cert: /a/x\n", "tls.cert: unknown field"},
		{"typo suggestion", "tls:\n" + full + "  ca_fil: /a/x\n", `did you mean "ca_file"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse("t.yaml", []byte(tlsBase+tc.tls))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestTLSNeedsHTTPSEtcd(t *testing.T) {
	data := "mesh: m\nregions:\n  - name: r\n    metadata: {etcd: [https://e1:2379, http://e2:2379]}\n" +
		"tls: {ca_file: /a, cert_file: /b, key_file: /c, gossip_key_file: /d}\n"
	_, _, err := Parse("t.yaml", []byte(data))
	if err == nil || !strings.Contains(err.Error(), `regions[0].metadata.etcd[1]: "http://e2:2379": with tls on, etcd endpoints must be https://`) {
		t.Errorf("err = %v", err)
	}
	if _, _, err := Parse("t.yaml", []byte(strings.Replace(data, "http://e2", "https://e2", 1))); err != nil {
		t.Errorf("https endpoints: %v", err)
	}
}
