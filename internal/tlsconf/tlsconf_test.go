package tlsconf

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratamesh/strata/topology"
)

func devDir(t *testing.T) Dev {
	t.Helper()
	d, err := EnsureDev(filepath.Join(t.TempDir(), "secure"))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Made {
		t.Fatal("EnsureDev in an empty dir made nothing")
	}
	return d
}

func TestEnsureDevLoadsAndIsKept(t *testing.T) {
	d := devDir(t)
	files := d.TLS()
	b, err := Load(&files)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.GossipKey) != 32 || b.EtcdPassword == "" {
		t.Errorf("gossip key %d bytes, password %q", len(b.GossipKey), b.EtcdPassword)
	}
	before, _ := os.ReadFile(d.Path(DevCAFile))
	again, err := EnsureDev(d.Dir)
	if err != nil || again.Made {
		t.Fatalf("second EnsureDev: made=%v err=%v", again.Made, err)
	}
	after, _ := os.ReadFile(d.Path(DevCAFile))
	if string(before) != string(after) {
		t.Error("the CA was replaced although it was complete")
	}
	for _, f := range []string{DevCAKeyFile, DevNodeKeyFile, DevClientKeyFile, DevGossipKeyFile, DevEtcdPasswordFile} {
		if st, _ := os.Stat(d.Path(f)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", f, st.Mode().Perm())
		}
	}
	// A partial set is replaced as a whole.
	os.Remove(d.Path(DevClientKeyFile))
	if again, err := EnsureDev(d.Dir); err != nil || !again.Made {
		t.Errorf("partial set: made=%v err=%v", again.Made, err)
	}
}

func TestLoadMalformed(t *testing.T) {
	d := devDir(t)
	other := devDir(t)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name    string
		edit    func(*topology.TLS)
		want    string
		invalid bool
	}{
		{"missing ca", func(f *topology.TLS) { f.CAFile = filepath.Join(dir, "nope.pem") }, "tls.ca_file: open ", false},
		{"ca not pem", func(f *topology.TLS) { f.CAFile = write("ca.txt", "hello") }, "tls.ca_file " + dir + "/ca.txt: no PEM certificate in it", true},
		{"missing key", func(f *topology.TLS) { f.KeyFile = filepath.Join(dir, "nokey.pem") }, "tls.key_file: stat ", false},
		{"key of another cert", func(f *topology.TLS) { f.KeyFile = d.Path(DevClientKeyFile) }, "tls.cert_file " + d.Path(DevNodeCertFile) + " and tls.key_file", true},
		{"garbage cert", func(f *topology.TLS) {
			f.CertFile = write("garbage.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		}, "tls.cert_file " + dir + "/garbage.pem", true},
		{"cert of another CA", func(f *topology.TLS) { f.CAFile = other.Path(DevCAFile) }, "is not usable with tls.ca_file " + other.Path(DevCAFile) + ": x509: certificate signed by unknown authority", true},
		{"missing gossip key", func(f *topology.TLS) { f.GossipKeyFile = filepath.Join(dir, "g") }, "tls.gossip_key_file: open", false},
		{"gossip key not base64", func(f *topology.TLS) { f.GossipKeyFile = write("g1", "not base64!!\n") }, "want the base64 of 16, 24 or 32 random bytes", true},
		{"gossip key too short", func(f *topology.TLS) { f.GossipKeyFile = write("g2", "c2hvcnQ=\n") }, "the key is 5 bytes; want 16, 24 or 32", true},
		{"empty password", func(f *topology.TLS) { f.EtcdPasswordFile = write("pw", "\n") }, "tls.etcd_password_file " + dir + "/pw is empty", true},
		{"missing password", func(f *topology.TLS) { f.EtcdPasswordFile = filepath.Join(dir, "nopw") }, "tls.etcd_password_file: open", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := d.TLS()
			tc.edit(&files)
			_, err := Load(&files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
			if errors.Is(err, ErrInvalid) != tc.invalid {
				t.Errorf("errors.Is(err, ErrInvalid) = %v, want %v", !tc.invalid, tc.invalid)
			}
		})
	}
	if _, err := Load(nil); err == nil {
		t.Error("Load(nil) succeeded")
	}
	if _, err := ClientFromFiles("--tls-ca", d.Path(DevCAFile), "--tls-cert", d.Path(DevClientCertFile), ""); err == nil || !strings.Contains(err.Error(), "--tls-cert: a client certificate needs both") {
		t.Errorf("cert without key: %v", err)
	}
}

// handshake runs one TLS handshake over a loopback connection and returns
// the server's and the client's errors.
func handshake(t *testing.T, server, client *tls.Config) (srvErr, cliErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			_, err = io.WriteString(tc, "x") // TLS 1.3: the client learns of a refused certificate on its first read
		}
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client = client.Clone()
	client.ServerName = "127.0.0.1"
	tc := tls.Client(c, client)
	cliErr = tc.Handshake()
	if cliErr == nil {
		_, cliErr = tc.Read(make([]byte, 1))
	}
	tc.Close()
	return <-done, cliErr
}

func TestConfigsHandshake(t *testing.T) {
	d := devDir(t)
	files := d.TLS()
	b, err := Load(&files)
	if err != nil {
		t.Fatal(err)
	}
	if s, c := handshake(t, b.MutualServer(), b.Client()); s != nil || c != nil {
		t.Fatalf("node to node: server %v, client %v", s, c)
	}
	anon, err := ClientFromFiles("--tls-ca", d.Path(DevCAFile), "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := handshake(t, b.MutualServer(), anon); s == nil {
		t.Error("mutual server took a client without a certificate")
	}
	if s, c := handshake(t, b.NATSServer(), anon); s != nil || c != nil {
		t.Errorf("nats_client_certs none: server %v, client %v", s, c)
	}
	user, err := ClientFromFiles("--tls-ca", d.Path(DevCAFile), "--tls-cert", d.Path(DevClientCertFile), d.Path(DevClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if s, c := handshake(t, b.Server(ClientAuth(topology.ClientCertsRequire)), user); s != nil || c != nil {
		t.Errorf("require with a client certificate: server %v, client %v", s, c)
	}
	if s, _ := handshake(t, b.MutualServer(), user); !errors.Is(s, ErrNotNodeCert) {
		t.Errorf("an internal listener took a client (not node) certificate of the mesh's CA: %v", s)
	}
	foreign := devDir(t)
	stranger, err := ClientFromFiles("ca", d.Path(DevCAFile), "cert", foreign.Path(DevClientCertFile), foreign.Path(DevClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := handshake(t, b.Server(ClientAuth(topology.ClientCertsVerify)), stranger); s == nil {
		t.Error("verify mode took a certificate of another CA")
	}
	if _, c := handshake(t, b.MutualServer(), &tls.Config{RootCAs: nil, Certificates: b.Client().Certificates}); c == nil {
		t.Error("a client that does not trust the CA finished the handshake")
	}
}
