package quota

import (
	"testing"
	"time"
)

// TestAdmitClock: AdmitClock reads its clock only for a tenant with
// limits here, once per publish, and decides as Admit does at that time.
func TestAdmitClock(t *testing.T) {
	var l Limits
	l.Mesh[PublishRate] = 10 // one broker of one region: 10 msgs/s, depth 50 ms
	b := NewBroker(BrokerConfig{ID: "b0"})
	b.SetTenant("t", l, BrokerBase(l, "a", 1, 1), t0)
	reads := 0
	at := t0.Add(time.Second)
	clock := func() time.Time { reads++; return at }

	if r := b.AdmitClock("other", 100, clock); r != nil || reads != 0 {
		t.Fatalf("a tenant without limits: refusal %v, %d clock reads; want nil, 0", r, reads)
	}
	// The bucket holds 10 × 50 ms = 0.5 tokens at +1 s: one publish, then
	// a refusal until it refills.
	if r := b.AdmitClock("t", 100, clock); r != nil || reads != 1 {
		t.Fatalf("the first publish of t: refusal %v, %d clock reads; want nil, 1", r, reads)
	}
	r := b.AdmitClock("t", 100, clock)
	if r == nil || r.Kind != PublishRate || reads != 2 {
		t.Fatalf("the second publish at the same time: refusal %v, %d clock reads; want publish_rate's, 2", r, reads)
	}
	at = at.Add(100 * time.Millisecond)
	if r := b.AdmitClock("t", 100, clock); r != nil {
		t.Fatalf("100 ms later (1 msg earned): refused: %v", r)
	}
	if r := b.Admit("t", 100, at); r == nil {
		t.Fatal("Admit at the same time as AdmitClock's last admitted: want a refusal, got none")
	}
}
