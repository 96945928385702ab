package tenancy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// simRegion is one region's copy of the configuration in the merge
// simulation: its State, its HLC and its wall clock's skew.
type simRegion struct {
	name  string
	state *State
	clock *Clock
	skew  int64 // ms added to the mesh's wall time
}

// sim drives the merge core the way the etcd and WAN drivers do: a write
// stamps with the region's clock after observing the stored record; a
// sync ships a region's whole State to each region it can reach, which
// merges every record and observes its stamp.
type sim struct {
	regions []*simRegion
	wall    int64
	cut     map[[2]string]bool
}

func (s *sim) region(t *testing.T, name string) *simRegion {
	for _, r := range s.regions {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no region %q", name)
	return nil
}

func (s *sim) linked(a, b string) bool { return !s.cut[[2]string{a, b}] && !s.cut[[2]string{b, a}] }

func (r *simRegion) stamp(s *sim, kind Kind, key string) HLC {
	if old, ok := r.state.Get(kind, key); ok {
		r.clock.Observe(old.Stamp)
	}
	return r.clock.Now(s.wall + r.skew)
}

func (r *simRegion) write(t *testing.T, rec Record) string {
	if err := rec.Check(); err != nil {
		t.Fatalf("a write made a bad record: %v", err)
	}
	r.state.Merge(rec)
	return rec.Stamp.String()
}

// exchange ships from's state to to: the WAN driver's anti-entropy push.
func exchange(from, to *simRegion) int {
	n := 0
	for _, rec := range from.state.Records() {
		to.clock.Observe(rec.Stamp)
		if to.state.Merge(rec) {
			n++
		}
	}
	return n
}

func (r *simRegion) show() string {
	var b strings.Builder
	for _, t := range r.state.Tenants() {
		rec, _ := r.state.Get(KindTenant, t.Name)
		fmt.Fprintf(&b, "tenant %s admins=%v topics=%d%s @%s\n", t.Name, t.Admins, t.Quotas.Topics, rateText(t.Quotas), rec.Stamp)
	}
	for _, ns := range r.state.Namespaces("") {
		rec, _ := r.state.Get(KindNamespace, ns.NS().String())
		p := ns.Policies
		fmt.Fprintf(&b, "namespace %s replication=%v retention.time=%s bundles=%d @%s\n",
			ns.NS(), p.Replication, p.Retention.Time, p.Bundles, rec.Stamp)
	}
	hidden := 0
	for _, rec := range r.state.Records() {
		if rec.Deleted {
			hidden++
		}
	}
	fmt.Fprintf(&b, "tombstones %d\n", hidden)
	return b.String()
}

// rateText is " rate=N caps=R:N,…" of q's publish rate and its
// per-region caps, "" when it has neither.
func rateText(q Quotas) string {
	if q.PublishRate == 0 && len(q.Regions) == 0 {
		return ""
	}
	var caps []string
	for r, c := range q.Regions {
		caps = append(caps, fmt.Sprintf("%s:%d", r, c.PublishRate))
	}
	slices.Sort(caps)
	return fmt.Sprintf(" rate=%d caps=[%s]", q.PublishRate, strings.Join(caps, ","))
}

func TestMergeScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/merge", func(t *testing.T, path string) {
		s := &sim{wall: 1_000_000, cut: map[[2]string]bool{}}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var args []string
			for _, a := range d.CmdArgs {
				if len(a.Vals) == 0 {
					args = append(args, a.Key)
				} else {
					args = append(args, a.Key+"="+strings.Join(a.Vals, ","))
				}
			}
			switch d.Cmd {
			case "regions":
				for _, a := range d.CmdArgs {
					s.regions = append(s.regions, &simRegion{name: a.Key, state: NewState(), clock: NewClock(a.Key)})
				}
				return ""
			case "tick":
				var ms int64
				d.ScanArgs(t, "ms", &ms)
				s.wall += ms
				return ""
			case "skew":
				for _, a := range d.CmdArgs {
					v, err := strconv.ParseInt(a.Vals[0], 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					s.region(t, a.Key).skew = v
				}
				return ""
			case "cut", "mend":
				var a, b string
				d.ScanArgs(t, "a", &a)
				d.ScanArgs(t, "b", &b)
				s.cut[[2]string{a, b}] = d.Cmd == "cut"
				return ""
			case "partition":
				var name string
				d.ScanArgs(t, "region", &name)
				for _, r := range s.regions {
					if r.name != name {
						s.cut[[2]string{name, r.name}] = true
					}
				}
				return ""
			case "heal":
				s.cut = map[[2]string]bool{}
				return ""
			case "sync":
				// Rounds of pushes between linked regions until nothing
				// changes (bounded: the state is finite).
				total := 0
				for round := 0; round < 10; round++ {
					n := 0
					for _, from := range s.regions {
						for _, to := range s.regions {
							if from != to && s.linked(from.name, to.name) {
								n += exchange(from, to)
							}
						}
					}
					total += n
					if n == 0 {
						break
					}
				}
				return fmt.Sprintf("merged %d\n", total)
			case "tenant":
				// tenant <region> <name> [topics=N] [admins=a,b] [rate=N]
				// [cap=REGION:N,…] (per-region publish_rate caps)
				r := s.region(t, args[0])
				tn := Tenant{Name: args[1]}
				for _, kv := range args[2:] {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "topics":
						tn.Quotas.Topics, _ = strconv.ParseInt(v, 10, 64)
					case "admins":
						tn.Admins = strings.Split(v, ",")
					case "rate":
						tn.Quotas.PublishRate, _ = strconv.ParseInt(v, 10, 64)
					case "cap":
						tn.Quotas.Regions = map[string]RegionQuotas{}
						for _, rc := range strings.Split(v, ",") {
							name, n, _ := strings.Cut(rc, ":")
							c, _ := strconv.ParseInt(n, 10, 64)
							tn.Quotas.Regions[name] = RegionQuotas{PublishRate: c}
						}
					}
				}
				if err := tn.ValidateIn([]string{"A", "B", "C"}); err != nil {
					return "error: " + err.Error() + "\n"
				}
				rec, err := NewRecord(tn, r.stamp(s, KindTenant, tn.Name))
				if err != nil {
					t.Fatal(err)
				}
				return r.write(t, rec) + "\n"
			case "namespace":
				// namespace <region> <tenant/ns>, the input a JSON merge
				// patch of its policies (none: the defaults, or as it is)
				r := s.region(t, args[0])
				n, err := ParseNSName(args[1])
				if err != nil {
					t.Fatal(err)
				}
				ns, ok := r.state.Namespace(n)
				if !ok {
					ns = Namespace{Tenant: n.Tenant, Name: n.Namespace, Policies: DefaultPolicies([]string{"A", "B", "C"})}
				}
				if d.Input != "" {
					p, err := PatchPolicies(ns.Policies, []byte(d.Input), DefaultPolicies([]string{"A", "B", "C"}))
					if err != nil {
						return "error: " + err.Error() + "\n"
					}
					ns.Policies = p
				}
				if err := ns.Validate(nil); err != nil {
					return "error: " + err.Error() + "\n"
				}
				rec, err := NewRecord(ns, r.stamp(s, KindNamespace, n.String()))
				if err != nil {
					t.Fatal(err)
				}
				return r.write(t, rec) + "\n"
			case "delete":
				// delete <region> tenant|namespace <key>
				r := s.region(t, args[0])
				kind := Kind(args[1])
				return r.write(t, Tombstone(kind, args[2], r.stamp(s, kind, args[2]))) + "\n"
			case "show":
				var b strings.Builder
				for _, a := range d.CmdArgs {
					fmt.Fprintf(&b, "%s:\n%s", a.Key, s.region(t, a.Key).show())
				}
				return b.String()
			case "converged":
				first := s.regions[0].state.Records()
				for _, r := range s.regions[1:] {
					if !slices.EqualFunc(first, r.state.Records(), recordsEqual) {
						return fmt.Sprintf("no: %s differs from %s\n", r.name, s.regions[0].name)
					}
				}
				return "yes\n"
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

func recordsEqual(a, b Record) bool {
	return a.ID() == b.ID() && a.Stamp == b.Stamp && a.Deleted == b.Deleted && string(a.Value) == string(b.Value)
}
