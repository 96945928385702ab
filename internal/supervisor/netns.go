package supervisor

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/stratamesh/strata/internal/harness"
	"github.com/stratamesh/strata/topology"
)

// netns prepares a Config.Netns run: it checks the topology, makes one
// network namespace per region (harness.NewNet) and writes the copy of
// the topology the nodes read with every node on its region's address.
func (r *run) netns() error {
	if err := checkNetns(r.cfg.Mesh, r.cfg.Secure); err != nil {
		return err
	}
	names := make([]string, len(r.cfg.Mesh.Regions))
	for i := range r.cfg.Mesh.Regions {
		names[i] = r.cfg.Mesh.Regions[i].Name
	}
	n, err := harness.NewNet(netName(r.cfg.DataDir), names)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNetnsTopology, err)
	}
	yml, moved, err := netnsTopology(r.cfg.TopologyYAML, r.cfg.Mesh, n.Addr)
	if err == nil {
		err = os.WriteFile(filepath.Join(r.cfg.DataDir, topologyFile), yml, 0o644)
	}
	if err != nil {
		_ = n.Close()
		return err
	}
	r.net, r.cfg.Mesh, r.cfg.TopologyYAML = n, moved, yml
	var addrs []string
	for _, name := range names {
		addrs = append(addrs, fmt.Sprintf("%s %s (%s)", name, n.Addr(name), n.Netns(name)))
	}
	fmt.Fprintf(r.out, "netns: each region runs in a network namespace of its own (%s; this machine is %s on every link)\n",
		strings.Join(addrs, ", "), n.HostAddr())
	return nil
}

// ErrNetnsTopology: `strata up --netns` cannot run this topology with
// each region in its own network namespace (the error says why).
var ErrNetnsTopology = errors.New("supervisor: --netns")

// netName is the harness.Net name of an `up --netns` run with this data
// directory (absolute): "up-" and a hash of it, so that two runs with
// different data directories get different namespaces, and a run after
// a crash removes the leftovers of the one before (harness.NewNet).
func netName(dataDir string) string {
	h := fnv.New32a()
	h.Write([]byte(dataDir))
	return fmt.Sprintf("up-%08x", h.Sum32())
}

