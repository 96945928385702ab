package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/internal/supervisor"
)

func newUp() *cobra.Command {
	var file, dataDir, logLevel string
	var fresh, secure, netns bool
	var startTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a whole mesh on this machine (every region's meta, bookie and broker nodes)",
		Long: `up starts every node of the topology as its own process, writes their
endpoints to <data-dir>/mesh.json, prints them, and supervises them until
interrupted (SIGINT/SIGTERM), when it stops every node and keeps the data
for the next run. Without -f it runs the embedded default mesh.

The nodes share the machine's cores: unless GOMAXPROCS is set in the
environment, each node process runs with GOMAXPROCS = cores / nodes (at
least 1), so that their Go schedulers do not spin on cores the others need.

By default the mesh is open: no TLS, plaintext gossip, etcd without a
login, and no auth unless the topology turns it on; the listing says so.
With --secure, up makes a development CA, a node certificate for
127.0.0.1/localhost, a client certificate, a Serf gossip key and an etcd
root password in <data-dir>/secure (kept for the next run), adds a tls
section naming them (and auth: {enabled: true}) to the topology the nodes
read, and prints how to connect (nats --tlsca …). For real deployments,
name your own files in the topology's tls section (docs/topology.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, raw, err := loadTopology(file)
			if err != nil {
				return err
			}
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return supervisor.Run(ctx, supervisor.Config{
				Mesh: m, TopologyYAML: raw, DataDir: dataDirOr(dataDir, m), Fresh: fresh,
				Executable: exe, Out: cmd.OutOrStdout(), StartTimeout: startTimeout, Logger: logger, Secure: secure, Netns: netns,
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology YAML (default: the embedded default mesh)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory (default: the topology's data_dir, else ./strata-data)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "wipe the data directory before starting (and the journal files in any bookie journal_dir outside it)")
	cmd.Flags().BoolVar(&secure, "secure", false, "run a development mesh with TLS on every listener and auth on: a local CA, certificates, a gossip key and an etcd password are made in <data-dir>/secure (and kept)")
	cmd.Flags().BoolVar(&netns, "netns", false, "run each region in a network namespace of its own (needs root), so that the fault socket can cut the link between two regions (strata drill failover --mode partition); the topology must bind loopback only, with embedded metadata, no wan_join and no tls")
	cmd.Flags().DurationVar(&startTimeout, "start-timeout", 60*time.Second, "how long each node may take to start")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "supervisor log level: debug, info, warn, error")
	return cmd
}
