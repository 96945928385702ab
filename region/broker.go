package region

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/topology"
)

// Serf tags a broker adds to its pools: where NATS clients connect and
// where the region's internal link listens.
const (
	TagNATS  = "nats"
	TagRoute = "route"
	// TagRun is every node's: its process's run id (see Node.run).
	TagRun = "run"
)

// startBroker runs the broker role's NATS front door on the node's
// nats_port and the region's internal link on its grpc_port (the port the
// topology gives brokers for broker-to-broker traffic). Peers come from the
// LAN pool, which starts after this (its tags carry the addresses bound
// here), so the pool is handed over through n.lanRef.
func (n *Node) startBroker() error {
	fixed := n.spec.NATSPort + n.spec.GRPCPort
	var auth broker.Authenticator // nil: clients need no credentials
	if n.nauth != nil {
		auth = n.nauth.authenticator()
	}
	var gate broker.Quotas // nil: no quotas (never a typed nil)
	if n.quota != nil {
		gate = n.quota.agent
	}
	fo, err := n.newFailover()
	if err != nil {
		return err
	}
	srv, err := withPort(fixed, n.ports.NATS, func(port int) (*broker.Server, error) {
		natsPort, routePort := n.spec.NATSPort, n.spec.GRPCPort
		if port != 0 && fixed == 0 {
			natsPort, routePort = n.ports.NATS, n.ports.GRPC
		}
		return broker.Start(broker.Config{
			ServerName:    n.name,
			Mesh:          n.cfg.Mesh.Name,
			Region:        n.cfg.Region,
			ListenAddr:    net.JoinHostPort(n.host(), strconv.Itoa(natsPort)),
			RouteAddr:     net.JoinHostPort(n.host(), strconv.Itoa(routePort)),
			Peers:         &lanPeers{pool: &n.lanRef, self: n.name},
			StrataVersion: Version,
			Hook:          n.js,
			Auth:          auth,
			Quotas:        gate,
			TLS:           n.brokerTLS(),
			Guests:        fo.lns,
			AdmitGuest:    fo.admits,
			Logger:        n.logger,
		})
	})
	if err != nil {
		fo.closeListeners()
		return err
	}
	n.broker, n.failover = srv, fo
	return nil
}

// Version is the Strata release brokers report in INFO (strata_version);
// cmd/strata sets it from its build version.
var Version = "dev"

// lanPeers adapts the region's Serf LAN pool to broker.PeerSource: the
// alive members with role broker and a route tag.
type lanPeers struct {
	pool *atomic.Pointer[gossip.Pool]
	self string
}

func (p *lanPeers) Peers() []broker.Peer {
	pool := p.pool.Load()
	if pool == nil {
		return nil
	}
	var out []broker.Peer
	for _, m := range pool.Members() {
		if m.Tags["role"] != topology.RoleBroker || m.Name == p.self {
			continue
		}
		if m.State != gossip.StateAlive && m.State != gossip.StateSuspect {
			continue
		}
		if addr := m.Tags[TagRoute]; addr != "" {
			out = append(out, broker.Peer{Name: m.Name, RouteAddr: addr})
		}
	}
	return out
}

func (p *lanPeers) Changed() <-chan struct{} {
	if pool := p.pool.Load(); pool != nil {
		return pool.Changed()
	}
	return nil
}

// registerBrokerMetrics exports the broker's counters.
func registerBrokerMetrics(n *Node) error {
	m := n.tel.Meter("github.com/stratamesh/strata/broker")
	clients, err := m.Int64ObservableGauge("strata.broker.clients", metric.WithDescription("NATS client connections"))
	if err != nil {
		return err
	}
	routes, err := m.Int64ObservableGauge("strata.broker.routes", metric.WithDescription("live routes to other brokers of the region"))
	if err != nil {
		return err
	}
	subs, err := m.Int64ObservableGauge("strata.broker.subscriptions", metric.WithDescription("client subscriptions"))
	if err != nil {
		return err
	}
	inMsgs, err := m.Int64ObservableCounter("strata.broker.in.messages", metric.WithDescription("messages published by clients"))
	if err != nil {
		return err
	}
	inBytes, err := m.Int64ObservableCounter("strata.broker.in.bytes", metric.WithUnit("By"), metric.WithDescription("header+payload bytes published by clients"))
	if err != nil {
		return err
	}
	outMsgs, err := m.Int64ObservableCounter("strata.broker.out.messages", metric.WithDescription("messages delivered to clients"))
	if err != nil {
		return err
	}
	slow, err := m.Int64ObservableCounter("strata.broker.slow_consumers", metric.WithDescription("connections closed as slow consumers"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := n.broker.Stats()
		o.ObserveInt64(clients, int64(st.Clients))
		o.ObserveInt64(routes, int64(st.Routes))
		o.ObserveInt64(subs, int64(st.Subscriptions))
		o.ObserveInt64(inMsgs, st.InMsgs)
		o.ObserveInt64(inBytes, st.InBytes)
		o.ObserveInt64(outMsgs, st.OutMsgs)
		o.ObserveInt64(slow, st.SlowConsumers)
		return nil
	}, clients, routes, subs, inMsgs, inBytes, outMsgs, slow)
	return err
}
