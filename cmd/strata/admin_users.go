package main

import (
	"context"
	"fmt"
	"github.com/stratamesh/strata/internal/meshfile"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy"
)

// newAdminUsers is `strata admin tenants users add|list|revoke`: a
// tenant's NATS users (admin API /admin/v1/tenants/{t}/users), for a mesh
// whose topology has auth.nats.
func newAdminUsers(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "users", Aliases: []string{"user"}, Short: "A tenant's NATS users: their .creds files, permissions and revocation"})
	var pub, sub, denyPub, denySub []string
	var expiry, out string
	add := &cobra.Command{
		Use:   "add TENANT USER",
		Short: "Make a NATS user of TENANT and write its .creds file",
		Long: `add makes a NATS user of TENANT: a new user nkey with a user JWT signed by
the tenant's account, allowed to publish the --pub subjects and subscribe to
the --sub subjects (none given: any subject of the tenant), never the
--deny-pub/--deny-sub ones. A user that makes requests needs _INBOX.> in its
--sub list when it has one.

It writes the standard .creds file (mode 0600; default ./TENANT-USER.creds),
which holds the user's private key: the mesh does not keep it and cannot
show it again. Clients use it as they would with nats-server:
  nats --creds FILE -s URL pub SUBJECT MSG
  nats.Connect(url, nats.UserCredentials("FILE"))`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkUserArgs(args); err != nil {
				return err
			}
			d, err := tenancy.ParseDuration(expiry)
			if err != nil {
				return fmt.Errorf("--expiry: %w", err)
			}
			req := admin.UserRequest{Name: args[1], Expiry: d,
				Pub: admin.Permission{Allow: pub, Deny: denyPub}, Sub: admin.Permission{Allow: sub, Deny: denySub}}
			file := out
			if file == "" {
				file = args[0] + "-" + args[1] + ".creds"
			}
			// Refuse before the user is made: its secret exists only in the
			// answer.
			if _, err := os.Stat(file); err == nil {
				return fmt.Errorf("%s exists: give another -o FILE (or remove it)", file)
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			var u admin.UserCreated
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) (err error) {
				u, err = c.client.AddUser(ctx, base, args[0], req)
				return err
			}); err != nil {
				return err
			}
			if err := writeCreds(file, u.Creds); err != nil {
				return fmt.Errorf("user %s of %s was made but its .creds could not be written (revoke it and add it again): %w", u.Name, u.Tenant, err)
			}
			if flags.json {
				u.Creds = "" // in the file only
				return printJSON(cmd, map[string]any{"user": u.UserInfo, "creds_file": file})
			}
			o := cmd.OutOrStdout()
			fmt.Fprintf(o, "made user %s of tenant %s (public key %s), expires %s\n", u.Name, u.Tenant, u.PublicKey, expiresText(u.Expires))
			fmt.Fprintf(o, "wrote %s (mode 0600; it holds the user's private key, which the mesh does not keep)\n", file)
			tlsFlag, server := "", "<broker URL>"
			if mf, err := meshfile.Read(dataDirOr(flags.dataDir, nil)); err == nil {
				if mf.TLS != nil && mf.TLS.CAFile != "" {
					tlsFlag = " --tlsca " + mf.TLS.CAFile
				}
				if urls, err := mf.NATSURLs(flags.region); err == nil && len(urls) > 0 {
					server = strings.Join(urls, ",")
				}
			} else if flags.tls.ca != "" {
				tlsFlag = " --tlsca " + flags.tls.ca
			}
			subject := u.Tenant + ".<namespace>.<topic>"
			if len(u.Pub.Allow) > 0 {
				subject = u.Pub.Allow[0] // one it may publish to (wildcards are the user's to fill)
			}
			fmt.Fprintf(o, "use it:  nats --creds %s%s -s %s pub %s hello\n", file, tlsFlag, server, subject)
			fmt.Fprintf(o, "         nats.Connect(url, nats.UserCredentials(%q))\n", file)
			return nil
		},
	}
	add.Flags().StringArrayVar(&pub, "pub", nil, "subject the user may publish to (repeatable; wildcards * and >; none: any of the tenant's)")
	add.Flags().StringArrayVar(&sub, "sub", nil, "subject the user may subscribe to (repeatable; none: any of the tenant's)")
	add.Flags().StringArrayVar(&denyPub, "deny-pub", nil, "subject the user may not publish to (repeatable)")
	add.Flags().StringArrayVar(&denySub, "deny-sub", nil, "subject the user may not subscribe to (repeatable)")
	add.Flags().StringVar(&expiry, "expiry", "720h", "how long the credentials are valid (e.g. 720h, 30d; 0s: no expiry)")
	add.Flags().StringVarP(&out, "output", "o", "", "the .creds file to write (default ./TENANT-USER.creds)")
	cmd.AddCommand(add)
	cmd.AddCommand(&cobra.Command{
		Use:   "list TENANT",
		Short: "List TENANT's NATS users and what they may do (never a secret)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenantArg(args[0]); err != nil {
				return err
			}
			us, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) ([]admin.UserInfo, error) {
				return c.Users(ctx, base, args[0])
			})
			if err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, admin.UserList{Tenant: args[0], Users: nonNilSlice(us)})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tPUBLIC KEY\tPUB\tSUB\tEXPIRES\tCREATED")
			for _, u := range us {
				name := u.Name
				if u.Stale {
					name += " (stale: add it again)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, u.PublicKey, permText(u.Pub), permText(u.Sub),
					expiresText(u.Expires), u.Created.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "revoke TENANT USER",
		Short: "Revoke a NATS user mesh-wide: its live connections are closed and its credentials refused",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkUserArgs(args); err != nil {
				return err
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) error {
				return c.client.RevokeUser(ctx, base, args[0], args[1])
			}); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, map[string]string{"tenant": args[0], "revoked": args[1]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked user %s of tenant %s in every region\n", args[1], args[0])
			return nil
		},
	})
	return cmd
}

// writeCreds writes a .creds file readable by its owner only, never over
// an existing file.
func writeCreds(path, text string) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func permText(p admin.Permission) string {
	s := listText(p.Allow, "any")
	if len(p.Deny) > 0 {
		s += " but " + strings.Join(p.Deny, ",")
	}
	return s
}

func expiresText(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Local().Format(time.DateTime)
}

// checkUserArgs checks TENANT USER arguments.
func checkUserArgs(args []string) error {
	if err := checkTenantArg(args[0]); err != nil {
		return err
	}
	if !validName(args[1]) {
		return fmt.Errorf("user name %q: use letters, digits, '-' and '_'", args[1])
	}
	return nil
}
