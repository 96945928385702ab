// Package benchmesh starts the multi-region mesh that bench/replbench and
// bench/configbench measure: every region's meta node, bookies and
// brokers as `strata node` processes on loopback, through the fault
// harness (internal/harness), brokers joining one WAN pool.
//
// It owns the start order (meta nodes, then bookies, then the first
// broker of the first region, then the other brokers joining the WAN pool
// through it), the data directory (a temporary directory removed by Stop
// unless Keep), node logs in it (<region>-<id>.log) and waiting for the
// WAN pool. It must not hold benchmark logic.
package benchmesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/stratamesh/strata/internal/harness"
)

// Options says what to start.
type Options struct {
	// Strata is the strata binary (required).
	Strata string
	// Topology is the topology YAML (required); it must define Regions
	// with Brokers brokers b1..bN and Bookies bookies k1..kN each and the
	// generated meta node.
	Topology string
	// Regions are the region names in topology order (required).
	Regions []string
	// Brokers and Bookies per region (at least 1 each).
	Brokers, Bookies int
	// TempPrefix names the temporary directory (os.MkdirTemp pattern
	// prefix, e.g. "strata-repl."); default "strata-bench.".
	TempPrefix string
	// LogLevel is the nodes' --log-level (default: the node's).
	LogLevel string
	// Keep keeps the data directory and logs after Stop (and prints
	// where they are).
	Keep bool
}

// Node is one started node.
type Node struct {
	ID     string
	Report harness.Report
	*harness.Node
}

// Region is one region's nodes.
type Region struct {
	Name    string
	Meta    *Node
	Bookies []*Node
	Brokers []*Node
}

// NATSURLs is the region's brokers' NATS URLs.
func (r *Region) NATSURLs() []string {
	var out []string
	for _, b := range r.Brokers {
		out = append(out, b.Report.NATS)
	}
	return out
}

// Mesh is a running benchmark mesh.
type Mesh struct {
	Dir, Topo string
	Options   Options
	Regions   []*Region
	ByName    map[string]*Region
	// Harness runs the nodes; benchmarks may inject faults through it.
	Harness *harness.Harness
}

// Start starts the mesh. The mesh returned (also on error, when not nil)
// must be stopped.
func Start(o Options) (*Mesh, error) {
	if o.Strata == "" || o.Topology == "" || len(o.Regions) == 0 || o.Brokers < 1 || o.Bookies < 1 {
		return nil, fmt.Errorf("benchmesh: Options need Strata, Topology, Regions and at least 1 broker and 1 bookie (got %+v)", o)
	}
	if o.TempPrefix == "" {
		o.TempPrefix = "strata-bench."
	}
	dir, err := os.MkdirTemp("", o.TempPrefix)
	if err != nil {
		return nil, err
	}
	m := &Mesh{Dir: dir, Topo: filepath.Join(dir, "topology.yaml"), Options: o, ByName: map[string]*Region{},
		Harness: harness.New(harness.Config{StopGrace: 5 * time.Second})}
	if o.Keep {
		fmt.Fprintln(os.Stderr, "# data and logs in", dir)
	}
	if err := os.WriteFile(m.Topo, []byte(o.Topology), 0o644); err != nil {
		return m, err
	}
	spec := func(region, id string, extra ...string) harness.NodeSpec {
		args := []string{"--topology", m.Topo, "--region", region, "--id", id, "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback"}
		if o.LogLevel != "" {
			args = append(args, "--log-level", o.LogLevel)
		}
		s := harness.SpecFromArgs(o.Strata, append(args, extra...))
		s.Log = filepath.Join(dir, region+"-"+id+".log")
		return s
	}
	var metas []harness.NodeSpec
	for _, name := range o.Regions {
		r := &Region{Name: name}
		m.Regions = append(m.Regions, r)
		m.ByName[name] = r
		metas = append(metas, spec(name, "meta"))
	}
	nodes, err := m.Harness.StartParallel(metas)
	if err != nil {
		return m, err
	}
	join := map[string][]string{}
	for i, r := range m.Regions {
		r.Meta = wrap(nodes[i])
		join[r.Name] = []string{"--etcd", r.Meta.Report.Etcd, "--join", r.Meta.Report.SerfLAN}
	}
	var bookies []harness.NodeSpec
	for _, r := range m.Regions {
		for i := 1; i <= o.Bookies; i++ {
			bookies = append(bookies, spec(r.Name, fmt.Sprintf("k%d", i), join[r.Name]...))
		}
	}
	if nodes, err = m.Harness.StartParallel(bookies); err != nil {
		return m, err
	}
	for i, n := range nodes {
		r := m.Regions[i/o.Bookies]
		r.Bookies = append(r.Bookies, wrap(n))
	}
	first := m.Regions[0]
	seed, err := m.Harness.Start(spec(first.Name, "b1", join[first.Name]...))
	if err != nil {
		return m, err
	}
	first.Brokers = append(first.Brokers, wrap(seed))
	var brokers []harness.NodeSpec
	var owners []*Region
	for _, r := range m.Regions {
		for i := 1; i <= o.Brokers; i++ {
			if r == first && i == 1 {
				continue
			}
			brokers = append(brokers, spec(r.Name, fmt.Sprintf("b%d", i), append(append([]string{}, join[r.Name]...), "--wan-join", seed.Report().SerfWAN)...))
			owners = append(owners, r)
		}
	}
	if nodes, err = m.Harness.StartParallel(brokers); err != nil {
		return m, err
	}
	for i, n := range nodes {
		owners[i].Brokers = append(owners[i].Brokers, wrap(n))
	}
	return m, nil
}

func wrap(n *harness.Node) *Node {
	return &Node{ID: n.Spec().ID, Report: n.Report(), Node: n}
}

// Stop stops every node (SIGTERM, so a node run with STRATA_CPUPROFILE
// writes its profile; SIGKILL after 5 s) and removes the data directory
// unless Keep.
func (m *Mesh) Stop() {
	m.Harness.Close()
	if !m.Options.Keep {
		_ = os.RemoveAll(m.Dir)
	}
}

// GetJSON GETs url with c into v; a status other than 200 is an error.
func GetJSON(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// WaitWAN waits until every broker's view of the WAN pool holds every
// broker of the mesh alive.
func (m *Mesh) WaitWAN(c *http.Client, limit time.Duration) error {
	want := 0
	for _, r := range m.Regions {
		want += len(r.Brokers)
	}
	deadline := time.Now().Add(limit)
	why := ""
	for time.Now().Before(deadline) {
		why = ""
		for _, r := range m.Regions {
			for _, b := range r.Brokers {
				var v struct {
					WAN []struct{ Name, State string }
				}
				if err := GetJSON(c, b.Report.Admin+"/admin/v1/members", &v); err != nil {
					why = err.Error()
					continue
				}
				alive := 0
				for _, mb := range v.WAN {
					if mb.State == "alive" {
						alive++
					}
				}
				if alive != want && why == "" {
					why = fmt.Sprintf("%s.%s sees %d of %d brokers alive in the WAN pool", r.Name, b.ID, alive, want)
				}
			}
		}
		if why == "" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("WAN pool incomplete: " + why)
}
