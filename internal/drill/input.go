package drill

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/stratamesh/strata/tenancy"
)

// ErrNATSFlag is returned by ParseRegionURLs for a malformed --nats value.
var ErrNATSFlag = errors.New("drill: bad --nats")

// ParseRegionURLs parses one --nats value, REGION=URL[,URL…] (for a mesh
// on real hosts, without mesh.json): a region name (tenancy's token rule:
// letters, digits, "-", "_") and NATS URLs nats://, tls:// (or bare
// host:port, taken as nats://host:port), each with a host and a port.
func ParseRegionURLs(s string) (string, []string, error) {
	region, list, ok := strings.Cut(s, "=")
	if !ok {
		return "", nil, fmt.Errorf("%w %q: want REGION=URL[,URL…]", ErrNATSFlag, s)
	}
	if !tenancy.ValidToken(region) {
		return "", nil, fmt.Errorf("%w %q: region %q: want letters, digits, - and _", ErrNATSFlag, s, region)
	}
	var urls []string
	for _, u := range strings.Split(list, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "nats" && p.Scheme != "tls") || p.Hostname() == "" || p.Port() == "" || (p.Path != "" && p.Path != "/") {
			return "", nil, fmt.Errorf("%w %q: URL %q: want nats://host:port or tls://host:port", ErrNATSFlag, s, u)
		}
		urls = append(urls, u)
	}
	return region, urls, nil
}

// Candidate is a namespace a drill could run in: its name, replication
// list, and whether its tenant has quotas (a drill's load should not eat
// a tenant's quota) and its topics can be created by a publish.
type Candidate struct {
	NS          tenancy.NSName
	Replication []string
	Quotas      bool
	AutoCreate  bool
}

// ErrNoNamespace is returned by ChooseNamespace when none fits.
var ErrNoNamespace = errors.New("drill: no namespace fits")

// ChooseNamespace picks the drill's namespace: the first (by
// tenant/namespace) that replicates to region and another region (to
// survivor, when not empty) and lets a publish create topics, preferring
// tenants without quotas.
func ChooseNamespace(cands []Candidate, region, survivor string) (Candidate, error) {
	var fit []Candidate
	for _, c := range cands {
		if c.AutoCreate && slices.Contains(c.Replication, region) && len(c.Replication) > 1 &&
			(survivor == "" || slices.Contains(c.Replication, survivor)) {
			fit = append(fit, c)
		}
	}
	if len(fit) == 0 {
		to := "another region"
		if survivor != "" {
			to = "--survivor " + survivor
		}
		return Candidate{}, fmt.Errorf("%w: none of %d namespaces replicates %s to %s and auto-creates topics; give --namespace", ErrNoNamespace, len(cands), region, to)
	}
	slices.SortFunc(fit, func(a, b Candidate) int {
		if a.Quotas != b.Quotas {
			if a.Quotas {
				return 1
			}
			return -1
		}
		return strings.Compare(a.NS.String(), b.NS.String())
	})
	return fit[0], nil
}
