package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
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
	dir, strata, topo string
	keep              bool
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

// startMesh starts every region's meta node, 3 bookies and brokers, the
// brokers joining one WAN pool through the first broker started. The
// mesh returned (also on error) must be stopped.
func startMesh(o options) (*mesh, error) {
	dir, err := os.MkdirTemp("", "strata-config.")
	if err != nil {
		return nil, err
	}
	m := &mesh{dir: dir, strata: o.strata, keep: o.keep, byName: map[string]*region{}, http: newClient(64)}
	if o.keep {
		fmt.Fprintln(os.Stderr, "# data and logs in", dir)
	}
	m.topo = filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(m.topo, []byte(meshTopology(o.brokers)), 0o644); err != nil {
		return m, err
	}
	wanSeed := ""
	for _, name := range regionNames {
		r := &region{name: name}
		m.regions = append(m.regions, r)
		m.byName[name] = r
		common := []string{"node", "--topology", m.topo, "--region", name, "--data-dir", filepath.Join(dir, "data"),
			"--gossip", "loopback", "--log-level", o.logLevel}
		if r.meta, err = m.start(name, "meta", common); err != nil {
			return m, err
		}
		join := append(append([]string{}, common...), "--etcd", r.meta.report.Etcd, "--join", r.meta.report.SerfLAN)
		for i := 1; i <= 3; i++ {
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

// kill stops the node: SIGTERM, SIGKILL after 5 s.
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
				body, err := m.must(http.MethodGet, b.report.Admin+"/admin/v1/members", "", http.StatusOK)
				if err == nil {
					err = json.Unmarshal(body, &v)
				}
				if err != nil {
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
