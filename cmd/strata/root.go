package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/topology"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "strata",
		Short:         "Strata: a geo-replicated, multi-region event mesh",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newUp(), newNode(), newValidate(), newStatus(), newAdmin(), newApply(), newPub(), newSub(), newVersion())
	root.AddCommand(newAudit(), newDrill())
	return root
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			v := version
			if bi, ok := debug.ReadBuildInfo(); ok {
				v += " (" + bi.GoVersion + ")"
			}
			fmt.Fprintln(cmd.OutOrStdout(), "strata", v)
		},
	}
}

// loadTopology reads and validates file, or the embedded default mesh when
// file is empty. It prints warnings to stderr; errors come back as one
// error listing every problem.
func loadTopology(file string) (*topology.Mesh, []byte, error) {
	if file == "" {
		return topology.Default(), topology.DefaultYAML(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	m, warnings, err := topology.Parse(file, data)
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, w.String())
	}
	if err != nil {
		return nil, nil, err
	}
	return m, data, nil
}

// newLogger logs text to stderr at the named level.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// dataDirOr returns flag if set, else the topology's data_dir, else
// ./strata-data.
func dataDirOr(flag string, m *topology.Mesh) string {
	switch {
	case flag != "":
		return flag
	case m != nil && m.DataDir != "":
		return m.DataDir
	default:
		return "strata-data"
	}
}
