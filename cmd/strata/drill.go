package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/drill"
	"github.com/stratamesh/strata/internal/drill/live"
	"github.com/stratamesh/strata/internal/harness"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/supervisor"
	"github.com/stratamesh/strata/tenancy"
)

func newDrill() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Disaster-recovery drills on a running mesh",
	}
	cmd.AddCommand(newDrillFailover())
	return cmd
}

// drillFlags are `strata drill failover`'s flags.
type drillFlags struct {
	region, survivor, mode, load, namespace string
	dataDir, cutCmd, healCmd                string
	nats                                    []string
	forD, warmup, syncInterval, catchUp     time.Duration
	keep, json, withinBound                 bool
	maxRPOMsgs, maxLost, maxDups            int
	maxRPO, maxRTO, maxCatchUp              time.Duration
	tls                                     tlsFlags
}

func newDrillFailover() *cobra.Command { return drillFailoverCmd(&drillFlags{}) }

func drillFailoverCmd(f *drillFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "failover --region R",
		Short: "Cut a region, move clients to a survivor, heal, and report RPO, RTO, lost and duplicates",
		Long: `Runs producers (JetStream publishes with Nats-Msg-Id at --load) and a replicated
subscription's consumer in --region on a drill topic of their own, cuts the region
(--mode kill|freeze|partition through the fault socket of 'strata up', or the
--cut-cmd/--heal-cmd hooks for real hosts), moves the clients to a surviving region,
heals the region after --for, waits until every acknowledged message is in every
region of the namespace, and prints a report. docs/drill.md has the report's
definitions and its JSON schema.

Exit status: 0 the drill passed; 1 a threshold given on the command line (or
--max-lost, 0 by default) was missed, or the drill measured nothing (no producer or
consumer resumed in the survivor, fewer than 5 messages acknowledged before the cut),
or it failed while running (a hook failing, the survivor not reachable); 2 bad
arguments (a malformed flag, an unknown region, a survivor outside the namespace's
replication list, a --load too low to send 5 messages in the warmup and in the
outage) or the mesh could not be reached before the drill began.`,
		Args: func(cmd *cobra.Command, args []string) error {
			return usageErr(cobra.NoArgs(cmd, args))
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			th, err := f.thresholds(cmd)
			if err != nil {
				return usageErr(err)
			}
			return runDrill(cmd, f, th)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	fs := cmd.Flags()
	fs.StringVar(&f.region, "region", "", "the region to cut (required)")
	fs.StringVar(&f.survivor, "survivor", "", "the region the clients move to (default: the first other region of the namespace)")
	fs.StringVar(&f.mode, "mode", live.ModeKill, "kill (SIGKILL every node, restart at heal), freeze (SIGSTOP, SIGCONT at heal) or partition (cut the region's links); ignored with --cut-cmd")
	fs.StringVar(&f.load, "load", "50/s", "publish rate: messages per second, as 200, 200/s, 600/m")
	fs.DurationVar(&f.forD, "for", 10*time.Second, "outage length: cut → heal")
	fs.DurationVar(&f.warmup, "warmup", 3*time.Second, "clients run in --region this long before the cut")
	fs.StringVar(&f.namespace, "namespace", "", "TENANT/NAMESPACE of the drill topic (default: one from the mesh replicating --region to another region)")
	fs.DurationVar(&f.syncInterval, "sync-interval", time.Second, "the mesh's replicated-subscription sync interval (regions[].replicator.sync_interval), for the duplicates bound")
	fs.DurationVar(&f.catchUp, "catch-up-timeout", 2*time.Minute, "how long to wait after the heal for every region to hold every acknowledged message")
	fs.BoolVar(&f.keep, "keep", false, "keep the drill topic (default: delete it at the end)")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON (docs/drill.md), no progress display")
	fs.StringVar(&f.dataDir, "data-dir", "", "data directory of a running 'strata up' (default ./strata-data)")
	fs.StringVar(&f.cutCmd, "cut-cmd", "", "shell command that cuts the region ({region} is replaced by its name; also $STRATA_DRILL_REGION)")
	fs.StringVar(&f.healCmd, "heal-cmd", "", "shell command that heals the region (with --cut-cmd)")
	fs.StringArrayVar(&f.nats, "nats", nil, "REGION=URL[,URL…]: a region's NATS URLs instead of mesh.json (repeat per region; the regions given are the namespace's; needs --namespace; faults through --cut-cmd/--heal-cmd or the fault socket in --data-dir)")
	fs.IntVar(&f.maxRPOMsgs, "max-rpo-msgs", 0, "fail when RPO exceeds this many messages")
	fs.DurationVar(&f.maxRPO, "max-rpo", 0, "fail when RPO exceeds this much traffic (e.g. 1s)")
	fs.DurationVar(&f.maxRTO, "max-rto", 0, "fail when either RTO (publish or consume) exceeds this")
	fs.IntVar(&f.maxLost, "max-lost", 0, "fail when more acknowledged messages than this are lost")
	fs.IntVar(&f.maxDups, "max-duplicates", 0, "fail when more duplicate deliveries than this")
	fs.DurationVar(&f.maxCatchUp, "max-catch-up", 0, "fail when catch-up takes longer than this")
	fs.BoolVar(&f.withinBound, "dups-within-bound", false, "fail when redeliveries exceed the design's bound")
	f.tls.register(fs)
	return cmd
}

// thresholds validates the flags and returns the thresholds given on
// the command line.
func (f *drillFlags) thresholds(cmd *cobra.Command) (drill.Thresholds, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if f.region == "" {
		bad("--region is required: the region to cut")
	} else if !tenancy.ValidToken(f.region) {
		bad("--region %q: want a region name (letters, digits, - and _)", f.region)
	}
	if f.survivor != "" && f.survivor == f.region {
		bad("--survivor %s is the region cut", f.survivor)
	}
	if (f.cutCmd == "") != (f.healCmd == "") {
		bad("--cut-cmd and --heal-cmd go together")
	}
	if f.cutCmd == "" {
		switch f.mode {
		case live.ModeKill, live.ModeFreeze, live.ModePartition:
		default:
			bad("--mode %q: want kill, freeze or partition", f.mode)
		}
	}
	pos := func(name string, d, limit time.Duration) bool {
		if d <= 0 || d > limit {
			bad("--%s %v: want more than 0 and at most %v", name, d, limit)
			return false
		}
		return true
	}
	okFor, okWarmup := pos("for", f.forD, time.Hour), pos("warmup", f.warmup, time.Hour)
	if rate, err := drill.ParseRate(f.load); err != nil {
		bad("--load: %v", err)
	} else if okFor && okWarmup {
		if err := drill.CheckLoad(rate, f.warmup, f.forD); err != nil {
			bad("--load %s: %v", f.load, err)
		}
	}
	pos("sync-interval", f.syncInterval, time.Hour)
	pos("catch-up-timeout", f.catchUp, 24*time.Hour)
	if len(f.nats) > 0 {
		if f.namespace == "" {
			bad("--nats needs --namespace")
		}
		for _, v := range f.nats {
			if _, _, err := drill.ParseRegionURLs(v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if f.namespace != "" {
		if _, err := tenancy.ParseNSName(f.namespace); err != nil {
			bad("--namespace %q: %v", f.namespace, err)
		}
	}
	var t drill.Thresholds
	changed := cmd.Flags().Changed
	if f.maxLost < 0 {
		bad("--max-lost %d: want 0 or more", f.maxLost)
	}
	t.MaxLost = f.maxLost
	if changed("max-rpo-msgs") {
		if f.maxRPOMsgs < 0 {
			bad("--max-rpo-msgs %d: want 0 or more", f.maxRPOMsgs)
		}
		t.MaxRPOMsgs = &f.maxRPOMsgs
	}
	if changed("max-duplicates") {
		if f.maxDups < 0 {
			bad("--max-duplicates %d: want 0 or more", f.maxDups)
		}
		t.MaxDups = &f.maxDups
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		dst  **time.Duration
	}{{"max-rpo", &f.maxRPO, &t.MaxRPO}, {"max-rto", &f.maxRTO, &t.MaxRTO}, {"max-catch-up", &f.maxCatchUp, &t.MaxCatchUp}} {
		if changed(d.name) {
			if *d.v < 0 {
				bad("--%s %v: want 0 or more", d.name, *d.v)
			}
			*d.dst = d.v
		}
	}
	t.WithinBound = f.withinBound
	return t, errors.Join(errs...)
}

func runDrill(cmd *cobra.Command, f *drillFlags, th drill.Thresholds) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rate, _ := drill.ParseRate(f.load)
	dir := dataDirOr(f.dataDir, nil)
	cfg := live.Config{
		Region: f.region, Survivor: f.survivor, Mode: f.mode, Load: rate, Warmup: f.warmup, For: f.forD,
		SyncInterval: f.syncInterval, CatchUpTimeout: f.catchUp, Keep: f.keep,
	}
	var others []string
	if len(f.nats) > 0 {
		eps := map[string][]string{}
		for _, v := range f.nats {
			r, u, _ := drill.ParseRegionURLs(v)
			eps[r] = append(eps[r], u...)
		}
		cfg.Endpoints = func() (map[string][]string, error) { return eps, nil }
		cfg.Namespace, _ = tenancy.ParseNSName(f.namespace)
		for r := range eps {
			cfg.Regions = append(cfg.Regions, r)
		}
		sort.Strings(cfg.Regions)
		if err := checkRegions(cfg.Regions, f); err != nil {
			return err
		}
	} else {
		mf, err := meshfile.Read(dir)
		if err != nil {
			return usageErr(err)
		}
		if !supervisor.Running(dir) {
			return usageErr(fmt.Errorf("%s is stale: no strata up is running with data dir %s", meshfile.Path(dir), dir))
		}
		cfg.Endpoints = func() (map[string][]string, error) {
			m, err := meshfile.Read(dir)
			if err != nil {
				return nil, err
			}
			eps := map[string][]string{}
			for _, r := range m.Regions {
				eps[r.Name] = r.NATS
			}
			return eps, nil
		}
		var names []string
		for _, r := range mf.Regions {
			names = append(names, r.Name)
			if r.Name != f.region {
				others = append(others, r.Name)
			}
		}
		if err := checkRegions(names, f); err != nil {
			return err
		}
		if err := drillNamespace(ctx, f, mf, &cfg); err != nil {
			return usageErr(err)
		}
	}
	var err error
	if cfg.Survivor, err = drill.PickSurvivor(cfg.Namespace, cfg.Regions, f.region, f.survivor); err != nil {
		return usageErr(err)
	}
	tc, err := f.tls.config(f.dataDir)
	if err != nil {
		return usageErr(err)
	}
	if tc != nil {
		cfg.NATSOptions = append(cfg.NATSOptions, nats.Secure(tc))
	}
	if p := filepath.Join(dir, "creds", cfg.Namespace.Tenant+"-"+supervisor.DemoUser+".creds"); fileExists(p) {
		cfg.NATSOptions = append(cfg.NATSOptions, nats.UserCredentials(p))
	}

	var fault live.Fault
	if f.cutCmd != "" {
		cfg.Mode = live.ModeHook
		fault, err = live.HookFault(f.cutCmd, f.healCmd, f.region)
	} else {
		var fl live.Faults
		if fl, err = live.DialFaults(dir); err == nil && len(f.nats) > 0 {
			// No mesh.json: the fault socket's harness knows the mesh's regions.
			var nodes []harness.NodeInfo
			if nodes, err = fl.Nodes(); err == nil {
				others, err = live.OtherRegions(nodes, f.region)
			}
		}
		if err == nil {
			fault, err = live.HarnessFault(fl, f.mode, f.region, others)
		}
	}
	if err != nil {
		return usageErr(err)
	}

	out := cmd.OutOrStdout()
	if file, ok := out.(*os.File); ok && !f.json && term.IsTerminal(int(file.Fd())) {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(file), progressbar.OptionSpinnerType(14),
			progressbar.OptionSetDescription("drill: setup"), progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond))
		cfg.Progress = func(s live.Status) {
			bar.Describe(fmt.Sprintf("drill %s: %s %4.1fs  clients in %s  acked %d  delivered %d",
				f.region, s.Phase, s.Since.Seconds(), s.Region, s.Acked, s.Delivered))
			_ = bar.Set(s.Acked)
		}
		defer func() { _ = bar.Finish() }()
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	log, err := live.Run(ctx, cfg, fault)
	if cfg.Progress != nil {
		fmt.Fprint(out, "\r\033[K")
	}
	if err != nil {
		return codedError{code: 1, err: err}
	}
	r := drill.Analyze(log)
	v := drill.Check(r, th)
	if err := writeDrillReport(out, f.json, r, v); err != nil {
		return err
	}
	if len(v) > 0 {
		names := make([]string, len(v))
		for i, x := range v {
			names[i] = x.Flag
		}
		return codedError{code: 1, err: fmt.Errorf("drill failed: %s", strings.Join(names, ", "))}
	}
	return nil
}

// usageErr marks err (when not nil) as a bad argument or a mesh not
// reached before the drill began: exit status 2.
func usageErr(err error) error {
	if err == nil {
		return nil
	}
	return codedError{code: 2, err: err}
}

// checkRegions refuses a --region or --survivor that is not one of the
// mesh's regions (exit status 2).
func checkRegions(mesh []string, f *drillFlags) error {
	if err := drill.CheckRegion(mesh, "region", f.region); err != nil {
		return usageErr(err)
	}
	if f.survivor != "" {
		if err := drill.CheckRegion(mesh, "survivor", f.survivor); err != nil {
			return usageErr(err)
		}
	}
	return nil
}

// drillReportJSON is the --json document: the report and the thresholds
// missed.
type drillReportJSON struct {
	drill.Report
	Violations []drill.Violation `json:"violations"`
	Pass       bool              `json:"pass"`
}

func writeDrillReport(w io.Writer, asJSON bool, r drill.Report, v []drill.Violation) error {
	if !asJSON {
		return drill.WriteTable(w, r, v)
	}
	if v == nil {
		v = []drill.Violation{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(drillReportJSON{Report: r, Violations: v, Pass: len(v) == 0})
}

// drillNamespace fills cfg's namespace and its replication list from a
// broker of --region (admin API).
func drillNamespace(ctx context.Context, f *drillFlags, mf *meshfile.File, cfg *live.Config) error {
	af := adminFlags{dataDir: f.dataDir, timeout: 5 * time.Second, tls: f.tls}
	client := af.client()
	targets, _, err := admin.RoleTargets(mf, f.region, "broker")
	if err != nil {
		return err
	}
	var last error
	for _, base := range targets[f.region] {
		var cands []drill.Candidate
		cands, last = namespaceCandidates(ctx, client, base, f.namespace)
		if last != nil {
			continue
		}
		if f.namespace != "" {
			if len(cands) == 0 {
				return fmt.Errorf("--namespace %s: not found", f.namespace)
			}
			cfg.Namespace, cfg.Regions = cands[0].NS, cands[0].Replication
			return nil
		}
		c, err := drill.ChooseNamespace(cands, f.region, f.survivor)
		if err != nil {
			return err
		}
		cfg.Namespace, cfg.Regions = c.NS, c.Replication
		return nil
	}
	return fmt.Errorf("drill: no broker of %s answered the admin API: %v", f.region, last)
}

func namespaceCandidates(ctx context.Context, c *admin.Client, base, only string) ([]drill.Candidate, error) {
	var cands []drill.Candidate
	if only != "" {
		n, _ := tenancy.ParseNSName(only)
		ns, err := c.Namespace(ctx, base, n)
		var ae *admin.APIError
		if errors.As(err, &ae) && ae.Status == 404 {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []drill.Candidate{{NS: n, Replication: ns.Policies.Replication, AutoCreate: ns.Policies.AutoCreateTopics}}, nil
	}
	tenants, err := c.Tenants(ctx, base)
	if err != nil {
		return nil, err
	}
	for _, t := range tenants {
		nss, err := c.Namespaces(ctx, base, t.Name)
		if err != nil {
			return nil, err
		}
		for _, ns := range nss {
			cands = append(cands, drill.Candidate{NS: tenancy.NSName{Tenant: t.Name, Namespace: ns.Name},
				Replication: ns.Policies.Replication, AutoCreate: ns.Policies.AutoCreateTopics, Quotas: hasQuotas(t.Quotas)})
		}
	}
	return cands, nil
}

func hasQuotas(q tenancy.Quotas) bool {
	return q.PublishRate|q.PublishBytes|q.Storage|q.Topics|q.Connections|q.Consumers != 0 || len(q.Regions) > 0
}
