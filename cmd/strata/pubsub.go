package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/supervisor"
)

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// natsFlags find a region's brokers: --server, else mesh.json.
type natsFlags struct {
	server, dataDir, region, creds string
	tls                            tlsFlags
}

func (f *natsFlags) add(cmd *cobra.Command) {
	p := cmd.Flags()
	p.StringVarP(&f.server, "server", "s", "", "NATS URL(s) of brokers, comma-separated (default: the region's brokers from <data-dir>/mesh.json)")
	p.StringVar(&f.dataDir, "data-dir", "", "data directory of a running 'strata up' (default ./strata-data)")
	p.StringVar(&f.region, "region", "", "region whose brokers to use (default: the first region in mesh.json)")
	p.StringVar(&f.creds, "creds", "", "NATS user credentials (.creds) to log in with (default, when `strata up` made them for auth.nats: <data-dir>/creds/TENANT-demo.creds for a subject of TENANT, else <data-dir>/"+supervisor.SystemCredsFile+", the mesh's system account)")
	f.tls.register(p)
}

// connect dials the brokers. Without --creds it logs in, when `strata up`
// made them (auth.nats), as the demo user of the subject's tenant (its
// first token: tenants' subjects live in their own account) or else as
// the mesh's system account.
func (f *natsFlags) connect(name, subject string) (*nats.Conn, error) {
	url := f.server
	if url == "" {
		mf, err := meshfile.Read(dataDirOr(f.dataDir, nil))
		if err != nil {
			return nil, fmt.Errorf("%w (or give -s/--server URL)", err)
		}
		urls, err := mf.NATSURLs(f.region)
		if err != nil {
			return nil, err
		}
		url = strings.Join(urls, ",")
	}
	opts := []nats.Option{nats.Name(name), nats.Timeout(5 * time.Second)}
	tc, err := f.tls.config(f.dataDir)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, nats.Secure(tc))
	}
	creds := f.creds
	if creds == "" {
		dir := dataDirOr(f.dataDir, nil)
		tenant, _, _ := strings.Cut(subject, ".")
		if p := filepath.Join(dir, "creds", tenant+"-"+supervisor.DemoUser+".creds"); tenant != "" && fileExists(p) {
			creds = p
		} else if p := filepath.Join(dir, supervisor.SystemCredsFile); fileExists(p) {
			creds = p
		}
	}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	return nc, nil
}

func newPub() *cobra.Command {
	var nf natsFlags
	var headers []string
	var count int
	var reply string
	cmd := &cobra.Command{
		Use:   "pub SUBJECT [MESSAGE]",
		Short: "Publish a message (NATS core) to a region's brokers; MESSAGE defaults to stdin",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body []byte
			if len(args) == 2 {
				body = []byte(args[1])
			} else {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				body = b
			}
			m := nats.NewMsg(args[0])
			m.Data, m.Reply = body, reply
			for _, h := range headers {
				k, v, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(k) == "" {
					return fmt.Errorf("--header %q: want KEY:VALUE", h)
				}
				if m.Header == nil {
					m.Header = nats.Header{}
				}
				m.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
			nc, err := nf.connect("strata pub", args[0])
			if err != nil {
				return err
			}
			defer nc.Close()
			for i := 0; i < count; i++ {
				if err := nc.PublishMsg(m); err != nil {
					return err
				}
			}
			if err := nc.FlushTimeout(10 * time.Second); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "published %d message(s) to %q\n", count, args[0])
			return nil
		},
	}
	nf.add(cmd)
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "header KEY:VALUE (repeatable)")
	cmd.Flags().IntVar(&count, "count", 1, "publish the message this many times")
	cmd.Flags().StringVar(&reply, "reply", "", "reply subject")
	return cmd
}

func newSub() *cobra.Command {
	var nf natsFlags
	var queue string
	var count int
	var raw bool
	cmd := &cobra.Command{
		Use:   "sub SUBJECT",
		Short: "Subscribe (NATS core) on a region's brokers and print messages until Ctrl-C or --count",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nc, err := nf.connect("strata sub", args[0])
			if err != nil {
				return err
			}
			defer nc.Close()
			ch := make(chan *nats.Msg, 1024)
			var sub *nats.Subscription
			if queue != "" {
				sub, err = nc.ChanQueueSubscribe(args[0], queue, ch)
			} else {
				sub, err = nc.ChanSubscribe(args[0], ch)
			}
			if err != nil {
				return err
			}
			defer sub.Unsubscribe()
			if err := nc.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "subscribed to %q on %s\n", args[0], nc.ConnectedUrl())
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sig)
			out := cmd.OutOrStdout()
			for n := 1; count == 0 || n <= count; n++ {
				select {
				case <-sig:
					return nil
				case m := <-ch:
					if raw {
						fmt.Fprintf(out, "%s\n", m.Data)
						continue
					}
					fmt.Fprintf(out, "[#%d] %s", n, m.Subject)
					if m.Reply != "" {
						fmt.Fprintf(out, " (reply %s)", m.Reply)
					}
					fmt.Fprintln(out)
					for k, vs := range m.Header {
						for _, v := range vs {
							fmt.Fprintf(out, "%s: %s\n", k, v)
						}
					}
					fmt.Fprintf(out, "%s\n\n", m.Data)
				}
			}
			return nil
		},
	}
	nf.add(cmd)
	cmd.Flags().StringVarP(&queue, "queue", "q", "", "queue group")
	cmd.Flags().IntVar(&count, "count", 0, "exit after this many messages (0: until Ctrl-C)")
	cmd.Flags().BoolVar(&raw, "raw", false, "print only payloads, one per line")
	return cmd
}
