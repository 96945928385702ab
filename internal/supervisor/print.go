package supervisor

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
)

// printEndpoints lists every region's nodes and their endpoints.
func (r *run) printEndpoints(took time.Duration) {
	f := r.file
	fmt.Fprintf(r.out, "strata up: mesh %s is running (%d nodes started in %v)\n",
		f.Mesh, r.started, took.Round(10*time.Millisecond))
	for _, reg := range f.Regions {
		tier := reg.Tier.Kind
		if reg.Tier.Dir != "" {
			tier += " " + reg.Tier.Dir
		} else if reg.Tier.Bucket != "" {
			tier += " " + reg.Tier.Bucket
		}
		fmt.Fprintf(r.out, "\nregion %s  (tier: %s)\n", reg.Name, tier)
		if len(reg.NATS) > 0 {
			fmt.Fprintf(r.out, "  NATS: %s\n", strings.Join(reg.NATS, ","))
		}
		if len(reg.ClientURLs) > len(reg.NATS) {
			fmt.Fprintf(r.out, "  client failover URLs (in order, no randomization): %s\n", strings.Join(reg.ClientURLs, ","))
		}
		tw := tabwriter.NewWriter(r.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ROLE\tID\tPID\tNATS\tADMIN\tETCD\tGRPC\tSERF LAN\tSERF WAN")
		for _, n := range reg.Nodes {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Role, n.ID, n.PID, dash(n.NATS), n.Admin, dash(n.Etcd), dash(n.GRPC), dash(n.SerfLAN), dash(n.SerfWAN))
		}
		tw.Flush()
	}
	r.printSecurity()
	fmt.Fprintf(r.out, "\nEndpoints are in %s. `strata status --data-dir %s` shows live membership. Ctrl-C stops the mesh.\n",
		meshfile.Path(r.cfg.DataDir), r.cfg.DataDir)
	fmt.Fprintf(r.out, "Fault control (kill, freeze, restart nodes or regions; `strata drill`): %s\n", f.FaultSocket)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printSecurity says whether the mesh is open or secured, and with a
// secure mesh how to connect to it.
func (r *run) printSecurity() {
	m := r.cfg.Mesh
	auth := m.Auth != nil && m.Auth.Enabled
	if m.TLS == nil {
		fmt.Fprintln(r.out, "\nsecurity: OPEN: no TLS on any listener, plaintext gossip, etcd takes anonymous clients.")
		if !auth {
			fmt.Fprintln(r.out, "  No auth either: anyone who reaches these ports can read, publish and change everything.")
		} else if m.NATSAuth() != nil {
			fmt.Fprintln(r.out, "  NATS clients log in (auth.nats) and tenants are isolated on the NATS ports, but the internal ports (brokers' link, bookie gRPC, etcd) take anyone who reaches them.")
		}
		fmt.Fprintln(r.out, "  For local tests only; `strata up --secure` runs it with TLS and auth.")
		return
	}
	f := r.file
	fmt.Fprintf(r.out, "\nsecurity: TLS on every listener (NATS, admin HTTPS, gRPC and the brokers' link with client certificates, replication links, etcd); Serf gossip encrypted.\n")
	fmt.Fprintf(r.out, "  CA: %s   NATS client certificates: %s\n", m.TLS.CAFile, m.TLS.NATSClientCerts)
	if m.TLS.EtcdPasswordFile != "" {
		fmt.Fprintf(r.out, "  etcd: TLS with client certificates, login as root (password in %s)\n", m.TLS.EtcdPasswordFile)
	}
	if auth {
		nats := "encrypted; they need no credentials (no auth.nats)"
		if m.NATSAuth() != nil {
			nats = "log in with .creds files (auth.nats; the demo users' are listed below)"
		}
		fmt.Fprintln(r.out, "  admin API: auth on (the superuser token is above); NATS clients: "+nats)
	} else {
		fmt.Fprintln(r.out, "  admin API: auth OFF (anyone with the CA can call it)")
	}
	var natsURL string
	if len(f.Regions) > 0 && len(f.Regions[0].NATS) > 0 {
		natsURL = f.Regions[0].NATS[0]
	}
	cert := ""
	if f.TLS.CertFile != "" && m.TLS.NATSClientCerts != "none" {
		cert = fmt.Sprintf(" --tlscert %s --tlskey %s", f.TLS.CertFile, f.TLS.KeyFile)
	}
	creds, subject := "", "demo.hello"
	if m.NATSAuth() != nil {
		creds = " --creds " + filepath.Join(r.cfg.DataDir, SystemCredsFile)
		if len(m.Tenants) > 0 {
			t := m.Tenants[0].Name
			creds, subject = " --creds "+filepath.Join(r.cfg.DataDir, "creds", t+"-"+DemoUser+".creds"), t+".hello"
		}
	}
	fmt.Fprintf(r.out, "  connect:  nats -s %s --tlsca %s%s%s pub %s hi\n", natsURL, m.TLS.CAFile, cert, creds, subject)
	fmt.Fprintf(r.out, "            curl --cacert %s %s/healthz\n", m.TLS.CAFile, firstAdmin(f))
	fmt.Fprintln(r.out, "            strata pub|sub|status|admin|apply --data-dir … find the CA in mesh.json")
}

func firstAdmin(f *meshfile.File) string {
	for _, reg := range f.Regions {
		for _, n := range reg.Nodes {
			if n.Admin != "" {
				return n.Admin
			}
		}
	}
	return ""
}
