package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/stratamesh/strata/bench/benchmesh"
	"github.com/stratamesh/strata/internal/harness"
)

// regionNames in topology order; changes are made in the first unless
// -origins says otherwise.
var regionNames = []string{"r1", "r2", "r3"}

// meshTopology is the benchmark's mesh: three regions of -brokers
// brokers and 3 bookies (ledgers E2/Qw2/Qa2), admin authorization off.
// It names only the JetStream default tenant; the benchmark's tenants
// are made at run time through the admin API (or strata apply).
func meshTopology(brokers int) string {
	var b strings.Builder
	b.WriteString("mesh: config-bench\ndefaults:\n  ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}\n  jetstream: {tenant: demo, namespace: streams}\nregions:\n")
	for _, r := range regionNames {
		fmt.Fprintf(&b, "  - {name: %s, brokers: %d, bookies: 3}\n", r, brokers)
	}
	b.WriteString("tenants:\n  - name: demo\n    namespaces:\n      - name: streams\n")
	return b.String()
}

// node is one node of the mesh and its report.
type node struct {
	id     string
	pid    int
	report harness.Report
}

type region struct {
	name    string
	meta    *node
	bookies []*node
	brokers []*node
}

type mesh struct {
	*benchmesh.Mesh
	dir, strata, topo string
	regions           []*region
	byName            map[string]*region
	http              *http.Client
}

// newClient is a keep-alive HTTP client for up to conns connections per
// broker.
func newClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * conns
	tr.MaxIdleConnsPerHost = conns
	tr.MaxConnsPerHost = 0
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// startMesh starts every region's meta node, 3 bookies and brokers
// (bench/benchmesh), the brokers joining one WAN pool through the first
// broker started. The mesh returned (also on error) must be stopped.
func startMesh(o options) (*mesh, error) {
	bm, err := benchmesh.Start(benchmesh.Options{Strata: o.strata, Topology: meshTopology(o.brokers),
		Regions: regionNames, Brokers: o.brokers, Bookies: 3, TempPrefix: "strata-config.", LogLevel: o.logLevel, Keep: o.keep})
	if bm == nil {
		return nil, err
	}
	m := &mesh{Mesh: bm, dir: bm.Dir, strata: o.strata, topo: bm.Topo, byName: map[string]*region{}, http: newClient(64)}
	conv := func(n *benchmesh.Node) *node { return &node{id: n.ID, pid: n.Report.PID, report: n.Report} }
	for _, r := range bm.Regions {
		lr := &region{name: r.Name}
		if r.Meta != nil {
			lr.meta = conv(r.Meta)
		}
		for _, k := range r.Bookies {
			lr.bookies = append(lr.bookies, conv(k))
		}
		for _, b := range r.Brokers {
			lr.brokers = append(lr.brokers, conv(b))
		}
		m.regions = append(m.regions, lr)
		m.byName[r.Name] = lr
	}
	return m, err
}

// stop stops every node and removes the data directory unless -keep.
func (m *mesh) stop() { m.Stop() }

// call is one admin request: it returns the status and body.
func call(c *http.Client, method, url, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}

// must is call that fails unless the status is one of want.
func (m *mesh) must(method, url, body string, want ...int) ([]byte, error) {
	code, b, err := call(m.http, method, url, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	for _, w := range want {
		if code == w {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%s %s: %d %s", method, url, code, bytes.TrimSpace(b))
}

// waitWAN waits until every broker's view of the WAN pool holds every
// broker of the mesh alive.
func (m *mesh) waitWAN(limit time.Duration) error { return m.WaitWAN(m.http, limit) }

// remoteBrokers is every broker outside region origin, with its region.
func (m *mesh) remoteBrokers(origin string) []target {
	var out []target
	for _, r := range m.regions {
		if r.name == origin {
			continue
		}
		for _, b := range r.brokers {
			out = append(out, target{region: r.name, id: b.id, admin: b.report.Admin})
		}
	}
	return out
}

// target is one broker's admin API.
type target struct {
	region, id, admin string
}

func (t target) name() string { return t.region + "." + t.id }
