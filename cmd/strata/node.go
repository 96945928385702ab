package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/region"
)

// brokerGCPercent is a broker node's GOGC unless the environment sets one
// (see newNode's help).
const brokerGCPercent = 400

func newNode() *cobra.Command {
	var cfg region.NodeConfig
	var file, gossipProfile, logLevel string
	cmd := &cobra.Command{
		Use:   "node --topology FILE --region R --role broker|bookie|meta --id ID",
		Short: "Run one node of a topology (for deployments across machines)",
		Long: `node runs one node of the topology in this process. Once it is serving it
prints one JSON line with its endpoints on stdout (the format of a node in
mesh.json); logs go to stderr. SIGINT or SIGTERM stops it gracefully: it
leaves its Serf pools and drops its registration first.

With STRATA_CPUPROFILE=FILE in the environment, the node writes a Go CPU
profile of its whole life to FILE when it stops (for go tool pprof); "{node}"
in FILE is replaced by <region>.<id>.

Unless GOGC is set in the environment, a broker node runs the Go garbage
collector at GOGC=400 (its heap may grow to five times what is live before a
collection) rather than Go's 100: a broker allocates per message, and at 100
collection took ~14% of its CPU and held PubAcks back (docs/perf.md, JetStream
runs 7-9). Bookies and meta nodes keep Go's default: a bookie's live heap is
mostly its write cache, which a higher GOGC would multiply. No memory limit is
set: a broker bounds its outbound buffers itself (broker.Config.MaxOutboundTotal)
and reuses them rather than leaving them to the collector; GOMEMLIMIT in the
environment sets one (the Go runtime reads it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, _, err := loadTopology(file)
			if err != nil {
				return err
			}
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			if cfg.Role == "broker" && os.Getenv("GOGC") == "" {
				debug.SetGCPercent(brokerGCPercent)
			}
			cfg.Mesh, cfg.Gossip, cfg.Logger = m, gossip.Profile(gossipProfile), logger
			cfg.DataDir = dataDirOr(cfg.DataDir, m)
			if path := os.Getenv("STRATA_CPUPROFILE"); path != "" {
				// "{node}" becomes region.id, so every node of a mesh
				// started with the variable writes its own profile.
				path = strings.ReplaceAll(path, "{node}", cfg.Region+"."+cfg.ID)
				stopProfile, err := startCPUProfile(path)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, err := region.StartNode(ctx, cfg)
			if err != nil {
				return err
			}
			report, _ := json.Marshal(n.Endpoints())
			fmt.Fprintln(cmd.OutOrStdout(), string(report))
			var fatal error
			select {
			case <-ctx.Done():
			case fatal = <-n.Fatal():
				logger.Error("node failed", "err", fatal)
			}
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := n.Stop(stopCtx); err != nil {
				logger.Warn("stop", "err", err)
			}
			return fatal
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "topology", "", "topology YAML (required)")
	f.StringVar(&cfg.Region, "region", "", "region of the node (required)")
	f.StringVar(&cfg.Role, "role", "", "role of the node: broker, bookie or meta (checked against the topology)")
	f.StringVar(&cfg.ID, "id", "", "node id within the region (required)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "mesh data directory (default: the topology's data_dir, else ./strata-data)")
	f.StringSliceVar(&cfg.EtcdEndpoints, "etcd", nil, "metadata etcd client URLs (default: from the topology)")
	f.StringSliceVar(&cfg.LANJoin, "join", nil, "Serf LAN seeds host:port (default: from the topology)")
	f.StringSliceVar(&cfg.WANJoin, "wan-join", nil, "Serf WAN seeds host:port (default: the region's wan_join)")
	f.StringVar(&gossipProfile, "gossip", "lan", "Serf timing: lan, wan or loopback (all nodes on one machine)")
	f.DurationVar(&cfg.RegistrationTTL, "registration-ttl", region.DefaultRegistrationTTL, "lease TTL of the node's registration in etcd")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	for _, req := range []string{"topology", "region", "id"} {
		_ = cmd.MarkFlagRequired(req)
	}
	return cmd
}

// startCPUProfile starts a CPU profile written to path; the returned
// function stops it and closes the file.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("STRATA_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("STRATA_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
