package supervisor

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/stratamesh/strata/topology"
)

// Config configures one `strata up` run.
type Config struct {
	// Mesh is the validated topology (required) and TopologyYAML its source
	// bytes, copied to <DataDir>/topology.yaml for the node processes.
	Mesh         *topology.Mesh
	TopologyYAML []byte
	// DataDir holds every node's data, the logs, mesh.json and the lock
	// (required).
	DataDir string
	// Fresh wipes DataDir before starting, and the journal files of the
	// bookies whose data lived there but whose journal_dir lies outside,
	// when that journal is the wiped data's (same owner id).
	// It refuses to wipe a non-empty directory that is not a Strata data
	// directory.
	Fresh bool
	// Secure runs a development mesh with TLS on every listener and auth
	// on: a local CA and certificates, a gossip key and an etcd password
	// made in <DataDir>/secure (kept across runs), added to the topology
	// the nodes read (see secure.go). The topology must not have a tls
	// section of its own.
	Secure bool
	// Netns runs each region in a network namespace of its own
	// (harness.Net: needs root), every node binding its region's address,
	// so that the fault socket can cut the link between two regions
	// (`strata drill failover --mode partition`). The topology must bind
	// loopback only and use embedded metadata, no wan_join and no TLS
	// (checkNetns); the copy the nodes read names the namespaces'
	// addresses, and so does mesh.json.
	Netns bool
	// Executable is the strata binary to run nodes with (required; usually
	// os.Executable()).
	Executable string
	// Out receives the human-readable endpoint listing and node-death
	// reports; nil discards.
	Out io.Writer
	// StartTimeout bounds each node's start (process start to its ready
	// report). Default 60 s.
	StartTimeout time.Duration
	// StopGrace is how long a node gets after SIGTERM before SIGKILL.
	// Default 15 s.
	StopGrace time.Duration
	// Logger receives the supervisor's own logs; nil discards.
	Logger *slog.Logger
}

// Validate returns every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Mesh == nil {
		errs = append(errs, errors.New("supervisor: Config.Mesh is required"))
	}
	if len(c.TopologyYAML) == 0 {
		errs = append(errs, errors.New("supervisor: Config.TopologyYAML is required"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("supervisor: Config.DataDir is required"))
	}
	if c.Executable == "" {
		errs = append(errs, errors.New("supervisor: Config.Executable is required"))
	}
	if c.StartTimeout < 0 || c.StopGrace < 0 {
		errs = append(errs, errors.New("supervisor: StartTimeout and StopGrace must not be negative"))
	}
	return errors.Join(errs...)
}
