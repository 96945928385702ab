package quota

import (
	"strings"
	"testing"
	"time"
)

// TestCountRefusalNamesMeshUse: a broker refusing a connection names the
// mesh-wide use as its coordinator last reported it, with the broker's
// own connections since its last report added.
func TestCountRefusalNamesMeshUse(t *testing.T) {
	var l Limits
	l.Mesh[Connections] = 4
	b := NewBroker(BrokerConfig{ID: "b0"})
	b.SetTenant("t", l, BrokerBase(l, "a", 1, 1), t0)
	c := NewCoordinator(CoordConfig{Region: "a", Regions: []string{"a"}, Term: 1, Brokers: 1}, t0)
	c.SetTenant("t", l)
	now := t0
	step := func() {
		now = now.Add(DefaultInterval)
		for _, m := range b.Report(now) {
			c.Receive(m, now)
		}
		if len(b.Report(now)) == 0 {
			c.Receive(b.Hello(now), now)
		}
		for _, m := range c.Tick(now) {
			b.Receive(m, now)
		}
	}
	admitted := 0
	for i := 0; i < 40 && admitted < 4; i++ {
		step()
		if b.Acquire("t", Connections, now) == nil {
			admitted++
		}
	}
	if admitted != 4 {
		t.Fatalf("admitted %d connections of a quota of 4", admitted)
	}
	for i := 0; i < 8; i++ {
		step()
	}
	r := b.Acquire("t", Connections, now)
	if r == nil {
		t.Fatal("a fifth connection admitted")
	}
	if r.Use != 4 || !strings.Contains(r.Error(), "mesh-wide use 4 connections") {
		t.Errorf("refusal: %v (use %v), want the mesh-wide use 4", r, r.Use)
	}
	_ = time.Second
}

// TestConnectionsBeforeTheQuota: connections taken while a tenant had
// no quota count once it gets one; a hand-over zeroes them for good.
func TestConnectionsBeforeTheQuota(t *testing.T) {
	b := NewBroker(BrokerConfig{ID: "b0"})
	for i := 0; i < 3; i++ {
		if r := b.Acquire("t", Connections, t0); r != nil {
			t.Fatalf("unlimited tenant refused: %v", r)
		}
	}
	b.Release("t", Connections)
	var l Limits
	l.Mesh[Connections] = 2
	b.SetTenant("t", l, BrokerBase(l, "a", 1, 1), t0)
	if r := b.Acquire("t", Connections, t0); r == nil {
		t.Fatal("a third connection admitted under a quota of 2 (two were open before it)")
	}
	if m := b.HandOver(t0); len(m) != 0 && m[0].Tenants["t"].Use[Connections] != 0 {
		t.Fatalf("hand-over reported %v connections", m[0].Tenants["t"].Use[Connections])
	}
	b.Release("t", Connections)
	if r := b.Acquire("t", Connections, t0); r != nil {
		t.Fatalf("after the hand-over, a connection refused: %v", r)
	}
}

// TestTopicsFarFromTheLimit: a tenant far below its topics quota gets
// every creation it asks for, one after another, on a live coordinator.
func TestTopicsFarFromTheLimit(t *testing.T) {
	var l Limits
	l.Mesh[Topics] = 100000
	b := NewBroker(BrokerConfig{ID: "b0"})
	b.SetTenant("t", l, BrokerBase(l, "a", 1, 1), t0)
	c := NewCoordinator(CoordConfig{Region: "a", Regions: []string{"a"}, Term: 1, Brokers: 1}, t0)
	c.SetTenant("t", l)
	now := t0
	step := func() {
		now = now.Add(DefaultInterval)
		ms := b.Report(now)
		if len(ms) == 0 {
			h := b.Hello(now)
			h.To, h.ToTerm = "region/a", 1
			ms = append(ms, h)
		}
		for _, m := range ms {
			c.Receive(m, now)
		}
		for _, m := range c.Tick(now) {
			b.Receive(m, now)
		}
	}
	for i := 0; i < 8; i++ {
		step()
	}
	use := 0.0
	for i := 0; i < 200; i++ {
		if r := b.Check("t", Topics, 1, now); r != nil {
			t.Fatalf("creation %d refused at use %v of 100000: %v", i+1, use, r)
		}
		use++
		b.SetUse("t", Topics, use)
		if i%5 == 4 {
			step()
		}
	}
}
