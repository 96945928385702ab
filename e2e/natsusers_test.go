package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/supervisor"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/creds"
)

// natsAuthMesh is geoMeshWith(name, regions, 500, "") with admin
// authorization on (the superuser's token is superToken) and auth.nats,
// whose operator and system-account seeds are made in a directory of the
// test's. sysCreds is a .creds file of a user of the system account (the
// superuser's NATS credentials).
func natsAuthMesh(t *testing.T, name string, regions []string) (topo, sysCreds string) {
	t.Helper()
	dir := t.TempDir()
	op, sys, err := supervisor.GenerateNATSSeeds(dir)
	if err != nil {
		t.Fatal(err)
	}
	var kps []nkeys.KeyPair
	for _, f := range []struct {
		path string
		kind nkeys.PrefixByte
	}{{op, nkeys.PrefixByteOperator}, {sys, nkeys.PrefixByteAccount}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := creds.ParseSeed(b, f.kind)
		if err != nil {
			t.Fatal(err)
		}
		kps = append(kps, kp)
	}
	system, err := creds.NewSystem(kps[0], kps[1])
	if err != nil {
		t.Fatal(err)
	}
	text, err := system.MeshCreds("e2e-superuser", 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sysCreds = filepath.Join(dir, "system.creds")
	if err := os.WriteFile(sysCreds, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return geoMeshWith(name, regions, 500, "") + fmt.Sprintf(
		"auth:\n  enabled: true\n  superuser_token_sha256: %s\n  nats: {operator_seed_file: %s, system_account_seed_file: %s}\n",
		tenancy.HashSecret(superToken), op, sys), sysCreds
}

// TestNATSUsersAcrossRegions: on a 2-region mesh with auth.nats, a user
// added through the CLI in r1 connects with nats.UserCredentials in both
// regions and publishes and subscribes; a client without credentials is
// refused; the tenant's connections quota holds mesh-wide
// (connectionQuota); after `revoke` the user's live connections in both
// regions are closed and a reconnect is refused.
func TestNATSUsersAcrossRegions(t *testing.T) {
	regions := []string{"r1", "r2"}
	topo, _ := natsAuthMesh(t, "natsusers", regions)
	c := startGeoCluster(t, topo, regions)
	c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/tenants/acme", superToken, `{}`, http.StatusCreated)

	creds := filepath.Join(t.TempDir(), "alice.creds")
	out, errOut, code := strata(t, "admin", "tenants", "users", "add", "acme", "alice", "--url", c.regions["r1"].brokers["b1"].report.Admin,
		"--token", superToken, "--expiry", "1h", "-o", creds)
	if code != 0 || !strings.Contains(out, "nats --creds "+creds) {
		t.Fatalf("users add: %d\n%s\n%s", code, out, errOut)
	}
	if st, err := os.Stat(creds); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("creds file: %v %v", st, err)
	}

	if nc, err := nats.Connect(strings.Join(c.regions["r1"].urls(), ","), nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	}
	// The user works in both regions (r2 once the account has reached it).
	conns := map[string]*nats.Conn{}
	closed := map[string]chan struct{}{}
	for _, r := range regions {
		ch := make(chan struct{})
		closed[r] = ch
		var nc *nats.Conn
		var err error
		took := waitFor(t, "alice connects in "+r, 30*time.Second, func() bool {
			nc, err = nats.Connect(strings.Join(c.regions[r].urls(), ","), nats.UserCredentials(creds), nats.Timeout(2*time.Second),
				nats.MaxReconnects(2), nats.ReconnectWait(200*time.Millisecond), nats.ClosedHandler(func(*nats.Conn) { close(ch) }))
			return err == nil
		})
		t.Logf("%s: alice connected %v after asking", r, took)
		conns[r] = nc
		defer nc.Close()
		sub, err := nc.SubscribeSync("chat.room")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish("chat.room", []byte("hi from "+r)); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil || string(m.Data) != "hi from "+r {
			t.Fatalf("%s: pub/sub as alice: %v %v", r, m, err)
		}
	}

	// The user's record reaches r2 on its own (the account it logged in
	// with there may come first).
	waitFor(t, "users list in r2 shows alice", 30*time.Second, func() bool {
		out, errOut, code = strata(t, "admin", "tenants", "users", "list", "acme", "--url", c.regions["r2"].brokers["b1"].report.Admin, "--token", superToken)
		if code != 0 {
			t.Fatalf("users list in r2: %d\n%s\n%s", code, out, errOut)
		}
		return strings.Contains(out, "alice")
	})
	connectionQuota(t, c, creds, conns)
	revoked := time.Now()
	if out, errOut, code = strata(t, "admin", "tenants", "users", "revoke", "acme", "alice", "--url", c.regions["r1"].brokers["b1"].report.Admin, "--token", superToken); code != 0 {
		t.Fatalf("users revoke: %d\n%s\n%s", code, out, errOut)
	}
	for _, r := range regions {
		select {
		case <-closed[r]:
			t.Logf("%s: alice's connection closed %v after the revoke", r, time.Since(revoked).Round(time.Millisecond))
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: alice's connection still open 30 s after the revoke (connected: %v)", r, conns[r].IsConnected())
		}
		nc, err := nats.Connect(strings.Join(c.regions[r].urls(), ","), nats.UserCredentials(creds), nats.Timeout(2*time.Second))
		if err == nil {
			nc.Close()
			t.Fatalf("%s: alice reconnected after the revoke", r)
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("%s: reconnect refused with %v, want an authorization violation", r, err)
		}
	}
}

// connectionQuota: tenant acme, with one connection open in each region,
// gets a mesh-wide connections quota of 4: two more connections in r1
// are accepted, the next are refused at CONNECT with an error naming the
// quota, and closing one lets a new one in.
func connectionQuota(t *testing.T, c *geoCluster, creds string, open map[string]*nats.Conn) {
	t.Helper()
	c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/tenants/acme", superToken, `{"quotas": {"connections": 4}}`, http.StatusOK)
	url := strings.Join(c.regions["r1"].urls(), ",")
	dial := func() (*nats.Conn, error) {
		return nats.Connect(url, nats.UserCredentials(creds), nats.Timeout(2*time.Second), nats.MaxReconnects(0))
	}
	var extra []*nats.Conn
	defer func() {
		for _, nc := range extra {
			nc.Close()
		}
	}()
	var lastErr error
	waitFor(t, "two more connections of acme accepted", 30*time.Second, func() bool {
		nc, err := dial()
		if err != nil {
			lastErr = err
			time.Sleep(200 * time.Millisecond)
		} else {
			extra = append(extra, nc)
		}
		return len(extra) == 2
	})
	t.Logf("%d connections open mesh-wide; a refusal on the way: %v", len(open)+len(extra), lastErr)
	for i := 0; i < 5; i++ {
		nc, err := dial()
		if err == nil {
			extra = append(extra, nc)
			t.Fatalf("connection %d of acme accepted over its quota of 4", len(open)+len(extra))
		}
		if !strings.Contains(err.Error(), "maximum connections exceeded") || !strings.Contains(err.Error(), "connections quota") {
			t.Fatalf("refused with %v, want the connections quota named", err)
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("over the quota: %v", lastErr)
	var usage []byte
	waitFor(t, "acme's usage shows its 4 connections", 10*time.Second, func() bool {
		usage = c.mustAdmin(t, "r1", http.MethodGet, "/admin/v1/tenants/acme/usage", superToken, "", http.StatusOK)
		var u admin.Usage
		if err := json.Unmarshal(usage, &u); err != nil {
			t.Fatalf("usage answer %s: %v", usage, err)
		}
		return len(u.Quotas) == 1 && u.Quotas[0].Quota == "connections" && u.Quotas[0].Limit == 4 && u.Quotas[0].Use == 4
	})
	t.Logf("usage: %s", usage)
	extra[0].Close()
	extra = extra[1:]
	waitFor(t, "a connection accepted once one closed", 30*time.Second, func() bool {
		nc, err := dial()
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			return false
		}
		extra = append(extra, nc)
		return true
	})
}
