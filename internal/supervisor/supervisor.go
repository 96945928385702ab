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
	sp     *spawner
	env    []string     // added to every node's environment
	dev    *tlsconf.Dev // --secure: the development secrets (secure.go)
	// superToken is the superuser's admin token when up made or read it
	// ("" when the topology gives only its hash).
	superToken string

	mu       sync.Mutex
	procs    []*process
	file     *meshfile.File
	stopping bool
	watchers sync.WaitGroup
}

// Run starts every node of cfg.Mesh, writes mesh.json, prints the
// endpoints and then supervises until ctx ends, when it stops every node
// (SIGTERM, then SIGKILL after StopGrace), removes mesh.json and returns
// nil. If any node fails to start, every node already started is stopped
// and the error names the node and shows its last log lines.
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
	r := &run{cfg: cfg, logger: cfg.Logger, out: cfg.Out, sp: newSpawner()}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if r.out == nil {
		r.out = io.Discard
	}
	defer r.sp.close()
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
	started := time.Now()
	if err := r.startAll(); err != nil {
		r.stopAll()
		return err
	}
	if err := r.writeFile(started); err != nil {
		r.stopAll()
		return err
	}
	r.printEndpoints(time.Since(started))
	if err := DemoCreds(ctx, r.cfg.Mesh, cfg.DataDir, r.superToken, r.out); err != nil {
		// The mesh runs; only the demo users are missing.
		fmt.Fprintf(r.out, "strata up: no demo NATS users: %v (make users with `strata admin tenants users add`)\n", err)
	}
	for _, p := range r.procs {
		r.watchers.Add(1)
		go r.watch(p)
	}
	<-ctx.Done()
	fmt.Fprintln(r.out, "strata up: stopping every node…")
	r.stopAll()
	r.watchers.Wait()
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
		lanSeed[p.region] = p.report.SerfLAN
		etcd[p.region] = p.report.Etcd
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
			lanSeed[reg.Name] = p.report.SerfLAN
		}
		wanSeeds = append(wanSeeds, p.report.SerfWAN)
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

func (r *run) startOne(s startSpec) (*process, error) {
	logPath := filepath.Join(r.cfg.DataDir, "logs", s.region.Name+"-"+s.node.ID+".log")
	r.logger.Info("starting node", "region", s.region.Name, "node", s.node.ID, "role", s.node.Role)
	p, err := startNode(r.sp, r.cfg.Executable, r.args(s), r.env, s.region.Name, s.node.ID, s.node.Role, logPath, r.cfg.StartTimeout)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p, nil
}

func (r *run) startParallel(specs []startSpec) ([]*process, error) {
	procs := make([]*process, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i], errs[i] = r.startOne(s)
		}()
	}
	wg.Wait()
	return procs, errors.Join(errs...)
}

// stopAll stops brokers and bookies first (in parallel), then meta nodes,
// so nodes can still deregister from etcd while they stop.
func (r *run) stopAll() {
	r.mu.Lock()
	r.stopping = true
	procs := append([]*process(nil), r.procs...)
	r.mu.Unlock()
	for _, metaPhase := range []bool{false, true} {
		var wg sync.WaitGroup
		for _, p := range procs {
			if (p.role == topology.RoleMeta) != metaPhase {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !p.terminate(r.cfg.StopGrace) {
					fmt.Fprintf(r.out, "strata up: node %s did not stop within %v; killed\n", p.name(), r.cfg.StopGrace)
				}
			}()
		}
		wg.Wait()
	}
}

// watch reports a node that exits while the mesh is running, and records
// it in mesh.json.
func (r *run) watch(p *process) {
	defer r.watchers.Done()
	<-p.exited
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	how := p.exitDescription()
	fmt.Fprintf(r.out, "strata up: node %s (pid %d) exited: %s; log: %s\n  to start it again by hand (it is then yours to stop): %s\n",
		p.name(), p.report.PID, how, p.logPath, shellCommand(p.cmd.Args))
	if n := r.file.Node(p.region, p.id); n != nil {
		n.Exited = how
		if err := meshfile.Write(r.cfg.DataDir, r.file); err != nil {
			r.logger.Error("rewrite mesh.json", "err", err)
		}
	}
}

// writeFile writes mesh.json from the nodes' reports, regions and nodes in
// topology order.
func (r *run) writeFile(started time.Time) error {
	f := &meshfile.File{Mesh: r.cfg.Mesh.Name, StartedAt: started.UTC().Truncate(time.Second)}
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
				for _, p := range r.procs {
					if p.region == reg.Name && p.id == n.ID {
						entry.Nodes = append(entry.Nodes, p.report)
					}
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
	r.file = f
	r.mu.Unlock()
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
