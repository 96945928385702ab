// Package harness starts, stops and faults the nodes of a mesh for
// `strata up`, the drill, the benchmarks and e2e tests.
package harness

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
)

// NetPrefix starts the name of every network namespace and veth link
// that Net makes.
const NetPrefix = "stn"

// Errors of Net, wrapped with details; test them with errors.Is.
var (
	// ErrNetPrivilege: the process may not make network namespaces
	// (not root, no CAP_NET_ADMIN) or `ip` is not installed.
	ErrNetPrivilege = errors.New("harness: network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2's ip")
	// ErrNetInvalid: a bad name, region list or region pair.
	ErrNetInvalid = errors.New("harness: invalid network request")
)

// Net is a set of region namespaces linked pairwise by veth pairs, for
// partial connectivity. Its methods are safe for concurrent use.
//
// To cut the link between two regions only (B–C down while A–B and A–C
// stay up), Net puts every region in its own Linux network namespace
// and links the namespaces pairwise with veth pairs, plus one veth pair
// from the caller's namespace to each region (so tests and clients reach
// every region). Each region has one address, a /32 on its namespace's
// loopback device, taken from 10.213.K.0/24 (K is the first block whose
// .1 is not already an address here; nothing else on the machine uses
// 10.213/16). Each namespace has one host route per other region (and
// one to the caller, 10.213.K.1), through the veth that leads straight
// there, and IP forwarding off, so no traffic between two regions can
// take another path. Cut sets the pair's veth down (the kernel drops its
// routes: connects fail at once with "network unreachable"); Heal sets it
// up and puts the routes back. Every protocol between the two regions
// (Serf, gRPC, NATS, etcd) is cut alike, since they all use the region's
// address.
//
// Namespaces and veth links were chosen over a proxy on the WAN links
// because a proxy only cuts what is configured to go through it (a
// broker's Serf WAN gossip, a replication link, an etcd client would
// each need one), while a namespace cuts every socket. It needs root (or
// CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip`; without them
// NewNet fails with an error naming what is missing.
//
// Every name Net makes carries the prefix NetPrefix and a short hash of
// the Net's name, so CleanupNets removes the leftovers of a crashed run.
type Net struct {
	name    string
	tag     string // NetPrefix + 4 hex digits of name's hash
	regions []string
	self    netip.Addr            // the caller's address on every region link
	addrs   map[string]netip.Addr // region → its address

	mu     sync.Mutex
	cut    map[[2]int]bool
	closed bool
}

