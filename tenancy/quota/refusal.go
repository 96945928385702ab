package quota

import (
	"fmt"
	"strconv"
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
