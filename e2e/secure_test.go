package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/tlsconf"
)

// secureMesh is two small regions whose demo/geo namespace replicates to
// both (the default replication list).
const secureMesh = `mesh: e2e-secure
defaults:
  ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}
regions:
  - {name: east, brokers: 1, bookies: 2}
  - {name: west, brokers: 1, bookies: 2}
tenants:
  - name: demo
    namespaces:
      - name: geo
`

// TestSecureMesh runs `strata up --secure` with two regions and checks
// every listener: nats.go over TLS publishes in one region and reads the
// replicated messages in the other (replication links over TLS); a
// plaintext NATS client is refused; admin HTTPS serves clients that trust
// the CA (strata status among them) and no others; etcd refuses a client
// without a certificate and one that does not log in; a bookie refuses a
// gRPC client without a client certificate; Serf ignores a member without
// the gossip key.
func TestSecureMesh(t *testing.T) {
	began := time.Now()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	up := startUp(t, dataDir, "-f", writeTopology(t, dir, "mesh.yaml", secureMesh), "--secure")
	live, took := waitAlive(t, up, "every member of the secure mesh alive (strata status over HTTPS)")
	t.Logf("secure mesh alive after %v", took)
	out := up.output()
	for _, want := range []string{"security: TLS on every listener", "--tlsca " + filepath.Join(dataDir, "secure", tlsconf.DevCAFile)} {
		if !strings.Contains(out, want) {
			t.Errorf("up's listing does not say %q:\n%s", want, out)
		}
	}
	f, err := meshfile.Read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if f.TLS == nil || f.TLS.CAFile == "" {
		t.Fatalf("mesh.json has no CA: %+v", f.TLS)
	}
	ca := f.TLS.CAFile
	trustCA, err := tlsconf.ClientFromFiles("ca", ca, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	east, west := live.Node("east", "b1"), live.Node("west", "b1")
	// --secure turns NATS logins on: up made a demo user of tenant demo.
	demoCreds := filepath.Join(dataDir, "creds", "demo-demo.creds")
	waitFor(t, "up writes the demo tenant's .creds", 30*time.Second, func() bool { _, err := os.Stat(demoCreds); return err == nil })
	t.Run("NATS without credentials", func(t *testing.T) {
		nc, err := nats.Connect(east.NATS, nats.RootCAs(ca), nats.Timeout(5*time.Second), nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			t.Fatal("a TLS client without credentials logged in")
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("no credentials: %v, want an authorization violation", err)
		}
	})

	t.Run("admin HTTPS", func(t *testing.T) {
		url := live.Node("east", "meta").Admin
		if !strings.HasPrefix(url, "https://") {
			t.Fatalf("admin URL %s", url)
		}
		tr := &http.Transport{TLSClientConfig: trustCA}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url + "/healthz")
		if err != nil {
			t.Fatalf("with the CA: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("with the CA: status %d", resp.StatusCode)
		}
		plain := &http.Transport{}
		defer plain.CloseIdleConnections()
		if _, err := (&http.Client{Transport: plain, Timeout: 5 * time.Second}).Get(url + "/healthz"); err == nil {
			t.Error("a client without the CA was served")
		}
		if stdout, stderr, code := strata(t, "admin", "--data-dir", dataDir, "tenants", "list"); code != 0 || !strings.Contains(stdout, "demo") {
			t.Errorf("strata admin tenants list: exit %d\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("NATS over TLS and replication", func(t *testing.T) {
		connect := func(url string) jetstream.JetStream {
			nc, err := nats.Connect(url, nats.RootCAs(ca), nats.UserCredentials(demoCreds), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
			if err != nil {
				t.Fatalf("nats.go over TLS to %s: %v", url, err)
			}
			t.Cleanup(nc.Close)
			if _, err := nc.TLSConnectionState(); err != nil {
				t.Fatalf("not a TLS connection: %v", err)
			}
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			return js
		}
		n := scale(50)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pub := connect(east.NATS)
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("east-%06d", i)
			for {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := pub.Publish(pctx, geoSubject, []byte(id), jetstream.WithMsgID(id))
				pcancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("publish %s: %v", id, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		t.Logf("%d messages acknowledged in east", n)
		ids, origins := geoRead(t, connect(west.NATS), geoStream, n)
		for i, id := range ids {
			if want := fmt.Sprintf("east-%06d", i+1); id != want || origins[i] != "east" {
				t.Fatalf("west message %d: %q from %q, want %q from east", i, id, origins[i], want)
			}
		}
		t.Logf("west read the %d replicated messages", n)
	})

	t.Run("plaintext NATS refused", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(east.NATS, "nats://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		info, err := br.ReadString('\n')
		if err != nil || !strings.Contains(info, `"tls_required":true`) {
			t.Fatalf("INFO %q (%v) does not say tls_required", info, err)
		}
		if _, err := io.WriteString(conn, "CONNECT {\"verbose\":false}\r\nPUB demo.geo.orders 5\r\nplain\r\nPING\r\n"); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(br)
		if string(rest) != "-ERR 'Secure Connection - TLS Required'\r\n" {
			t.Errorf("after a plaintext CONNECT: %q, want the TLS-required error and a close", rest)
		}
		if nc, err := nats.Connect(east.NATS, nats.Timeout(5*time.Second), nats.MaxReconnects(0)); err == nil {
			nc.Close()
			t.Error("nats.go without the CA connected")
		}
	})

	t.Run("etcd refuses anonymous clients", func(t *testing.T) {
		etcd := live.Node("east", "meta").Etcd
		if !strings.HasPrefix(etcd, "https://") {
			t.Fatalf("etcd URL %s", etcd)
		}
		withCert, err := tlsconf.ClientFromFiles("ca", ca, "cert", f.TLS.CertFile, f.TLS.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for name, cfg := range map[string]meta.Config{
			"no client certificate":                 {TLS: trustCA},
			"a CA-signed certificate but no login":  {TLS: withCert},
			"a CA-signed certificate, wrong secret": {TLS: withCert, Username: meta.RootUser, Password: "guess"},
		} {
			cfg.Endpoints, cfg.DialTimeout = []string{etcd}, 3*time.Second
			s, err := meta.Open(ctx, cfg)
			if err == nil {
				_, err = s.Put(ctx, "intruder", []byte("x"))
				s.Close()
			}
			if err == nil {
				t.Errorf("%s: etcd took a write", name)
			} else {
				t.Logf("%s: refused: %v", name, err)
			}
		}
	})

	t.Run("bookie refuses a gRPC client without a certificate", func(t *testing.T) {
		addr := live.Node("east", "k1").GRPC
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for name, opts := range map[string]bookie.DialOptions{
			"TLS without a client certificate": {TLS: trustCA},
			"plaintext":                        {},
		} {
			if c, err := bookie.Dial(ctx, addr, opts); err == nil {
				c.Close()
				t.Errorf("%s: the bookie answered", name)
			} else {
				t.Logf("%s: refused: %v", name, err)
			}
		}
		// The node certificate is what bookies take.
		files := tlsconf.Dev{Dir: filepath.Join(dataDir, "secure")}
		nodeCert, err := tls.LoadX509KeyPair(files.Path(tlsconf.DevNodeCertFile), files.Path(tlsconf.DevNodeKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		node := trustCA.Clone()
		node.Certificates = []tls.Certificate{nodeCert}
		c, err := bookie.Dial(ctx, addr, bookie.DialOptions{TLS: node})
		if err != nil {
			t.Fatalf("with the node certificate: %v", err)
		}
		c.Close()
	})

	t.Run("gossip without the key", func(t *testing.T) {
		p, err := gossip.Start(gossip.Config{NodeName: "east.intruder", Profile: gossip.ProfileLoopback})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if _, err := p.Join([]string{live.Node("east", "b1").SerfLAN}); err == nil {
			t.Error("a Serf member without the gossip key joined the LAN pool")
		}
	})
	t.Logf("secure mesh test took %v", time.Since(began))
}