// NewNet makes one network namespace per region (regions: distinct,
// non-empty, at most 200), each with its own address, pairwise veth
// links between them and one from the caller's namespace to each. name
// (letters, digits, '-', '_') names the Net; a Net of the same name left
// by a crashed run is removed first. Errors: ErrNetInvalid,
// ErrNetPrivilege, and the failing `ip` command with its output (what it
// made so far is removed).
func NewNet(name string, regions []string) (*Net, error) {
	if err := checkNetArgs(name, regions); err != nil {
		return nil, err
	}
	if err := checkPrivilege(); err != nil {
		return nil, err
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	n := &Net{name: name, tag: fmt.Sprintf("%s%04x", NetPrefix, h.Sum32()&0xffff), regions: slices.Clone(regions),
		addrs: map[string]netip.Addr{}, cut: map[[2]int]bool{}}
	if err := CleanupNets(n.tag); err != nil {
		return nil, err
	}
	block, err := freeBlock()
	if err != nil {
		return nil, err
	}
	n.self = netip.AddrFrom4([4]byte{10, 213, block, 1})
	for i, r := range regions {
		n.addrs[r] = netip.AddrFrom4([4]byte{10, 213, block, byte(10 + i)})
	}
	if err := n.build(); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

func checkNetArgs(name string, regions []string) error {
	var errs []error
	if name == "" || strings.TrimFunc(name, func(r rune) bool {
		return r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}) != "" {
		errs = append(errs, fmt.Errorf("%w: net name %q (want letters, digits, '-', '_')", ErrNetInvalid, name))
	}
	if len(regions) == 0 || len(regions) > 200 {
		errs = append(errs, fmt.Errorf("%w: %d regions (want 1..200)", ErrNetInvalid, len(regions)))
	}
	seen := map[string]bool{}
	for _, r := range regions {
		switch {
		case r == "":
			errs = append(errs, fmt.Errorf("%w: an empty region name", ErrNetInvalid))
		case seen[r]:
			errs = append(errs, fmt.Errorf("%w: region %q twice", ErrNetInvalid, r))
		}
		seen[r] = true
	}
	return errors.Join(errs...)
}

// checkPrivilege fails with ErrNetPrivilege unless `ip` exists and the
// process has CAP_NET_ADMIN and CAP_SYS_ADMIN (bits 12 and 21 of its
// effective capabilities).
func checkPrivilege() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: `ip` not found: %v", ErrNetPrivilege, err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("%w: reading capabilities: %v", ErrNetPrivilege, err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if hexCaps, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var caps uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(hexCaps), "%x", &caps); err != nil {
				return fmt.Errorf("%w: CapEff %q: %v", ErrNetPrivilege, hexCaps, err)
			}
			var missing []string
			if caps&(1<<12) == 0 {
				missing = append(missing, "CAP_NET_ADMIN")
			}
			if caps&(1<<21) == 0 {
				missing = append(missing, "CAP_SYS_ADMIN")
			}
			if len(missing) > 0 {
				return fmt.Errorf("%w: running as uid %d without %s", ErrNetPrivilege, os.Geteuid(), strings.Join(missing, " and "))
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no CapEff in /proc/self/status", ErrNetPrivilege)
}

// freeBlock is the first K in 1..254 such that 10.213.K.1 is not an
// address of this namespace.
func freeBlock() (byte, error) {
	out, err := ip("-o", "-4", "addr", "show")
	if err != nil {
		return 0, err
	}
	for k := 1; k < 255; k++ {
		if !strings.Contains(out, fmt.Sprintf(" 10.213.%d.1/", k)) {
			return byte(k), nil
		}
	}
	return 0, fmt.Errorf("harness: every block of 10.213.0.0/16 is in use")
}

// Netns is the network namespace of region ("" for an unknown region):
// run a node there with `ip netns exec NS`.
func (n *Net) Netns(region string) string {
	i := slices.Index(n.regions, region)
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("%s-%d", n.tag, i)
}

// Addr is region's address ("" for an unknown region): the host of its
// nodes in the topology.
func (n *Net) Addr(region string) string {
	a, ok := n.addrs[region]
	if !ok {
		return ""
	}
	return a.String()
}

// HostAddr is the caller's address as the regions see it.
func (n *Net) HostAddr() string { return n.self.String() }

// veth is the name of the end in region i's namespace of the link to
// region j (j == -1: to the caller; that end in the caller's namespace
// is veth(-1, i)). At most 15 bytes.
func (n *Net) veth(i, j int) string {
	end := func(k int) string {
		if k < 0 {
			return "h"
		}
		return fmt.Sprint(k)
	}
	return n.tag + "-" + end(i) + "-" + end(j)
}

func (n *Net) build() error {
	for i, r := range n.regions {
		ns := n.Netns(r)
		if _, err := ip("netns", "add", ns); err != nil {
			return err
		}
		if err := nsRun(ns, "ip", "link", "set", "lo", "up"); err != nil {
			return err
		}
		if err := nsRun(ns, "ip", "addr", "add", n.addrs[r].String()+"/32", "dev", "lo"); err != nil {
			return err
		}
		if err := nsRun(ns, "sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_forward"); err != nil {
			return err
		}
		// The caller's link.
		host, inner := n.veth(-1, i), n.veth(i, -1)
		if _, err := ip("link", "add", host, "type", "veth", "peer", "name", inner, "netns", ns); err != nil {
			return err
		}
		if _, err := ip("addr", "add", n.self.String()+"/32", "dev", host); err != nil {
			return err
		}
		if _, err := ip("link", "set", host, "up"); err != nil {
			return err
		}
		if _, err := ip("route", "replace", n.addrs[r].String()+"/32", "dev", host, "src", n.self.String()); err != nil {
			return err
		}
		if err := nsRun(ns, "ip", "link", "set", inner, "up"); err != nil {
			return err
		}
		if err := nsRun(ns, "ip", "route", "replace", n.self.String()+"/32", "dev", inner, "src", n.addrs[r].String()); err != nil {
			return err
		}
	}
	for i := range n.regions {
		for j := i + 1; j < len(n.regions); j++ {
			a, b := n.veth(i, j), n.veth(j, i)
			if _, err := ip("link", "add", a, "netns", n.Netns(n.regions[i]), "type", "veth", "peer", "name", b, "netns", n.Netns(n.regions[j])); err != nil {
				return err
			}
			if err := n.up(i, j); err != nil {
				return err
			}
		}
	}
	return nil
}

// up sets the link between regions i and j up and routes each region's
// address to the other through it.
func (n *Net) up(i, j int) error {
	for _, p := range [][2]int{{i, j}, {j, i}} {
		ns, dev := n.Netns(n.regions[p[0]]), n.veth(p[0], p[1])
		if err := nsRun(ns, "ip", "link", "set", dev, "up"); err != nil {
			return err
		}
		if err := nsRun(ns, "ip", "route", "replace", n.addrs[n.regions[p[1]]].String()+"/32", "dev", dev, "src", n.addrs[n.regions[p[0]]].String()); err != nil {
			return err
		}
	}
	return nil
}

// pair returns the indexes of regions a and b, smaller first.
func (n *Net) pair(a, b string) ([2]int, error) {
	i, j := slices.Index(n.regions, a), slices.Index(n.regions, b)
	switch {
	case i < 0 || j < 0:
		return [2]int{}, fmt.Errorf("%w: link %s–%s: unknown region (have %s)", ErrNetInvalid, a, b, strings.Join(n.regions, ", "))
	case i == j:
		return [2]int{}, fmt.Errorf("%w: link %s–%s: a region has no link to itself", ErrNetInvalid, a, b)
	}
	return [2]int{min(i, j), max(i, j)}, nil
}

// Cut takes the link between regions a and b down, in both directions
// (every protocol), leaving every other link up. Cutting a cut link is a
// no-op. Errors: ErrNetInvalid (unknown region, a == b, a closed Net),
// the failing `ip` command.
func (n *Net) Cut(a, b string) error {
	p, err := n.pair(a, b)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: net %s is closed", ErrNetInvalid, n.name)
	}
	for _, e := range [][2]int{{p[0], p[1]}, {p[1], p[0]}} {
		if err := nsRun(n.Netns(n.regions[e[0]]), "ip", "link", "set", n.veth(e[0], e[1]), "down"); err != nil {
			return err
		}
	}
	n.cut[p] = true
	return nil
}

