package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
)

// newAdminBookieReadOnly is `strata admin bookies read-only ID on|off`
// (PUT /admin/v1/bookie/read-only on the bookie's node).
func newAdminBookieReadOnly(flags *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "read-only BOOKIE on|off",
		Short: "Hold a bookie read-only (no new adds; reads go on), e.g. to drain it, or lift that; kept across restarts",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			var ro bool
			switch args[1] {
			case "on":
				ro = true
			case "off":
			default:
				return fmt.Errorf("read-only: want on or off, got %q", args[1])
			}
			tg, err := flags.nodeTarget("bookie", id)
			if err != nil {
				return err
			}
			r, url := tg.Region, tg.URL
			ctx, cancel := context.WithTimeout(cmd.Context(), flags.timeout)
			defer cancel()
			var view admin.BookieView
			// The bookie meant (and its region, when known) go along: a
			// bookie other than that one refuses (409).
			body := admin.ReadOnlyRequest{ReadOnly: &ro, Bookie: id, Region: r}
			err = flags.client().Send(ctx, http.MethodPut, url, "/admin/v1/bookie/read-only", body, &view)
			var apiErr *admin.APIError
			if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
				return fmt.Errorf("bookie %s: the node at %s is not a bookie (it has no /admin/v1/bookie/read-only)", id, url)
			}
			if err != nil && !errors.As(err, &apiErr) {
				return tg.NotAnswering("bookie "+id, err)
			}
			if err != nil {
				return fmt.Errorf("bookie %s: %w", id, err)
			}
			if flags.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(view)
			}
			where := id
			if r != "" {
				where = r + "/" + id
			}
			switch {
			case view.ReadOnlySet:
				fmt.Fprintf(cmd.OutOrStdout(), "bookie %s is read-only (set by an operator; `off` lifts it)\n", where)
			case view.ReadOnly:
				fmt.Fprintf(cmd.OutOrStdout(), "bookie %s: operator setting lifted, but it stays read-only: its disk is past the threshold\n", where)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "bookie %s is writable\n", where)
			}
			return nil
		},
	}
}
