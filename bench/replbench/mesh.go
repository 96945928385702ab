package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stratamesh/strata/bench/benchmesh"
	"github.com/stratamesh/strata/internal/harness"
)

// topology is the benchmark's mesh: three regions, ledgers E/Qw/Qa all
// -ensemble (default 2) on -bookies bookies each (default 3: one spare
// for an ensemble change), namespace
// demo/geo replicated to every region (no replication list: all).
const topology = `mesh: repl-bench
defaults:
  ledger: {ensemble: %[3]d, write_quorum: %[3]d, ack_quorum: %[3]d}
  jetstream: {tenant: demo, namespace: streams}
regions:
  - {name: us-east, brokers: %[1]d, bookies: %[2]d}
  - {name: eu-west, brokers: %[1]d, bookies: %[2]d}
  - {name: ap-south, brokers: %[1]d, bookies: %[2]d}
tenants:
  - name: demo
    namespaces:
      - name: streams
      - name: geo
        retention: {time: 1h}
`

// regionNames in topology order; the first is where messages are
// published.
var regionNames = []string{"us-east", "eu-west", "ap-south"}

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
	dir, strata string
	regions     []*region
	http        *http.Client
}

// startMesh starts every region's meta node, bookies and brokers
// (bench/benchmesh), the brokers joining one WAN pool through the first
// broker started. The mesh returned (also on error) must be stopped.
func startMesh(o options) (*mesh, error) {
	bm, err := benchmesh.Start(benchmesh.Options{Strata: o.strata, Topology: fmt.Sprintf(topology, o.brokers, o.bookies, o.ensemble),
		Regions: regionNames, Brokers: o.brokers, Bookies: o.bookies, TempPrefix: "strata-repl.", LogLevel: o.logLevel, Keep: o.keep})
	if bm == nil {
		return nil, err
	}
	m := &mesh{Mesh: bm, dir: bm.Dir, strata: o.strata, http: &http.Client{Timeout: 5 * time.Second}}
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
	}
	return m, err
}

// stop stops every node and removes the data directory unless -keep.
func (m *mesh) stop() { m.Stop() }

// getJSON GETs url into v.
func (m *mesh) getJSON(url string, v any) error { return benchmesh.GetJSON(m.http, url, v) }

// waitWAN waits until every broker's view of the WAN pool holds every
// broker of the mesh alive.
func (m *mesh) waitWAN(limit time.Duration) error { return m.WaitWAN(m.http, limit) }

// replCursor is what the benchmark reads of a replicator cursor.
type replCursor struct {
	Remote  string `json:"remote"`
	State   string `json:"state"`
	LagMsgs uint64 `json:"lag_msgs"`
	Sent    uint64 `json:"sent"`
	Resent  uint64 `json:"resent"`
}

type topicStats struct {
	Owner       string `json:"owner"`
	Messages    uint64 `json:"messages"`
	Replication *struct {
		Cursors []replCursor `json:"cursors"`
	} `json:"replication"`
}

// stats reads topic (tenant/ns/topic) from region r's brokers, in turn.
func (m *mesh) stats(r *region, topic string) (*topicStats, error) {
	var last error
	for _, b := range r.brokers {
		var v struct {
			Topic *topicStats `json:"topic"`
		}
		err := m.getJSON(b.report.Admin+"/admin/v1/topics/"+topic+"/stats", &v)
		if err == nil && v.Topic == nil {
			err = errors.New("no topic in the answer")
		}
		if err == nil {
			return v.Topic, nil
		}
		last = err
	}
	return nil, last
}

// natsURLs is region r's brokers' NATS URLs.
func (r *region) natsURLs() []string {
	var out []string
	for _, b := range r.brokers {
		out = append(out, b.report.NATS)
	}
	return out
}
