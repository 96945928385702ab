package topology

import (
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

var nodeRoles = []string{RoleBroker, RoleBookie, RoleMeta}

func (r *report) checkRegion(p string, rg *Region) {
	r.requireToken(field(p, "name"), rg.Name)
	r.checkCount(p, "brokers", rg, RoleBroker)
	r.checkCount(p, "bookies", rg, RoleBookie)
	r.checkNodes(p, rg)
	r.checkRolesListed(p, rg)
	if rg.Ledger != nil {
		r.checkLedger(field(p, "ledger"), rg.Ledger)
	}
	if rg.Rollover != nil {
		r.checkRollover(field(p, "rollover"), rg.Rollover)
	}
	if o := rg.Ownership; o.LeaseTTL != 0 && time.Duration(o.LeaseTTL) < 2*time.Second {
		r.errorf(field(field(p, "ownership"), "lease_ttl"), "%s is too short: at least 2s (etcd's lease floor)", time.Duration(o.LeaseTTL))
	}
	r.atLeast(field(field(p, "ownership"), "load_threshold"), int64(rg.Ownership.LoadThreshold), 1)
	if d := time.Duration(rg.Replicator.StallAfter); d != 0 && d < time.Second {
		r.errorf(field(field(p, "replicator"), "stall_after"), "%s is too short: at least 1s", d)
	}
	if d := time.Duration(rg.Replicator.BackoffMax); d != 0 && d < 100*time.Millisecond {
		r.errorf(field(field(p, "replicator"), "backoff_max"), "%s is too short: at least 100ms", d)
	}
	if d := time.Duration(rg.Replicator.SyncInterval); d != 0 && d < 100*time.Millisecond {
		r.errorf(field(field(p, "replicator"), "sync_interval"), "%s is too short: at least 100ms", d)
	}
	if d := time.Duration(rg.Failover.SwitchBackDelay); d != 0 && d < 100*time.Millisecond {
		r.errorf(field(field(p, "failover"), "switch_back_delay"), "%s is too short: at least 100ms", d)
	}
	if d := time.Duration(rg.Failover.CaughtUpLag); d < 0 {
		r.errorf(field(field(p, "failover"), "caught_up_lag"), "%s is negative", d)
	}
	r.checkMetadata(field(p, "metadata"), &rg.Metadata)
	r.checkTier(field(p, "tier"), &rg.Tier)
	for i, s := range rg.WANJoin {
		if !isHostPort(s) {
			r.errorf(elem(field(p, "wan_join"), i), "want host:port, got %s", quoteShort(s))
		}
	}
}

// checkCount checks brokers or bookies: 1..maxCount, and not together
// with explicit nodes of the same role.
func (r *report) checkCount(p, key string, rg *Region, role string) {
	cp := field(p, key)
	if !r.ix.has(cp) {
		return
	}
	n := rg.Brokers
	if role == RoleBookie {
		n = rg.Bookies
	}
	if r.atLeast(cp, int64(n), 1) && n > maxCount {
		r.errorf(cp, "must be at most %d, got %d", maxCount, n)
	}
	if explicit := len(explicitNodes(rg, role)); explicit > 0 {
		r.errorf(cp, "a count and %s are both given; use one or the other",
			plural(explicit, "explicit "+role+" node", "explicit "+role+" nodes"))
	}
}

// checkRolesListed: a region that lists explicit nodes must list (or
// count) its brokers and bookies too, rather than silently getting
// generated ones on loopback.
func (r *report) checkRolesListed(p string, rg *Region) {
	if len(rg.Nodes) == 0 {
		return
	}
	for _, c := range []struct{ key, role string }{{"brokers", RoleBroker}, {"bookies", RoleBookie}} {
		if !r.ix.has(field(p, c.key)) && len(explicitNodes(rg, c.role)) == 0 {
			r.errorf(field(p, "nodes"), "lists explicit nodes but no %s node; add %s nodes or a %s count", c.role, c.role, c.key)
		}
	}
}

func explicitNodes(rg *Region, role string) []int {
	var idx []int
	for i := range rg.Nodes {
		if rg.Nodes[i].Role == role {
			idx = append(idx, i)
		}
	}
	return idx
}

func (r *report) checkNodes(p string, rg *Region) {
	np := field(p, "nodes")
	ids := make([]string, len(rg.Nodes))
	for i := range rg.Nodes {
		n, ep := &rg.Nodes[i], elem(np, i)
		ids[i] = n.ID
		r.requireToken(field(ep, "id"), n.ID)
		if n.Role == "" {
			r.missing(field(ep, "role"))
		} else {
			r.oneOf(field(ep, "role"), "role", n.Role, nodeRoles...)
		}
		if n.Host == "" {
			r.missing(field(ep, "host"))
		}
		if n.JournalDir != "" && n.Role != RoleBookie && n.Role != "" {
			r.errorf(field(ep, "journal_dir"), "a %s node has no journal; journal_dir is for bookie nodes", n.Role)
		}
		for _, pf := range nodePorts(n) {
			if pf.port < 0 || pf.port > 65535 {
				r.errorf(field(ep, pf.key), "%d is not a port (0..65535)", pf.port)
			} else if used, known := rolePorts[n.Role]; known && pf.port != 0 && !used[pf.key] {
				r.errorf(field(ep, pf.key), "a %s node has no %s (it serves %s)", n.Role, pf.key, strings.Join(sortedKeys(used), ", "))
			}
		}
	}
	r.unique(np, "id", "node id", ids)
	r.checkMetaNodes(p, rg)
}

// checkMetaNodes allows one explicit meta node, and none with external
// etcd: a meta node runs strata's embedded etcd.
func (r *report) checkMetaNodes(p string, rg *Region) {
	external := r.ix.has(field(p, "metadata.etcd"))
	for k, i := range explicitNodes(rg, RoleMeta) {
		ep := elem(field(p, "nodes"), i)
		switch {
		case external:
			r.errorf(ep, "a meta node runs embedded etcd, but metadata lists external etcd endpoints; remove one or the other")
		case k > 0:
			r.errorf(ep, "a second meta node: embedded metadata runs one etcd node; use `metadata: {etcd: [...]}` for a cluster")
		}
	}
}

type portField struct {
	key  string
	port int
}

// nodePorts lists a node's port fields in file-format order.
// rolePorts are the ports each role listens on.
var rolePorts = map[string]map[string]bool{
	RoleBroker: {"nats_port": true, "grpc_port": true, "admin_port": true, "serf_lan_port": true, "serf_wan_port": true},
	RoleBookie: {"grpc_port": true, "admin_port": true, "serf_lan_port": true},
	RoleMeta:   {"client_port": true, "peer_port": true, "admin_port": true, "serf_lan_port": true},
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func nodePorts(n *Node) []portField {
	return []portField{
		{"nats_port", n.NATSPort}, {"grpc_port", n.GRPCPort}, {"admin_port", n.AdminPort},
		{"serf_lan_port", n.SerfLANPort}, {"serf_wan_port", n.SerfWANPort},
		{"client_port", n.ClientPort}, {"peer_port", n.PeerPort},
	}
}

// checkPortClashes reports two explicit nodes (or two ports of one node)
// that use the same port on the same host, anywhere in the mesh. Port 0 is
// chosen at start and never clashes. Hosts are compared as written.
func (r *report) checkPortClashes(m *Mesh) {
	first := map[string]string{}
	for i := range m.Regions {
		for j := range m.Regions[i].Nodes {
			n := &m.Regions[i].Nodes[j]
			ep := elem(field(elem("regions", i), "nodes"), j)
			for _, pf := range nodePorts(n) {
				if n.Host == "" || pf.port <= 0 || pf.port > 65535 {
					continue
				}
				path := field(ep, pf.key)
				key := strings.ToLower(n.Host) + " " + strconv.Itoa(pf.port)
				if f, clash := first[key]; clash {
					r.errorf(path, "port %d on host %s is already used by %s (line %d)",
						pf.port, n.Host, f, r.ix.at(f).line)
					continue
				}
				first[key] = path
			}
		}
	}
}

// checkJournalDirClashes: two bookies on one host, in any regions, cannot
// share a journal_dir: each journal is tied to its own data directory (an
// owner id), and the second bookie would refuse to start.
func (r *report) checkJournalDirClashes(m *Mesh) {
	first := map[string]string{}
	for i := range m.Regions {
		for j := range m.Regions[i].Nodes {
			n := &m.Regions[i].Nodes[j]
			if n.Host == "" || n.JournalDir == "" {
				continue
			}
			p := field(elem(field(elem("regions", i), "nodes"), j), "journal_dir")
			key := strings.ToLower(n.Host) + " " + path.Clean(n.JournalDir)
			if f, clash := first[key]; clash {
				r.errorf(p, "journal_dir %s on host %s is also %s (line %d): two bookies cannot share a journal", n.JournalDir, n.Host, f, r.ix.at(f).line)
				continue
			}
			first[key] = p
		}
	}
}

func (r *report) checkMetadata(p string, md *Metadata) {
	ep := field(p, "etcd")
	if r.ix.has(ep) && len(md.Etcd) == 0 {
		r.errorf(ep, "must list at least one endpoint (or write `metadata: embedded`)")
	}
	for i, u := range md.Etcd {
		if !isHTTPURL(u) {
			r.errorf(elem(ep, i), "want an http:// or https:// URL, got %s", quoteShort(u))
		}
	}
	if pp := field(p, "prefix"); r.ix.has(pp) && !strings.HasPrefix(md.Prefix, "/") {
		r.errorf(pp, `must start with "/", got %s`, quoteShort(md.Prefix))
	}
}

// tierFields are the tier fields each kind takes (besides kind).
var tierFields = map[string][]string{
	TierFS:  {"dir", "prefix"},
	TierS3:  {"bucket", "prefix", "region", "endpoint", "path_style"},
	TierGCS: {"bucket", "prefix", "endpoint"},
}

func (r *report) checkTier(p string, t *Tier) {
	r.oneOf(field(p, "kind"), "tier kind", t.Kind, TierFS, TierS3, TierGCS)
	kind := t.Kind
	if !r.ix.has(field(p, "kind")) {
		kind = TierFS // the default
		for _, f := range []string{"bucket", "region", "endpoint", "path_style"} {
			if r.ix.has(field(p, f)) {
				r.errorf(field(p, f), "needs a tier kind (s3 or gcs): without one the tier is fs and %s would be ignored", f)
				return
			}
		}
	}
	if allowed, ok := tierFields[kind]; ok {
		for _, f := range []string{"bucket", "region", "endpoint", "path_style", "dir"} {
			if r.ix.has(field(p, f)) && !slices.Contains(allowed, f) {
				r.errorf(field(p, f), "does not apply to tier kind %s (it takes %s)", kind, strings.Join(allowed, ", "))
			}
		}
	}
	if bp := field(p, "bucket"); t.Bucket != "" && !validBucket(t.Bucket) {
		r.errorf(bp, "bucket name %s: want 3-63 lowercase letters, digits, '.', '-' or '_'", quoteShort(t.Bucket))
	}
	if pp := field(p, "prefix"); strings.Contains("/"+t.Prefix+"/", "/../") || strings.Contains("/"+t.Prefix+"/", "/./") {
		r.errorf(pp, "must not contain . or .. segments, got %s", quoteShort(t.Prefix))
	}
	if (t.Kind == TierS3 || t.Kind == TierGCS) && t.Bucket == "" {
		if bp := field(p, "bucket"); r.ix.has(bp) || r.ix.keys[bp] != (pos{}) {
			r.missing(bp)
		} else {
			r.errorf(bp, "required for kind %s", t.Kind)
		}
	}
	if ep := field(p, "endpoint"); r.ix.has(ep) && !isHTTPURL(t.Endpoint) {
		r.errorf(ep, "want an http:// or https:// URL, got %s", quoteShort(t.Endpoint))
	}
}

// validBucket is an S3/GCS bucket name: 3-63 of [a-z0-9._-], starting
// and ending with a letter or digit.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i, c := range b {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || i == len(b)-1 || c != '.' && c != '-' && c != '_') {
			return false
		}
	}
	return true
}
