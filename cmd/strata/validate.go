package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/topology"
)

func newValidate() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate -f FILE",
		Short: "Check a topology file and print every problem as FILE:LINE:COL: PATH: MESSAGE",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			m, warnings, err := topology.Parse(file, data)
			out := cmd.OutOrStdout()
			for _, w := range warnings {
				fmt.Fprintln(out, w.String())
			}
			var problems topology.Problems
			if errors.As(err, &problems) {
				for _, p := range problems {
					fmt.Fprintln(out, p.String())
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d error(s)\n", file, len(problems))
				return exitError{code: 1}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: ok (mesh %s, %d regions, %d tenants, %d warnings)\n", file, m.Name, len(m.Regions), len(m.Tenants), len(warnings))
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "topology YAML (required)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}
