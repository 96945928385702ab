package broker

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/broker/natsproto"

	"github.com/stratamesh/strata/tenancy/quota"
)

// brokerGate is Quotas over a real quota.Broker, as region wiring's
// adapter does it (the adapter itself lives in region).
type brokerGate struct{ b *quota.Broker }

func (g brokerGate) AdmitPublish(tenant string, size int) error {
	if r := g.b.Admit(tenant, size, time.Now()); r != nil {
		return r
	}
	return nil
}

func (g brokerGate) Connect(tenant string) error {
	if r := g.b.Acquire(tenant, quota.Connections, time.Now()); r != nil {
		return r
	}
	return nil
}

func (g brokerGate) Disconnect(tenant string) { g.b.Release(tenant, quota.Connections) }

// noopGate admits everything: what the broker itself costs per publish.
type noopGate struct{}

func (noopGate) AdmitPublish(string, int) error { return nil }
func (noopGate) Connect(string) error           { return nil }
func (noopGate) Disconnect(string)              {}

// warmGate is a gate on qb after one admission of tenant "bench" (a
// quota.Broker's bucket starts empty: the very first publish after
// SetTenant finds no tokens yet).
func warmGate(qb *quota.Broker) brokerGate {
	qb.Admit("bench", 1, time.Now())
	time.Sleep(time.Millisecond)
	return brokerGate{qb}
}

// BenchmarkPublishQuota is core publish throughput through one broker
// without a quota gate and with one backed by a quota.Broker whose limits
// are never reached (tenant "bench", the subjects' first token): the cost
// of charging every publish (issue 25's goal: <= 3%). Compare the two
// sub-benchmarks of one run (benchstat).
func BenchmarkPublishQuota(b *testing.B) {
	payload := make([]byte, 128)
	for _, bc := range []struct {
		name string
		gate Quotas
	}{
		{"gate=nil", nil},
		{"gate=noop", noopGate{}}, // the broker's own share of the cost
		{"gate=quota.Broker", func() Quotas {
			qb := quota.NewBroker(quota.BrokerConfig{ID: "bench"})
			var lim quota.Limits
			lim.Mesh[quota.PublishRate], lim.Mesh[quota.PublishBytes] = 1e12, 1e15
			qb.SetTenant("bench", lim, lim.Mesh, time.Now())
			return warmGate(qb)
		}()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := startBroker(b, func(c *Config) { c.Quotas = bc.gate })
			nc, err := nats.Connect(s.ClientURL())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := nc.Publish("bench.orders", payload); err != nil {
					b.Fatal(err)
				}
			}
			if err := nc.Flush(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if st := s.Stats(); st.QuotaRefusals != 0 {
				b.Fatalf("%d publishes refused under a limit never reached", st.QuotaRefusals)
			}
		})
	}
}

// BenchmarkAdmitCore is one charged publish alone (the tenant lookup and
// the gate's call), without the socket: with a gate that admits at once
// (the broker's share) and with a quota.Broker (the core's).
func BenchmarkAdmitCore(b *testing.B) {
	qb := quota.NewBroker(quota.BrokerConfig{ID: "bench"})
	var lim quota.Limits
	lim.Mesh[quota.PublishRate], lim.Mesh[quota.PublishBytes] = 1e12, 1e15
	qb.SetTenant("bench", lim, lim.Mesh, time.Now())
	for _, bc := range []struct {
		name string
		gate Quotas
	}{{"gate=noop", noopGate{}}, {"gate=quota.Broker", warmGate(qb)}} {
		b.Run(bc.name, func(b *testing.B) {
			c := &client{srv: &Server{cfg: Config{Quotas: bc.gate}}}
			m := &natsproto.Msg{Subject: []byte("bench.orders"), Payload: make([]byte, 128)}
			b.ReportAllocs()
			for range b.N {
				if !c.admitCore(m) {
					b.Fatal("refused")
				}
			}
		})
	}
}
