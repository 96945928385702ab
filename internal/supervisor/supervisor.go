package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/internal/harness"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/nodedir"
	"github.com/stratamesh/strata/internal/tlsconf"
	"github.com/stratamesh/strata/topology"
)

// run is the state of one Run call.
type run struct {
	cfg    Config
	logger *slog.Logger
	out    io.Writer
	h      *harness.Harness // runs the node processes; set before startAll
	env    []string         // added to every node's environment
	dev    *tlsconf.Dev     // --secure: the development secrets (secure.go)
	// superToken is the superuser's admin token when up made or read it
	// ("" when the topology gives only its hash).
	superToken string

	mu       sync.Mutex
	started  int            // nodes started by startAll
	file     *meshfile.File // nil until every node has started
	stopping bool
}

// Run starts every node of cfg.Mesh, serves the fault-control socket
// <DataDir>/fault.sock (package harness), writes mesh.json, prints the
// endpoints and then supervises until ctx ends, when it stops every node
// (SIGTERM, then SIGKILL after StopGrace), removes mesh.json and the
// socket and returns nil. If any node fails to start, every node already
// started is stopped and the error names the node and shows its last log
// lines.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 15 * time.Second
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	cfg.DataDir = abs
	unlock, err := prepareDataDir(cfg)
	if err != nil {
		return err
	}
	defer unlock()
	r := &run{cfg: cfg, logger: cfg.Logger, out: cfg.Out}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if r.out == nil {
		r.out = io.Discard
	}
	if os.Getenv("GOMAXPROCS") == "" {
		nodes, procs := nodeProcs(cfg.Mesh, runtime.NumCPU())
		r.env = append(r.env, "GOMAXPROCS="+strconv.Itoa(procs))
		r.logger.Info("node processes share the machine's cores", "nodes", nodes, "cpus", runtime.NumCPU(), "gomaxprocs", procs)
	}
	if err := r.secure(); err != nil {
		return err
	}
	if err := r.superuserToken(); err != nil {
		return err
	}
	if err := PrepareNATSAuth(r.cfg.Mesh, cfg.DataDir, r.out); err != nil {
		return err
	}
	r.h = harness.New(harness.Config{StartTimeout: cfg.StartTimeout, StopGrace: cfg.StopGrace, Env: r.env,
		Logger: r.logger, OnExit: r.onExit, OnReady: r.onReady})
	started := time.Now()
	if err := r.startAll(); err != nil {
		r.stopAll()
		return err
	}
	sock := filepath.Join(cfg.DataDir, harness.SocketName)
	ln, err := harness.ListenSocket(sock)
	if err != nil {
		r.stopAll()
		return err
	}
	serveCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- harness.ServeListener(serveCtx, r.h, ln) }()
	defer func() { // the socket goes before Run returns, on every path
		stopServe()
		if err := <-served; err != nil {
			r.logger.Error("fault socket", "err", err)
		}
	}()
	if err := r.writeFile(started, sock); err != nil {
		r.stopAll()
		return err
	}
	r.printEndpoints(time.Since(started))
	if err := DemoCreds(ctx, r.cfg.Mesh, cfg.DataDir, r.superToken, r.out); err != nil {
		// The mesh runs; only the demo users are missing.
		fmt.Fprintf(r.out, "strata up: no demo NATS users: %v (make users with `strata admin tenants users add`)\n", err)
	}
	<-ctx.Done()
	fmt.Fprintln(r.out, "strata up: stopping every node…")
	stopServe() // no fault commands while the nodes stop
	r.stopAll()
	if err := meshfile.Remove(cfg.DataDir); err != nil {
		return err
	}
	fmt.Fprintln(r.out, "strata up: stopped; data kept in", cfg.DataDir)
	if left := handStarted(cfg); len(left) > 0 {
		fmt.Fprintf(r.out, "strata up: still running, started by hand (yours to stop): %s\n", strings.Join(left, ", "))
	}
	return nil
}

// handStarted lists the mesh's nodes whose directory a process still
// holds once up has stopped its own: nodes an operator started by hand.
func handStarted(cfg Config) []string {
	if cfg.Mesh == nil {
		return nil
	}
	var out []string
	for i := range cfg.Mesh.Regions {
		r := &cfg.Mesh.Regions[i]
		for _, n := range r.Nodes {
			if errors.Is(nodedir.CheckNotInUse(nodedir.Dir(cfg.DataDir, r.Name, n)), nodedir.ErrInUse) {
				out = append(out, r.Name+"/"+n.ID)
			}
		}
	}
	return out
}