// checkNetns reports why m cannot run with each region in a network
// namespace of its own, nil if it can: every node must bind loopback
// (127.0.0.1, localhost or ::1: up gives it its region's address
// instead), metadata must be embedded (an external etcd is not reachable
// from the namespaces), there must be no wan_join (up fills the seeds in),
// no tls section (the certificates do not name the namespaces'
// addresses) and no s3/gcs endpoint on loopback.
func checkNetns(m *topology.Mesh, secure bool) error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrNetnsTopology}, a...)...))
	}
	if secure || m.TLS != nil {
		bad("the TLS certificates name 127.0.0.1 and localhost, not the namespaces' addresses: run --netns without --secure and without a tls section")
	}
	for i := range m.Regions {
		r := &m.Regions[i]
		if !r.Metadata.Embedded {
			bad("region %s: external etcd %v is not reachable from its namespace; use metadata: embedded", r.Name, r.Metadata.Etcd)
		}
		if len(r.WANJoin) > 0 {
			bad("region %s: wan_join %v: up joins the regions itself; drop wan_join", r.Name, r.WANJoin)
		}
		if u, err := url.Parse(r.Tier.Endpoint); r.Tier.Endpoint != "" && err == nil && loopback(u.Hostname()) {
			bad("region %s: tier endpoint %s is on this machine's loopback, which its namespace does not reach", r.Name, r.Tier.Endpoint)
		}
		for _, role := range []string{topology.RoleMeta, topology.RoleBookie, topology.RoleBroker} {
			for _, n := range r.NodesOf(role) {
				if !loopback(n.Host) {
					bad("region %s node %s: host %s: up gives every node its region's namespace address, so hosts must be loopback (127.0.0.1)", r.Name, n.ID, n.Host)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func loopback(host string) bool {
	switch strings.ToLower(host) {
	case "", "127.0.0.1", "localhost", "::1", "[::1]":
		return true
	}
	return false
}

// netnsTopology rewrites a topology file's text (src, parsed as m) for
// `up --netns`: in every region, every node (explicit, or generated from
// brokers/bookies counts and the embedded meta node, which become
// explicit nodes) gets host addr(region); node fields other than host are
// kept. The result is parsed back and must resolve to the same nodes
// with the new hosts. Comments and layout are not kept (the nodes read
// the copy; the operator's file is unchanged).
func netnsTopology(src []byte, m *topology.Mesh, addr func(region string) string) ([]byte, *topology.Mesh, error) {
	var doc yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(src, &doc, yaml.UseOrderedMap()); err != nil {
		return nil, nil, fmt.Errorf("%w: reading the topology: %v", ErrNetnsTopology, err)
	}
	regions, _ := get(doc, "regions").([]any)
	if len(regions) != len(m.Regions) {
		return nil, nil, fmt.Errorf("%w: the topology's regions list (%d entries) does not match its %d regions", ErrNetnsTopology, len(regions), len(m.Regions))
	}
	for i, rv := range regions {
		reg, ok := rv.(yaml.MapSlice)
		if !ok {
			return nil, nil, fmt.Errorf("%w: regions[%d] is not a mapping", ErrNetnsTopology, i)
		}
		r := &m.Regions[i]
		if name, _ := get(reg, "name").(string); name != r.Name {
			return nil, nil, fmt.Errorf("%w: regions[%d] is %q in the text, %q parsed", ErrNetnsTopology, i, name, r.Name)
		}
		host := addr(r.Name)
		explicit, _ := get(reg, "nodes").([]any)
		var nodes []any
		has := map[string]bool{}
		for j, nv := range explicit {
			n, ok := nv.(yaml.MapSlice)
			if !ok {
				return nil, nil, fmt.Errorf("%w: regions[%d].nodes[%d] is not a mapping", ErrNetnsTopology, i, j)
			}
			role, _ := get(n, "role").(string)
			has[role] = true
			nodes = append(nodes, set(n, "host", host))
		}
		for _, role := range []string{topology.RoleMeta, topology.RoleBookie, topology.RoleBroker} {
			if has[role] {
				continue
			}
			for _, n := range r.NodesOf(role) {
				nodes = append(nodes, yaml.MapSlice{{Key: "id", Value: n.ID}, {Key: "role", Value: role}, {Key: "host", Value: host}})
			}
		}
		reg = del(del(reg, "brokers"), "bookies")
		regions[i] = set(reg, "nodes", nodes)
	}
	doc = set(doc, "regions", regions)
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: writing the topology: %v", ErrNetnsTopology, err)
	}
	moved, _, err := topology.Parse(topologyFile, out)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the rewritten topology does not parse:\n%w", ErrNetnsTopology, err)
	}
	for i := range m.Regions {
		want, got := nodeNames(&m.Regions[i], ""), nodeNames(&moved.Regions[i], addr(m.Regions[i].Name))
		if want != got {
			return nil, nil, fmt.Errorf("%w: region %s: rewritten nodes %s, want %s", ErrNetnsTopology, m.Regions[i].Name, got, want)
		}
	}
	return out, moved, nil
}

// nodeNames lists r's resolved nodes as role/id, checking (when host is
// not empty) that each binds host.
func nodeNames(r *topology.Region, host string) string {
	var out []string
	for _, role := range []string{topology.RoleMeta, topology.RoleBookie, topology.RoleBroker} {
		for _, n := range r.NodesOf(role) {
			s := role + "/" + n.ID
			if host != "" && n.Host != host {
				s += "@" + n.Host
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

func get(m yaml.MapSlice, key string) any {
	for _, it := range m {
		if it.Key == key {
			return it.Value
		}
	}
	return nil
}

func set(m yaml.MapSlice, key string, v any) yaml.MapSlice {
	for i, it := range m {
		if it.Key == key {
			m[i].Value = v
			return m
		}
	}
	return append(m, yaml.MapItem{Key: key, Value: v})
}

func del(m yaml.MapSlice, key string) yaml.MapSlice {
	out := m[:0]
	for _, it := range m {
		if it.Key != key {
			out = append(out, it)
		}
	}
	return out
}
