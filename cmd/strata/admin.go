package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/status"
	"github.com/stratamesh/strata/internal/supervisor"
)

// adminFlags are shared by every `strata admin` command.
type adminFlags struct {
	url, dataDir, region, token string
	json                        bool
	timeout                     time.Duration
	tls                         tlsFlags
}

// tokenEnv is where an admin token comes from when --token is not given.
const tokenEnv = "STRATA_ADMIN_TOKEN"

func (f *adminFlags) register(cmd *cobra.Command) {
	p := cmd.PersistentFlags()
	p.StringVar(&f.url, "url", "", "admin URL of a node to ask (default: nodes from <data-dir>/mesh.json)")
	p.StringVar(&f.dataDir, "data-dir", "", "data directory of a running 'strata up' (default ./strata-data)")
	p.StringVar(&f.region, "region", "", "only this region (default: every region)")
	p.BoolVar(&f.json, "json", false, "print the API's JSON unchanged")
	p.DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for an answer")
	f.tls.register(p)
	p.StringVar(&f.token, "token", "", "admin token sent as 'Authorization: Bearer' when the mesh has auth on (default $"+tokenEnv+", else the superuser token 'strata up' keeps in <data-dir>/"+supervisor.SuperuserTokenFile+")")
}

// client is the admin API client the flags describe: --timeout per
// request, --token (or $STRATA_ADMIN_TOKEN, or the superuser token of a
// local `strata up` with auth on) as the bearer token.
func (f *adminFlags) client() *admin.Client {
	token := f.token
	if token == "" {
		token = os.Getenv(tokenEnv)
	}
	if token == "" {
		dir := f.dataDir
		if dir == "" {
			dir = dataDirOr("", nil)
		}
		if b, err := os.ReadFile(filepath.Join(dir, supervisor.SuperuserTokenFile)); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	return &admin.Client{HTTP: &http.Client{Timeout: f.timeout, Transport: f.tls.httpTransport(f.dataDir)}, Token: token}
}

// defaultScheme is the scheme of a --url given without one: https:// when
// the flags or mesh.json name a CA, else http://.
func (f *adminFlags) defaultScheme() string {
	if c, err := f.tls.config(f.dataDir); err == nil && c != nil {
		return "https://"
	}
	return "http://"
}

// nodeTarget is the admin URL of node id of role (with --url, that URL):
// for the commands addressed to one node.
func (f *adminFlags) nodeTarget(role, id string) (admin.Target, error) {
	if f.url != "" {
		u := strings.TrimRight(f.url, "/")
		if !strings.Contains(u, "://") {
			u = f.defaultScheme() + u
		}
		return admin.Target{Region: f.region, URL: u}, nil
	}
	dir := dataDirOr(f.dataDir, nil)
	mf, err := meshfile.Read(dir)
	if err != nil {
		return admin.Target{}, err
	}
	if !supervisor.Running(dir) {
		return admin.Target{}, fmt.Errorf("%s is stale: no strata up is running with data dir %s (give --url to ask a node directly)", meshfile.Path(dir), dir)
	}
	return admin.NodeTarget(mf, f.region, role, id)
}

// targets lists, per region, the admin URLs to try.
func (f *adminFlags) targets() (map[string][]string, []string, error) {
	return f.roleTargets("")
}

// roleTargets is targets restricted to the nodes of one role (with --url,
// the node given).
func (f *adminFlags) roleTargets(role string) (map[string][]string, []string, error) {
	if f.url != "" {
		u := strings.TrimRight(f.url, "/")
		if !strings.Contains(u, "://") {
			u = f.defaultScheme() + u
		}
		return map[string][]string{f.region: {u}}, []string{f.region}, nil
	}
	dir := dataDirOr(f.dataDir, nil)
	mf, err := meshfile.Read(dir)
	if err != nil {
		return nil, nil, err
	}
	if !supervisor.Running(dir) {
		return nil, nil, fmt.Errorf("%s is stale: no strata up is running with data dir %s (give --url to ask a node directly)", meshfile.Path(dir), dir)
	}
	return admin.RoleTargets(mf, f.region, role)
}

// commandGroup makes c a command that only groups subcommands: run bare
// it prints its help; an unknown subcommand (a typo) is an error with a
// non-zero exit, not help with exit 0.
func commandGroup(c *cobra.Command) *cobra.Command {
	c.Args = cobra.NoArgs
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return c
}

func newAdmin() *cobra.Command {
	var flags adminFlags
	cmd := commandGroup(&cobra.Command{
		Use:   "admin",
		Short: "Inspect and manage a running mesh through its admin API",
	})
	flags.register(cmd)
	bookies := commandGroup(&cobra.Command{Use: "bookies", Aliases: []string{"bookie"}, Short: "Bookies of each region"})
	bookies.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List each region's registered bookies: id, instance, address, read-only, disk",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			urls, order, err := flags.targets()
			if err != nil {
				return err
			}
			client := flags.client()
			type answer struct {
				Region  string             `json:"region"`
				Bookies []admin.BookieView `json:"bookies"`
			}
			var all []answer
			var failed []string
			for _, r := range order {
				ctx, cancel := context.WithTimeout(cmd.Context(), flags.timeout*time.Duration(max(1, len(urls[r]))))
				var a answer
				err := client.GetFirst(ctx, urls[r], "/admin/v1/bookies", &a)
				cancel()
				if err != nil { // report it, go on with the other regions
					fmt.Fprintf(cmd.ErrOrStderr(), "strata: region %s: %v\n", r, err)
					failed = append(failed, r)
					continue
				}
				all = append(all, a)
			}
			defer func() {
				if len(failed) > 0 && err == nil {
					err = exitError{code: 1}
				}
			}()
			if flags.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(all)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REGION\tID\tINSTANCE\tADDRESS\tREAD-ONLY\tLEDGERS\tUSED\tFREE\tTOTAL")
			var silent []string
			for _, a := range all {
				for _, b := range a.Bookies {
					ledgers, used := strconv.Itoa(b.Ledgers), status.BytesText(b.UsedBytes)
					if b.InfoError != "" { // registered, but did not answer: its registration's figures
						ledgers, used = "?", "?"
						silent = append(silent, fmt.Sprintf("strata: region %s: bookie %s is registered but did not answer (%s); READ-ONLY and FREE are from its registration", a.Region, b.ID, b.InfoError))
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\t%s\n", a.Region, b.ID, b.Instance, b.Address, b.ReadOnly,
						ledgers, used, status.BytesText(b.FreeBytes), status.BytesText(b.TotalBytes))
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, line := range silent {
				fmt.Fprintln(cmd.ErrOrStderr(), line)
			}
			return nil
		},
	})
	bookies.AddCommand(newAdminBookieReadOnly(&flags))
	cmd.AddCommand(bookies, newAdminLedgers(&flags), newAdminTopics(&flags), newAdminBundles(&flags))
	cmd.AddCommand(newAdminTenants(&flags), newAdminNamespaces(&flags), newAdminTokens(&flags))
	cmd.AddCommand(newAdminRegions(&flags))
	return cmd
}

// perRegion GETs path from each region's nodes of role ("" for any node),
// the first that answers per region, and decodes the answers. A region
// that fails is reported on stderr and counted in failed; with skip404 a
// 404 answer counts as "not in this region" instead (neither answer nor
// failure).
func perRegion[T any](cmd *cobra.Command, flags *adminFlags, role, path string, skip404 bool) (all []T, failed int, err error) {
	urls, order, err := flags.roleTargets(role)
	if err != nil {
		return nil, 0, err
	}
	client := flags.client()
	for _, r := range order {
		var a T
		if err := getFirst(cmd.Context(), flags, client, urls[r], path, &a); err != nil {
			var apiErr *admin.APIError
			if skip404 && errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
				continue
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "strata: region %s: %v\n", r, err)
			failed++
			continue
		}
		all = append(all, a)
	}
	return all, failed, nil
}