// startAll starts the nodes in order: meta nodes (parallel), then the first
// broker of each region (one after another, each joining the WAN pool
// through the ones before), then the rest (parallel).
func (r *run) startAll() error {
	m := r.cfg.Mesh
	lanSeed := map[string]string{}
	etcd := map[string]string{}
	var metas []startSpec
	for i := range m.Regions {
		for _, n := range m.Regions[i].NodesOf(topology.RoleMeta) {
			metas = append(metas, startSpec{region: &m.Regions[i], node: n})
		}
	}
	procs, err := r.startParallel(metas)
	if err != nil {
		return err
	}
	for _, p := range procs {
		lanSeed[p.Spec().Region] = p.Report().SerfLAN
		etcd[p.Spec().Region] = p.Report().Etcd
	}
	var wanSeeds []string
	var rest []startSpec
	for i := range m.Regions {
		reg := &m.Regions[i]
		brokers := reg.NodesOf(topology.RoleBroker)
		first := startSpec{region: reg, node: brokers[0], etcd: etcd[reg.Name], lan: lanSeed[reg.Name], wan: wanSeeds}
		p, err := r.startOne(first)
		if err != nil {
			return err
		}
		if lanSeed[reg.Name] == "" {
			lanSeed[reg.Name] = p.Report().SerfLAN
		}
		wanSeeds = append(wanSeeds, p.Report().SerfWAN)
		for _, n := range append(brokers[1:], reg.NodesOf(topology.RoleBookie)...) {
			rest = append(rest, startSpec{region: reg, node: n})
		}
	}
	for i := range rest {
		rest[i].etcd, rest[i].lan, rest[i].wan = etcd[rest[i].region.Name], lanSeed[rest[i].region.Name], wanSeeds
	}
	_, err = r.startParallel(rest)
	return err
}

// nodeProcs returns how many node processes m runs and the GOMAXPROCS
// each gets when they all share cpus cores: cpus / nodes, at least 1. Go
// sizes its scheduler for a machine of its own; with every node at
// GOMAXPROCS = cpus, their idle schedulers spin for work on cores the
// others need, and goroutine wake-ups wait for them (docs/perf.md,
// JetStream run 11: +15% publish on 2 cores for the bench mesh's 6
// nodes). The environment's GOMAXPROCS, when set, wins.
func nodeProcs(m *topology.Mesh, cpus int) (nodes, procs int) {
	for i := range m.Regions {
		r := &m.Regions[i]
		for _, role := range []string{topology.RoleMeta, topology.RoleBroker, topology.RoleBookie} {
			nodes += len(r.NodesOf(role))
		}
	}
	return nodes, max(1, cpus/max(nodes, 1))
}

// startSpec is one node to start and the seeds it is given.
type startSpec struct {
	region *topology.Region
	node   topology.Node
	etcd   string   // the region's embedded etcd client URL, if any
	lan    string   // a Serf LAN seed in the region
	wan    []string // Serf WAN seeds (brokers only)
}

func (r *run) args(s startSpec) []string {
	a := []string{"node",
		"--topology", filepath.Join(r.cfg.DataDir, topologyFile),
		"--region", s.region.Name, "--role", s.node.Role, "--id", s.node.ID,
		"--data-dir", r.cfg.DataDir, "--gossip", "loopback",
	}
	if s.etcd != "" {
		a = append(a, "--etcd", s.etcd)
	}
	if s.lan != "" {
		a = append(a, "--join", s.lan)
	}
	if s.node.Role == topology.RoleBroker && len(s.wan) > 0 {
		a = append(a, "--wan-join", strings.Join(s.wan, ","))
	}
	return a
}

func (r *run) spec(s startSpec) harness.NodeSpec {
	return harness.NodeSpec{Region: s.region.Name, ID: s.node.ID, Role: s.node.Role, Exe: r.cfg.Executable,
		Args: r.args(s)[1:], Log: filepath.Join(r.cfg.DataDir, "logs", s.region.Name+"-"+s.node.ID+".log")}
}

func (r *run) startOne(s startSpec) (*harness.Node, error) {
	n, err := r.h.Start(r.spec(s))
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	r.mu.Lock()
	r.started++
	r.mu.Unlock()
	return n, nil
}

func (r *run) startParallel(specs []startSpec) ([]*harness.Node, error) {
	hs := make([]harness.NodeSpec, len(specs))
	for i, s := range specs {
		hs[i] = r.spec(s)
	}
	nodes, err := r.h.StartParallel(hs)
	r.mu.Lock()
	for _, n := range nodes {
		if n != nil {
			r.started++
		}
	}
	r.mu.Unlock()
	if err != nil {
		return nodes, fmt.Errorf("supervisor: %w", err)
	}
	return nodes, nil
}

// stopAll stops every node: brokers and bookies first (in parallel), then
// meta nodes, so nodes can still deregister from etcd while they stop.
func (r *run) stopAll() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.h.CloseReport(func(n *harness.Node) {
		fmt.Fprintf(r.out, "strata up: node %s did not stop within %v; killed\n", n.Name(), r.cfg.StopGrace)
	})
}

