package topology

import "strconv"

// LocalHost is the host of nodes generated from counts.
const LocalHost = "127.0.0.1"

// Region returns the region named name.
func (m *Mesh) Region(name string) (*Region, bool) {
	for i := range m.Regions {
		if m.Regions[i].Name == name {
			return &m.Regions[i], true
		}
	}
	return nil, false
}

// KeyPrefix is the etcd key prefix of region r's metadata:
// <metadata prefix, default /strata>/<mesh>/<region>, so regions sharing
// one external etcd never collide.
func (m *Mesh) KeyPrefix(r *Region) string {
	p := r.Metadata.Prefix
	if p == "" {
		p = "/strata"
	}
	return p + "/" + m.Name + "/" + r.Name
}

// Tenant returns the tenant named name.
func (m *Mesh) Tenant(name string) (*Tenant, bool) {
	for i := range m.Tenants {
		if m.Tenants[i].Name == name {
			return &m.Tenants[i], true
		}
	}
	return nil, false
}

// Namespace returns the tenant's namespace named name.
func (t *Tenant) Namespace(name string) (*Namespace, bool) {
	for i := range t.Namespaces {
		if t.Namespaces[i].Name == name {
			return &t.Namespaces[i], true
		}
	}
	return nil, false
}

// NodesOf resolves the region's nodes of one role (RoleBroker, RoleBookie
// or RoleMeta), in file order:
//
//   - the explicit nodes of that role, if the region lists any;
//   - else, for brokers, ids b1..bN (N = Brokers) and for bookies k1..kN
//     (N = Bookies), with Host "127.0.0.1" and all ports 0 (chosen at
//     start);
//   - else, for meta, one node {ID: "meta", Role: "meta", Host:
//     "127.0.0.1"} when Metadata.Embedded, and none with external etcd.
//
// The result is a fresh slice; changing it does not change the region.
func (r *Region) NodesOf(role string) []Node {
	var out []Node
	for _, n := range r.Nodes {
		if n.Role == role {
			out = append(out, n)
		}
	}
	if len(out) > 0 {
		return out
	}
	switch role {
	case RoleBroker:
		return generatedNodes("b", RoleBroker, r.Brokers)
	case RoleBookie:
		return generatedNodes("k", RoleBookie, r.Bookies)
	case RoleMeta:
		if r.Metadata.Embedded {
			return []Node{{ID: "meta", Role: RoleMeta, Host: LocalHost}}
		}
	}
	return nil
}

func generatedNodes(prefix, role string, n int) []Node {
	if n <= 0 {
		return nil
	}
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: prefix + strconv.Itoa(i+1), Role: role, Host: LocalHost}
	}
	return out
}

// Node returns the node with the given id, of any role, resolved as NodesOf
// does (so "b1", "k2" and "meta" find generated nodes).
func (r *Region) Node(id string) (Node, bool) {
	for _, role := range nodeRoles {
		for _, n := range r.NodesOf(role) {
			if n.ID == id {
				return n, true
			}
		}
	}
	return Node{}, false
}
