package quota

import "fmt"

// Kind is one of a tenant's quotas (tenancy.Quotas).
type Kind uint8

// The quotas. Rate kinds (PublishRate, PublishBytes) are split between
// regions and brokers by leases; count kinds are checked against the
// mesh-wide use (see the package doc).
const (
	PublishRate  Kind = iota // messages/s published at their origin
	PublishBytes             // bytes/s published at their origin
	Storage                  // bytes stored, bookies + tier, every region's copy
	Topics                   // topics
	Connections              // client connections
	Consumers                // consumers (durable and ephemeral)
	NumKinds
)

var kindNames = [NumKinds]string{"publish_rate", "publish_bytes", "storage", "topics", "connections", "consumers"}
var kindUnits = [NumKinds]string{"msgs/s", "bytes/s", "bytes", "topics", "connections", "consumers"}

// String is the quota's name as in the topology and the admin API
// ("publish_rate").
func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Unit is the quota's unit ("msgs/s", "bytes").
func (k Kind) Unit() string {
	if k < NumKinds {
		return kindUnits[k]
	}
	return "?"
}

// Rate says whether k is a rate (leased) rather than a count.
func (k Kind) Rate() bool { return k == PublishRate || k == PublishBytes }

// ParseKind is the Kind named s ("publish_rate"); ok false if none.
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return 0, false
}

// Limits are one tenant's quotas as the core uses them: the mesh-wide
// limit per kind (0: unlimited) and optional per-region caps (0 or
// absent: no cap beyond the mesh-wide limit).
type Limits struct {
	Mesh    [NumKinds]float64
	Regions map[string][NumKinds]float64
}

// Limited says whether kind k has a limit.
func (l Limits) Limited(k Kind) bool { return l.Mesh[k] > 0 }

// regionCap is region's cap on k (0: none).
func (l Limits) regionCap(region string, k Kind) float64 {
	if l.Regions == nil {
		return 0
	}
	return l.Regions[region][k]
}
