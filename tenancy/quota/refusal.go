package quota

import (
	"fmt"
	"strconv"
	"time"
)

// Refusal is a quota's "no": the tenant, the quota, its mesh-wide limit
// and the use it was measured against, as a client is told
// (ARCHITECTURE §5: "a refused publish gets a clear error naming the
// tenant, the quota and its value").
type Refusal struct {
	Tenant string
	Kind   Kind
	// Limit is the mesh-wide limit (Kind's unit).
	Limit float64
	// Use is the mesh-wide use last known (rates: the admitted rate).
	Use float64
	// Allowance is this broker's share of Limit (rates), 0 for counts.
	Allowance float64
}

// Error is the refusal as one line, e.g. `tenant "acme" is over its
// publish_rate quota: limit 1000 msgs/s, mesh-wide use 1004 msgs/s`.
func (r *Refusal) Error() string {
	return fmt.Sprintf("tenant %q is over its %s quota: limit %s %s, mesh-wide use %s %s",
		r.Tenant, r.Kind, num(r.Limit), r.Kind.Unit(), num(r.Use), r.Kind.Unit())
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// Epsilon is the ε of the rate bound (see the package doc): with
// brokers brokers admitting a rate quota of limit units/s, each with
// token buckets of depth (DefaultDepth when 0), and no single publish
// over unit units (1 for publish_rate; the largest message for
// publish_bytes), the mesh admits at most limit × (1 + Epsilon) over any
// 1 s window — the buckets' bursts (depth at the allowance, which sums
// to the limit) and one publish per broker that takes a bucket into
// debt.
func Epsilon(limit float64, brokers int, unit float64, depth time.Duration) float64 {
	if depth <= 0 {
		depth = DefaultDepth
	}
	if limit <= 0 {
		return 0
	}
	return depth.Seconds() + float64(brokers)*unit/limit
}
