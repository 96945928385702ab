package supervisor

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
)

// printEndpoints lists every region's nodes and their endpoints.
func (r *run) printEndpoints(took time.Duration) {
	f := r.file
	fmt.Fprintf(r.out, "strata up: mesh %s is running (%d nodes started in %v)\n",
		f.Mesh, len(r.procs), took.Round(10*time.Millisecond))
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
		tw := tabwriter.NewWriter(r.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ROLE\tID\tPID\tNATS\tADMIN\tETCD\tGRPC\tSERF LAN\tSERF WAN")
		for _, n := range reg.Nodes {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Role, n.ID, n.PID, dash(n.NATS), n.Admin, dash(n.Etcd), dash(n.GRPC), dash(n.SerfLAN), dash(n.SerfWAN))
		}
		tw.Flush()
	}
	fmt.Fprintf(r.out, "\nEndpoints are in %s. `strata status --data-dir %s` shows live membership. Ctrl-C stops the mesh.\n",
		meshfile.Path(r.cfg.DataDir), r.cfg.DataDir)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
