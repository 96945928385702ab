package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/status"
	"github.com/stratamesh/strata/internal/supervisor"
)

func newStatus() *cobra.Command {
	var dataDir string
	var asJSON bool
	var timeout time.Duration
	var token string
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running mesh: regions, nodes and their Serf state, tenants near a quota, regions not home, decommissions",
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
			// With auth on, the superuser's token (--token, $STRATA_ADMIN_TOKEN
			// or up's token file) goes with every request.
			af := adminFlags{dataDir: dataDir, token: token, timeout: timeout, tls: tf}
			hc := &http.Client{Timeout: timeout, Transport: bearer{token: af.client().Token, next: tf.httpTransport(dataDir)}}
			live, answered := status.Collect(ctx, f, hc)
			if answered == 0 {
				return fmt.Errorf("no node of mesh %s answered within %v", f.Mesh, timeout)
			}
			// Tenants near a quota: a tenant list and one usage request per
			// tenant with quotas, to one broker. Not answering is not an
			// error of status (the nodes' table says why).
			quotas, _ := status.CollectQuotas(ctx, &admin.Client{HTTP: hc}, live)
			// Regions not home (failover) and decommissions in progress
			// or failing: every broker's view, a few at a time.
			recovery := status.CollectRecovery(ctx, &admin.Client{HTTP: hc}, live)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(newStatusJSON(live, quotas, recovery))
			}
			status.PrintTable(cmd.OutOrStdout(), live)
			status.PrintQuotas(cmd.OutOrStdout(), quotas)
			status.PrintRecovery(cmd.OutOrStdout(), recovery, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory of the running mesh (default ./strata-data)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON in the shape of mesh.json, with each node's state (and \"quotas\", \"recovery\" when there is something to say)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for each node to answer")
	tf.register(cmd.Flags())
	cmd.Flags().StringVar(&token, "token", "", "admin token when the mesh has auth on (default $"+tokenEnv+", else up's "+supervisor.SuperuserTokenFile+")")
	return cmd
}

// statusJSON is `strata status --json`: mesh.json's shape with each
// node's state, and "quotas" (tenants near a limit, tenants whose usage
// is unknown) and "recovery" (regions not home, pending decommissions,
// stale replicator cursors; status.Recovery) when there is anything to
// say.
type statusJSON struct {
	*meshfile.File
	Quotas   *status.Quotas   `json:"quotas,omitempty"`
	Recovery *status.Recovery `json:"recovery,omitempty"`
}

func newStatusJSON(f *meshfile.File, q status.Quotas, r status.Recovery) statusJSON {
	out := statusJSON{File: f}
	if len(q.Near) > 0 || len(q.Unknown) > 0 {
		out.Quotas = &q
	}
	if !r.Empty() {
		out.Recovery = &r
	}
	return out
}

// bearer adds "Authorization: Bearer <token>" to every request (none
// when token is empty).
type bearer struct {
	token string
	next  http.RoundTripper // nil: http.DefaultTransport
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if b.next == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return b.next.RoundTrip(r)
}
