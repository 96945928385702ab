package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/status"
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
			f, err := meshfile.Read(dataDirOr(dataDir, nil))
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			live := status.Collect(ctx, f, &http.Client{Timeout: timeout})
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
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the nodes to answer")
	return cmd
}
