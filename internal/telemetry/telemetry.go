package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Identity names the node whose metrics these are; each field becomes a
// resource attribute (strata.mesh, strata.region, strata.node, strata.role).
type Identity struct {
	Mesh, Region, Node, Role string
}

// Telemetry is one node's metrics pipeline.
type Telemetry struct {
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry
	handler  http.Handler
	once     sync.Once
	err      error
}

// New builds a meter provider that Prometheus scrapes through Handler. The
// registry is private (never the global one), and also carries the Go
// runtime and process collectors.
func New(id Identity) (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithResourceAsConstantLabels(attribute.NewDenyKeysFilter()))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "strata"),
		attribute.String("strata.mesh", id.Mesh),
		attribute.String("strata.region", id.Region),
		attribute.String("strata.node", id.Node),
		attribute.String("strata.role", id.Role),
	)
	return &Telemetry{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res)),
		registry: reg,
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
	}, nil
}

// Meter returns a meter for an instrumentation scope (a package path).
func (t *Telemetry) Meter(scope string) metric.Meter { return t.provider.Meter(scope) }

// Handler serves the Prometheus text format (mount it on /metrics).
func (t *Telemetry) Handler() http.Handler { return t.handler }

// Shutdown stops the provider; idempotent.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.once.Do(func() { t.err = t.provider.Shutdown(ctx) })
	return t.err
}
