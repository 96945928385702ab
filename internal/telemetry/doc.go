// Package telemetry builds a node's OpenTelemetry meter provider and exports
// it for Prometheus on a private registry (ARCHITECTURE §8).
//
// It owns: the provider, the registry, the /metrics handler, and the
// resource attributes every metric carries (mesh, region, node, role).
// It must not: define metrics for other packages (each package creates its
// own instruments from the Meter it is given).
package telemetry
