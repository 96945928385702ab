package quota

import (
	"testing"
	"time"
)

// benchBroker is a broker of region a (of three) in steady state: both
// rate quotas limited, a lease from its coordinator renewed every
// interval and one lent to it, so Admit has leases to look through.
func benchBroker(b *testing.B, limit float64) (*Broker, time.Time) {
	var l Limits
	l.Mesh[PublishRate], l.Mesh[PublishBytes], l.Mesh[Connections] = limit, limit*1000, 1000
	br := NewBroker(BrokerConfig{ID: "b0"})
	br.SetTenant("t", l, BrokerBase(l, "a", 3, 2), t0)
	now := t0
	h := br.Hello(now)
	echo := h.Sent
	for i := range 12 { // 3 s of rounds: a full set of leases
		now = t0.Add(time.Duration(i) * 250 * time.Millisecond)
		e := &Entry{}
		e.Lend[PublishRate], e.LendFor[PublishRate] = limit/10, int64(1500*time.Millisecond)
		e.Lend[PublishBytes], e.LendFor[PublishBytes] = limit*100, int64(1500*time.Millisecond)
		e.Want[PublishRate] = limit / 100
		br.Receive(&Msg{From: "region/a", Term: 1, Sent: nanos(now), Echo: echo, Tenants: map[string]*Entry{"t": e}}, now)
		echo = br.Report(now.Add(time.Millisecond))[0].Sent
	}
	return br, now
}

// BenchmarkBrokerAdmit is the cost of one publish's admission: tenant
// lookup, both buckets brought up to date through the leases, the take.
// "admit": publishes well under the allowance; "refuse": a tenant over
// it (the refusal is built). The admitting cases' limit (1e12 msgs/s)
// keeps b.N publishes within the bucket's depth: their time advances by
// 1 ms at most, so a lower limit ran dry at large b.N and measured
// refusals.
func BenchmarkBrokerAdmit(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit float64
		step  time.Duration
	}{{"admit", 1e12, time.Microsecond}, {"refuse", 1, time.Microsecond}} {
		b.Run(c.name, func(b *testing.B) {
			br, now := benchBroker(b, c.limit)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				br.Admit("t", 100, now.Add(time.Duration(i%1000)*c.step))
			}
		})
	}
	b.Run("untracked-tenant", func(b *testing.B) {
		br, now := benchBroker(b, 1e12)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			br.Admit("other", 100, now)
		}
	})
	b.Run("admit-parallel", func(b *testing.B) {
		br, now := benchBroker(b, 1e12)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				br.Admit("t", 100, now)
			}
		})
	})
}
