package broker

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"github.com/stratamesh/strata/internal/tlsconf/tlsconftest"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/internal/tlsconf"
	"github.com/stratamesh/strata/topology"
)

// testTLS makes a development CA and certificates for one test.
func testTLS(t *testing.T) (*tlsconf.Bundle, tlsconf.Dev) { return tlsconftest.New(t) }

func withTLS(b *tlsconf.Bundle, clientAuth tls.ClientAuthType) func(*Config) {
	return func(c *Config) {
		c.TLS = &TLSConfig{Clients: b.Server(clientAuth), RouteServer: b.MutualServer(), RouteClient: b.Client()}
	}
}

// readInfo reads the plaintext INFO line a broker sends first.
func readInfo(t *testing.T, br *bufio.Reader) serverInfo {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var info serverInfo
	if !strings.HasPrefix(line, "INFO ") || json.Unmarshal([]byte(line[5:]), &info) != nil {
		t.Fatalf("first line %q is not INFO", line)
	}
	return info
}

func TestTLSNATSClientPubSub(t *testing.T) {
	b, d := testTLS(t)
	s := startBroker(t, withTLS(b, tls.NoClientCert))
	opts := []nats.Option{nats.RootCAs(d.Path(tlsconf.DevCAFile))}
	sub := connect(t, s.ClientURL(), opts...)
	pub := connect(t, s.ClientURL(), opts...)
	if !sub.TLSRequired() {
		t.Error("nats.go did not see tls_required")
	}
	if _, err := sub.TLSConnectionState(); err != nil {
		t.Errorf("connection is not TLS: %v", err)
	}
	got := make(chan *nats.Msg, 1)
	if _, err := sub.ChanSubscribe("tls.x", got); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("tls.x", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m.Data) != "secret" {
			t.Errorf("got %q", m.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no message over TLS")
	}
	// Later INFOs (connect_urls changes) go through TLS too: the
	// connection keeps working after one.
	s.broadcastInfo()
	if _, err := sub.Request("tls.none", nil, 5*time.Second); err != nats.ErrNoResponders {
		t.Errorf("request after a second INFO: %v, want no responders", err)
	}
}

func TestTLSPlaintextClientRefused(t *testing.T) {
	b, _ := testTLS(t)
	s := startBroker(t, withTLS(b, tls.NoClientCert))
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	if info := readInfo(t, br); !info.TLSRequired || info.TLSVerify {
		t.Errorf("INFO tls_required=%v tls_verify=%v, want true, false", info.TLSRequired, info.TLSVerify)
	}
	if _, err := io.WriteString(conn, "CONNECT {\"verbose\":false}\r\nPUB x 1\r\nA\r\nPING\r\n"); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("reading after CONNECT: %v", err)
	}
	if string(rest) != "-ERR 'Secure Connection - TLS Required'\r\n" {
		t.Errorf("after a plaintext CONNECT the broker sent %q, want the TLS-required error and a close", rest)
	}
	if s.Stats().InMsgs != 0 {
		t.Error("the plaintext publish was taken")
	}
	// nats.go without the CA fails its verification and does not connect.
	if nc, err := nats.Connect(s.ClientURL(), nats.Timeout(5*time.Second), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("nats.go connected without trusting the CA")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("nats.go without the CA: %v, want a certificate error", err)
	}
}

func TestTLSClientCertificatesRequired(t *testing.T) {
	b, d := testTLS(t)
	s := startBroker(t, withTLS(b, tlsconf.ClientAuth(topology.ClientCertsRequire)))
	ca := nats.RootCAs(d.Path(tlsconf.DevCAFile))
	if nc, err := nats.Connect(s.ClientURL(), ca, nats.Timeout(5*time.Second), nats.MaxReconnects(0)); err == nil {
		// TLS 1.3 reports a refused client certificate on the first read.
		err = nc.Flush()
		nc.Close()
		if err == nil {
			t.Error("a client without a certificate was served")
		}
	}
	nc := connect(t, s.ClientURL(), ca, nats.ClientCert(d.Path(tlsconf.DevClientCertFile), d.Path(tlsconf.DevClientKeyFile)))
	if err := nc.Flush(); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if info := readInfo(t, bufio.NewReader(conn)); !info.TLSRequired || !info.TLSVerify {
		t.Errorf("INFO tls_required=%v tls_verify=%v, want both", info.TLSRequired, info.TLSVerify)
	}
}

func TestTLSRoutesMutual(t *testing.T) {
	b, d := testTLS(t)
	ss := startRegion(t, 2, withTLS(b, tls.NoClientCert))
	ca := nats.RootCAs(d.Path(tlsconf.DevCAFile))
	a := connect(t, ss[0].ClientURL(), ca)
	c := connect(t, ss[1].ClientURL(), ca)
	var probes atomic.Int64
	if _, err := a.Subscribe("r.>", func(*nats.Msg) { probes.Add(1) }); err != nil {
		t.Fatal(err)
	}
	_ = a.Flush()
	waitInterest(t, c, "r.probe", &probes)

	// A dialer without a client certificate is refused by the route
	// listener, and a plaintext one too.
	anon, err := tlsconf.ClientFromFiles("ca", d.Path(tlsconf.DevCAFile), "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	anon.ServerName = "127.0.0.1"
	for name, dial := range map[string]func() (net.Conn, error){
		"no client certificate": func() (net.Conn, error) { return tls.Dial("tcp", ss[0].RouteAddr(), anon) },
		"plaintext":             func() (net.Conn, error) { return net.Dial("tcp", ss[0].RouteAddr()) },
	} {
		conn, err := dial()
		if err != nil {
			continue // refused in the handshake
		}
		hello, _ := json.Marshal(routeHello{Name: "intruder", Mesh: "m", Region: "r"})
		_, _ = conn.Write(append(append([]byte("CONNECT "), hello...), '\r', '\n'))
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if strings.HasPrefix(line, "INFO") {
			t.Errorf("%s: the route listener answered %q", name, line)
		}
	}
	testutil.Eventually(t, "routes unchanged", 5*time.Second, func() bool { return len(ss[0].Routes()) == 1 })
	for _, r := range ss[0].Routes() {
		if r == "intruder" {
			t.Error("the intruder got a route")
		}
	}
}
