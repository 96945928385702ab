package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/status"
	"github.com/stratamesh/strata/internal/supervisor"
)

func newStatus() *cobra.Command {
	var dataDir string
	var asJSON bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running mesh: regions, nodes and their Serf state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := dataDirOr(dataDir, nil)
			f, err := meshfile.Read(dir)
			if err != nil {
				return err
			}
			if !supervisor.Running(dir) {
				return fmt.Errorf("%s is stale: no strata up is running with data dir %s (it was killed, or stopped uncleanly)", meshfile.Path(dir), dir)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout+time.Second)
			defer cancel()
			live, answered := status.Collect(ctx, f, &http.Client{Timeout: timeout})
			if answered == 0 {
				return fmt.Errorf("no node of mesh %s answered within %v", f.Mesh, timeout)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(live)
			}
			status.PrintTable(cmd.OutOrStdout(), live)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory of the running mesh (default ./strata-data)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON in the shape of mesh.json, with each node's state")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for each node to answer")
	return cmd
}
