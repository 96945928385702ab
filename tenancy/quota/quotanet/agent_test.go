package quotanet

import (
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/tenancy/quota"
)

// fakeBus records publishes.
type fakeBus struct {
	mu  sync.Mutex
	pub []string // subjects
}

func (b *fakeBus) SubscribeInternal(string, broker.InternalHandler) (func(), error) {
	return func() {}, nil
}
func (b *fakeBus) PublishInternal(subject, _, _, _ []byte) {
	b.mu.Lock()
	b.pub = append(b.pub, string(subject))
	b.mu.Unlock()
}

// An agent follows the newest coordinator term, says hello to a new one
// on its own subject, ignores an older term while the newest is heard
// from, and takes any term once the newest has been silent a lease TTL.
func TestAgentFollowsTheNewestTerm(t *testing.T) {
	now := time.Unix(1000, 0)
	bus := &fakeBus{}
	a, err := NewAgent(Config{Region: "r1", Regions: testRegions, BrokerID: "b1", Brokers: 1,
		Interval: testInterval, LeaseTTL: testLeaseTTL, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	a.bus = bus
	msg := func(term uint64) []byte {
		return (&quota.Msg{From: "region/r1", Term: term, Sent: now.UnixNano()}).Encode()
	}
	a.receive(msg(5))
	if a.Term() != 5 || len(bus.pub) != 1 || bus.pub[0] != "$STRATA.QUOTA.r1.coord.5" {
		t.Fatalf("after term 5: term %d, published %v; want a hello on coord.5", a.Term(), bus.pub)
	}
	now = now.Add(testLeaseTTL / 2)
	a.receive(msg(3))
	if a.Term() != 5 {
		t.Fatalf("an older term while the newest is heard from: term %d", a.Term())
	}
	now = now.Add(testLeaseTTL)
	a.receive(msg(3))
	if a.Term() != 3 || bus.pub[len(bus.pub)-1] != "$STRATA.QUOTA.r1.coord.3" {
		t.Fatalf("after the newest went silent: term %d, published %v; want term 3 and a hello", a.Term(), bus.pub)
	}
	a.receive([]byte(`{"from":"region/r2","term":9,"sent":1}`))
	if a.Term() != 3 {
		t.Fatalf("another region's coordinator moved the term to %d", a.Term())
	}
}
