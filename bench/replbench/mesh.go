package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
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

type node struct {
	id     string
	cmd    *exec.Cmd
	report meshfile.Node
	done   chan struct{}
}

type region struct {
	name    string
	meta    *node
	bookies []*node
	brokers []*node
}

type mesh struct {
	dir, strata string
	keep        bool
	regions     []*region
	http        *http.Client
}

// startMesh starts every region's meta node, bookies and brokers, the
// brokers joining one WAN pool through the first broker started. The
// mesh returned (also on error) must be stopped.
func startMesh(o options) (*mesh, error) {
	dir, err := os.MkdirTemp("", "strata-repl.")
	if err != nil {
		return nil, err
	}
	m := &mesh{dir: dir, strata: o.strata, keep: o.keep, http: &http.Client{Timeout: 5 * time.Second}}
	if o.keep {
		fmt.Fprintln(os.Stderr, "# data and logs in", dir)
	}
	topo := filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(topo, []byte(fmt.Sprintf(topology, o.brokers, o.bookies, o.ensemble)), 0o644); err != nil {
		return m, err
	}
	wanSeed := ""
	for _, name := range regionNames {
		r := &region{name: name}
		m.regions = append(m.regions, r)
		common := []string{"node", "--topology", topo, "--region", name, "--data-dir", filepath.Join(dir, "data"),
			"--gossip", "loopback", "--log-level", o.logLevel}
		if r.meta, err = m.start(name, "meta", common); err != nil {
			return m, err
		}
		join := append(append([]string{}, common...), "--etcd", r.meta.report.Etcd, "--join", r.meta.report.SerfLAN)
		for i := 1; i <= o.bookies; i++ {
			k, err := m.start(name, fmt.Sprintf("k%d", i), join)
			if err != nil {
				return m, err
			}
			r.bookies = append(r.bookies, k)
		}
		for i := 1; i <= o.brokers; i++ {
			args := join
			if wanSeed != "" {
				args = append(append([]string{}, join...), "--wan-join", wanSeed)
			}
			b, err := m.start(name, fmt.Sprintf("b%d", i), args)
			if err != nil {
				return m, err
			}
			r.brokers = append(r.brokers, b)
			if wanSeed == "" {
				wanSeed = b.report.SerfWAN
			}
		}
	}
	return m, nil
}

// start runs one node (args + --id id) with its log in the data
// directory and waits for its one-line report. It dies with this
// process (parent-death signal).
func (m *mesh) start(region, id string, args []string) (*node, error) {
	logPath := filepath.Join(m.dir, region+"-"+id+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	n := &node{id: id, cmd: exec.Command(m.strata, append(append([]string{}, args...), "--id", id)...), done: make(chan struct{})}
	n.cmd.Stderr = logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { _ = n.cmd.Wait(); logf.Close(); close(n.done) }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		<-n.done
		return nil, fmt.Errorf("%s.%s: no report (log %s)", region, id, logPath)
	}
	if err := json.Unmarshal(sc.Bytes(), &n.report); err != nil {
		n.kill()
		return nil, fmt.Errorf("%s.%s: report: %w", region, id, err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return n, nil
}

// kill stops the node: SIGTERM (so a node run with STRATA_CPUPROFILE
// writes its profile), SIGKILL after 5 s.
func (n *node) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(5 * time.Second):
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
	}
}

// stop stops every node, brokers first, and removes the data directory
// unless -keep.
func (m *mesh) stop() {
	for _, r := range m.regions {
		for _, b := range r.brokers {
			b.kill()
		}
	}
	for _, r := range m.regions {
		for _, k := range r.bookies {
			k.kill()
		}
		if r.meta != nil {
			r.meta.kill()
		}
	}
	if !m.keep {
		_ = os.RemoveAll(m.dir)
	}
}

// getJSON GETs url into v.
func (m *mesh) getJSON(url string, v any) error {
	resp, err := m.http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// waitWAN waits until every broker's view of the WAN pool holds every
// broker of the mesh alive.
func (m *mesh) waitWAN(limit time.Duration) error {
	want := 0
	for _, r := range m.regions {
		want += len(r.brokers)
	}
	deadline := time.Now().Add(limit)
	why := ""
	for time.Now().Before(deadline) {
		why = ""
		for _, r := range m.regions {
			for _, b := range r.brokers {
				var v struct {
					WAN []struct{ Name, State string }
				}
				if err := m.getJSON(b.report.Admin+"/admin/v1/members", &v); err != nil {
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
					why = fmt.Sprintf("%s.%s sees %d of %d brokers alive in the WAN pool", r.name, b.id, alive, want)
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