// Heal brings the link between regions a and b back up. Healing a link
// that is up is a no-op. Errors as Cut's.
func (n *Net) Heal(a, b string) error {
	p, err := n.pair(a, b)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("%w: net %s is closed", ErrNetInvalid, n.name)
	}
	if err := n.up(p[0], p[1]); err != nil {
		return err
	}
	delete(n.cut, p)
	return nil
}

// Close removes the namespaces and links the Net made (a region's links
// go with its namespace). It is idempotent.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return CleanupNets(n.tag)
}

// CleanupNets removes every network namespace and every veth link of
// this namespace whose name starts with prefix (which must start with
// NetPrefix): NetPrefix itself removes every Net's leftovers.
func CleanupNets(prefix string) error {
	if !strings.HasPrefix(prefix, NetPrefix) {
		return fmt.Errorf("%w: cleanup prefix %q does not start with %q", ErrNetInvalid, prefix, NetPrefix)
	}
	var errs []error
	out, err := ip("netns", "list")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			if _, err := ip("netns", "delete", f[0]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	out, err = ip("-o", "link", "show")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, prefix) {
			if _, err := ip("link", "delete", name); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ip runs `ip args...` and returns its output; an error names the
// command and quotes its output.
func ip(args ...string) (string, error) {
	cmd := exec.Command("ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("harness: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// nsRun runs a command in namespace ns.
func nsRun(ns string, args ...string) error {
	_, err := ip(append([]string{"netns", "exec", ns}, args...)...)
	return err
}
