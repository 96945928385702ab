package gossip

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startPool(t *testing.T, name string) *Pool {
	t.Helper()
	p, err := Start(Config{NodeName: name, Profile: ProfileLoopback, Tags: map[string]string{"id": name}})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func states(p *Pool) map[string]string {
	out := map[string]string{}
	for _, m := range p.Members() {
		out[m.Name] = m.State
	}
	return out
}

func TestJoinFailLeave(t *testing.T) {
	a := startPool(t, "r.a")
	b := startPool(t, "r.b")
	c := startPool(t, "r.c")
	for _, p := range []*Pool{b, c} {
		if n, err := p.Join([]string{a.Addr()}); err != nil || n != 1 {
			t.Fatalf("join: n=%d err=%v", n, err)
		}
	}
	testutil.Eventually(t, "three alive members seen by c", 10*time.Second, func() bool {
		s := states(c)
		return len(s) == 3 && s["r.a"] == StateAlive && s["r.b"] == StateAlive && s["r.c"] == StateAlive
	})
	if got := a.Members()[1].Tags["id"]; got != "r.b" {
		t.Fatalf("tags not gossiped: got id=%q", got)
	}
	select {
	case <-a.Changed():
	default:
		t.Fatal("Changed had no pending signal after joins")
	}

	// b leaves gracefully: the others see it as left, not failed.
	if err := b.Leave(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	testutil.Eventually(t, "b left", 10*time.Second, func() bool { return states(a)["r.b"] == StateLeft })

	// c vanishes without a leave: the others mark it failed.
	c.Close()
	testutil.Eventually(t, "c failed", 10*time.Second, func() bool { return states(a)["r.c"] == StateFailed })
}

// TestReconnectAfterFailure restarts a failed member on its old address
// without seeds: Serf's reconnect (which joins "<name>/<addr>") must bring
// it back, so a healed partition heals the pool too.
func TestReconnectAfterFailure(t *testing.T) {
	a := startPool(t, "r.a")
	b := startPool(t, "r.b")
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "b alive at a", 10*time.Second, func() bool { return states(a)["r.b"] == StateAlive })
	port := b.serf.LocalMember().Port
	b.Close()
	testutil.Eventually(t, "b failed at a", 10*time.Second, func() bool { return states(a)["r.b"] == StateFailed })
	// The old port may be taken for a moment by another test's socket
	// (the packages' tests run in parallel): retry the bind a while.
	var b2 *Pool
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		b2, err = Start(Config{NodeName: "r.b", BindPort: int(port), Profile: ProfileLoopback})
		if err == nil || !strings.Contains(err.Error(), "address already in use") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	took := testutil.Eventually(t, "a reconnecting to the restarted b", 20*time.Second, func() bool {
		return states(a)["r.b"] == StateAlive && states(b2)["r.a"] == StateAlive
	})
	t.Logf("reconnected after %v", took)
}

func TestJoinNoSeed(t *testing.T) {
	a := startPool(t, "r.a")
	_, err := a.Join([]string{"127.0.0.1:1"})
	if err == nil {
		t.Fatal("join to a dead seed succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{BindPort: 70000, Profile: "fast"}.Validate()
	want := "gossip: NodeName is required\ngossip: BindPort 70000 is outside 0..65535\ngossip: unknown Profile \"fast\" (want lan, wan or loopback)"
	if err == nil || err.Error() != want {
		t.Fatalf("Validate = %v, want %q", err, want)
	}
	err = Config{NodeName: "us-east/b1"}.Validate()
	want = `gossip: NodeName "us-east/b1" contains "/", which breaks Serf's reconnection of failed members`
	if err == nil || err.Error() != want {
		t.Fatalf("Validate = %v, want %q", err, want)
	}
	if err := (Config{NodeName: "x"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	p := startPool(t, fmt.Sprintf("r.%d", time.Now().UnixNano()))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSecretKey: pools sharing a key gossip; a pool without the key, or
// with another, cannot join them.
func TestSecretKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	start := func(name string, key []byte) *Pool {
		p, err := Start(Config{NodeName: name, Profile: ProfileLoopback, SecretKey: key})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	a, b := start("k.a", key), start("k.b", key)
	if n, err := b.Join([]string{a.Addr()}); err != nil || n != 1 {
		t.Fatalf("join with the key: n=%d err=%v", n, err)
	}
	testutil.Eventually(t, "a sees b", 10*time.Second, func() bool { return states(a)["k.b"] == StateAlive })
	plain := start("k.plain", nil)
	if _, err := plain.Join([]string{a.Addr()}); err == nil {
		t.Error("a pool without the key joined")
	}
	other := start("k.other", []byte("fedcba9876543210fedcba9876543210"))
	if _, err := other.Join([]string{a.Addr()}); err == nil {
		t.Error("a pool with another key joined")
	}
	if _, ok := states(a)["k.plain"]; ok {
		t.Error("a lists the pool without the key")
	}
	if err := (Config{NodeName: "x", SecretKey: []byte("short")}).Validate(); err == nil || !strings.Contains(err.Error(), "SecretKey is 5 bytes") {
		t.Errorf("short key: %v", err)
	}
}