// onExit reports a node that exits while the mesh is running, and records
// it in mesh.json. A death the harness caused (a fault command) is one
// line; any other is a crash report with the command to start it again.
func (r *run) onExit(n *harness.Node, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	info := n.Info()
	if info.Intended {
		fmt.Fprintf(r.out, "strata up: node %s (pid %d) killed by a fault command\n", n.Name(), info.PID)
	} else {
		fmt.Fprintf(r.out, "strata up: node %s (pid %d) exited: %s; log: %s\n  to start it again by hand (it is then yours to stop): %s\n",
			n.Name(), info.PID, info.Exit, n.Spec().Log, shellCommand(n.Spec().Command()))
	}
	r.record(n, info.Exit)
}

// onReady records a node restarted by a fault command in mesh.json (its
// ports may have changed).
func (r *run) onReady(n *harness.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil || r.stopping { // still starting: writeFile takes every report
		return
	}
	fmt.Fprintf(r.out, "strata up: node %s restarted (pid %d)\n", n.Name(), n.PID())
	r.record(n, "")
}

// record rewrites n's entry of mesh.json: its report and how it exited.
// The caller holds r.mu.
func (r *run) record(n *harness.Node, exited string) {
	if r.file == nil {
		return
	}
	e := r.file.Node(n.Spec().Region, n.Spec().ID)
	if e == nil {
		return
	}
	*e = meshNode(n.Report())
	e.Exited = exited
	if err := meshfile.Write(r.cfg.DataDir, r.file); err != nil {
		r.logger.Error("rewrite mesh.json", "err", err)
	}
}

// meshNode is a ready report as mesh.json lists it.
func meshNode(rep harness.Report) meshfile.Node {
	return meshfile.Node{ID: rep.ID, Role: rep.Role, PID: rep.PID, Etcd: rep.Etcd, NATS: rep.NATS, GRPC: rep.GRPC,
		Admin: rep.Admin, SerfLAN: rep.SerfLAN, SerfWAN: rep.SerfWAN, Failover: rep.Failover}
}

// writeFile writes mesh.json from the nodes' reports, regions and nodes in
// topology order, naming the fault socket.
func (r *run) writeFile(started time.Time, faultSocket string) error {
	f := &meshfile.File{Mesh: r.cfg.Mesh.Name, StartedAt: started.UTC().Truncate(time.Second), FaultSocket: faultSocket}
	if t := r.cfg.Mesh.TLS; t != nil {
		f.TLS = &meshfile.TLS{CAFile: t.CAFile}
		if r.dev != nil {
			f.TLS.CertFile, f.TLS.KeyFile = r.dev.Path(tlsconf.DevClientCertFile), r.dev.Path(tlsconf.DevClientKeyFile)
		}
	}
	for i := range r.cfg.Mesh.Regions {
		reg := &r.cfg.Mesh.Regions[i]
		entry := meshfile.Region{Name: reg.Name, Tier: tierOf(reg, r.cfg.DataDir), MetaPrefix: r.cfg.Mesh.KeyPrefix(reg)}
		for _, role := range []string{topology.RoleMeta, topology.RoleBroker, topology.RoleBookie} {
			for _, n := range reg.NodesOf(role) {
				if p, ok := r.h.Node(reg.Name, n.ID); ok {
					e := meshNode(p.Report())
					e.Exited = p.ExitDescription()
					entry.Nodes = append(entry.Nodes, e)
				}
			}
		}
		for _, n := range entry.Nodes {
			if n.NATS != "" {
				entry.NATS = append(entry.NATS, n.NATS)
			}
		}
		f.Regions = append(f.Regions, entry)
	}
	for i := range f.Regions {
		f.Regions[i].ClientURLs = meshfile.ClientURLs(f, f.Regions[i].Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.file = f
	return meshfile.Write(r.cfg.DataDir, f)
}

// tierOf resolves a region's tier for mesh.json: an fs tier without a dir
// lives under <data-dir>/<region>/tier.
func tierOf(reg *topology.Region, dataDir string) meshfile.Tier {
	t := meshfile.Tier{Kind: reg.Tier.Kind, Dir: reg.Tier.Dir, Bucket: reg.Tier.Bucket, Prefix: reg.Tier.Prefix}
	if t.Kind == "" {
		t.Kind = topology.TierFS
	}
	if t.Kind == topology.TierFS && t.Dir == "" {
		t.Dir = filepath.Join(dataDir, reg.Name, "tier")
	}
	return t
}

// shellCommand is args as one line a POSIX shell runs as given: words with
// characters beyond letters, digits and _./:,=@+%- are single-quoted.
func shellCommand(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		plain := a != ""
		for _, c := range a {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_./:,=@+%-", c)) {
				plain = false
				break
			}
		}
		if plain {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
