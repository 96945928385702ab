package region

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerReplicationMetrics exports, per replicator cursor of the
// topics this broker owns, strata.replication.lag.{messages,bytes,seconds}
// and strata.replication.state (1 for the cursor's state), labelled
// topic, remote (and state); and strata.replication.lost.messages per
// topic and origin region.
func registerReplicationMetrics(n *Node) error {
	m := n.tel.Meter("github.com/stratamesh/strata/replicator")
	lagMsgs, err := m.Int64ObservableGauge("strata.replication.lag.messages",
		metric.WithDescription("messages of local origin the remote region has not acknowledged, per topic and remote"))
	if err != nil {
		return err
	}
	lagBytes, err := m.Int64ObservableGauge("strata.replication.lag.bytes", metric.WithUnit("By"),
		metric.WithDescription("stored bytes of those messages (estimate)"))
	if err != nil {
		return err
	}
	lagSecs, err := m.Float64ObservableGauge("strata.replication.lag.seconds", metric.WithUnit("s"),
		metric.WithDescription("age of the oldest message the remote has not acknowledged"))
	if err != nil {
		return err
	}
	state, err := m.Int64ObservableGauge("strata.replication.state",
		metric.WithDescription("1 for the replicator cursor's state: replicating, backing-off or stalled"))
	if err != nil {
		return err
	}
	lost, err := m.Int64ObservableCounter("strata.replication.lost.messages",
		metric.WithDescription("messages of another origin skipped by gap records: trimmed at their origin before they were replicated here, per topic and origin region"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, l := range n.js.OriginLosses() {
			o.ObserveInt64(lost, int64(l.Lost), metric.WithAttributes(attribute.String("topic", l.Topic), attribute.String("origin", l.Region)))
		}
		for _, c := range n.js.Replication() {
			attrs := metric.WithAttributes(attribute.String("topic", c.Topic), attribute.String("remote", c.Remote))
			o.ObserveInt64(lagMsgs, int64(c.LagMsgs), attrs)
			o.ObserveInt64(lagBytes, int64(c.LagBytes), attrs)
			o.ObserveFloat64(lagSecs, c.LagSeconds, attrs)
			o.ObserveInt64(state, 1, metric.WithAttributes(attribute.String("topic", c.Topic),
				attribute.String("remote", c.Remote), attribute.String("state", c.State)))
		}
		return nil
	}, lagMsgs, lagBytes, lagSecs, state, lost)
	return err
}
