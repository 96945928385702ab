package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// bulkResult is one way of making (or changing) many namespaces: how
// long the writes took in the origin and when every remote broker had
// them all.
type bulkResult struct {
	name    string
	n       int
	writes  time.Duration   // the command, or the PUTs, in the origin
	lat     []time.Duration // per PUT (direct only)
	visible map[string]time.Duration
	order   []string
	note    string
}

func (r *bulkResult) print() {
	fmt.Printf("# %s: %d namespaces, writes %v", r.name, r.n, r.writes.Round(time.Millisecond))
	if r.writes > 0 && r.n > 1 {
		fmt.Printf(" (%.0f/s)", float64(r.n)/r.writes.Seconds())
	}
	if len(r.lat) > 0 {
		fmt.Printf(", PUT latency %s", pcts(r.lat))
	}
	fmt.Println()
	for _, rg := range r.order {
		if d, ok := r.visible[rg]; ok {
			fmt.Printf("#   visible on every broker of %s %v after the first write\n", rg, d.Round(time.Millisecond))
		} else {
			fmt.Printf("#   %s: not visible within the limit\n", rg)
		}
	}
	if r.note != "" {
		fmt.Printf("#   %s\n", r.note)
	}
}

// waitVisible polls every remote broker (of origin) every interval until
// cond holds on it, and returns per remote region when its slowest
// broker met it, measured from start.
func (m *mesh) waitVisible(origin string, start time.Time, limit, interval time.Duration, cond func(c *http.Client, admin string) bool) (map[string]time.Duration, []string) {
	remotes := m.remoteBrokers(origin)
	c := newClient(2)
	seen := make([]time.Duration, len(remotes))
	var wg sync.WaitGroup
	for j, t := range remotes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen[j] = -1
			for time.Since(start) < limit {
				if cond(c, t.admin) {
					seen[j] = time.Since(start)
					return
				}
				time.Sleep(interval)
			}
		}()
	}
	wg.Wait()
	out := map[string]time.Duration{}
	var order []string
	failed := map[string]bool{}
	for j, t := range remotes {
		if len(order) == 0 || order[len(order)-1] != t.region {
			order = append(order, t.region)
		}
		if seen[j] < 0 {
			failed[t.region] = true
		} else if seen[j] > out[t.region] {
			out[t.region] = seen[j]
		}
	}
	for r := range failed {
		delete(out, r)
	}
	return out, order
}

// countIs is a waitVisible condition: tenant has n namespaces.
func countIs(tenant string, n int) func(*http.Client, string) bool {
	return func(c *http.Client, admin string) bool {
		code, b, err := call(c, http.MethodGet, admin+"/admin/v1/namespaces/"+tenant, "")
		if err != nil || code != http.StatusOK {
			return false
		}
		var v struct {
			Namespaces []json.RawMessage `json:"namespaces"`
		}
		return json.Unmarshal(b, &v) == nil && len(v.Namespaces) == n
	}
}

// maxConsumersIs is a waitVisible condition: ns has max_consumers v.
func maxConsumersIs(ns string, v int) func(*http.Client, string) bool {
	return func(c *http.Client, admin string) bool {
		code, b, err := call(c, http.MethodGet, admin+"/admin/v1/namespaces/"+ns+"/policies", "")
		if err != nil || code != http.StatusOK {
			return false
		}
		var p struct {
			MaxConsumers int `json:"max_consumers"`
		}
		return json.Unmarshal(b, &p) == nil && p.MaxConsumers == v
	}
}

func nsName(i int) string { return fmt.Sprintf("ns-%04d", i) }

// direct makes n namespaces of a new tenant with PUT
// /admin/v1/namespaces/{t}/{ns} on the origin's first broker, from
// clients goroutines, and waits until every remote broker lists them.
func (m *mesh) direct(o options, tenant string, clients int) (*bulkResult, error) {
	origin := m.regions[0]
	base := origin.brokers[0].report.Admin
	if _, err := m.must(http.MethodPut, base+"/admin/v1/tenants/"+tenant, `{}`, http.StatusCreated); err != nil {
		return nil, err
	}
	res := &bulkResult{name: fmt.Sprintf("PUT ×%d, %d client(s)", o.namespaces, clients), n: o.namespaces}
	c := newClient(clients)
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			for {
				i := int(next.Add(1)) - 1
				if i >= o.namespaces {
					break
				}
				t0 := time.Now()
				code, b, err := call(c, http.MethodPut, base+"/admin/v1/namespaces/"+tenant+"/"+nsName(i), `{}`)
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("PUT namespace %s/%s: %d %s", tenant, nsName(i), code, strings.TrimSpace(string(b)))
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.writes = time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	res.visible, res.order = m.waitVisible(origin.name, start, o.bulkTimeout, 20*time.Millisecond, countIs(tenant, o.namespaces))
	return res, nil
}

// applyCommand is the argument list for `strata apply` of file against
// the mesh, or nil and why not when the binary has no apply command.
func (m *mesh) applyCommand(o options, file string) ([]string, string) {
	help, err := exec.Command(m.strata, "apply", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Sprintf("%s has no apply command (`%s apply --help`: %s)", m.strata, m.strata, firstLine(string(help)))
	}
	url := m.regions[0].brokers[0].report.Admin
	if o.applyArgs != "" {
		var args []string
		for _, a := range strings.Fields(o.applyArgs) {
			args = append(args, strings.NewReplacer("{file}", file, "{url}", url, "{dir}", m.dir).Replace(a))
		}
		return args, ""
	}
	args := []string{"apply", "-f", file}
	if strings.Contains(string(help), "--url") {
		args = append(args, "--url", url)
	}
	return args, ""
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// applyFile is the mesh's topology with one more tenant of n namespaces
// (edited: the one at index n/2 with max_consumers 7).
func applyFile(o options, tenant string, edited bool) string {
	var b strings.Builder
	b.WriteString(meshTopology(o.brokers))
	fmt.Fprintf(&b, "  - name: %s\n    namespaces:\n", tenant)
	for i := 0; i < o.namespaces; i++ {
		fmt.Fprintf(&b, "      - name: %s\n", nsName(i))
		if edited && i == o.namespaces/2 {
			b.WriteString("        max_consumers: 7\n")
		}
	}
	return b.String()
}

// apply times `strata apply -f FILE` three times: creating n
// namespaces, again unchanged, and with one namespace edited; after the
// first and third, until every remote broker has the result.
func (m *mesh) apply(o options) ([]*bulkResult, string, error) {
	const tenant = "fleet"
	file := filepath.Join(m.dir, "apply.yaml")
	edited := filepath.Join(m.dir, "apply-edited.yaml")
	if err := os.WriteFile(file, []byte(applyFile(o, tenant, false)), 0o644); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(edited, []byte(applyFile(o, tenant, true)), 0o644); err != nil {
		return nil, "", err
	}
	if out, err := exec.Command(m.strata, "validate", "-f", file).CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("the generated apply file %s does not validate: %v\n%s", file, err, out)
	}
	args, why := m.applyCommand(o, file)
	if args == nil {
		return nil, why, nil
	}
	editedArgs := make([]string, len(args))
	for i, a := range args {
		editedArgs[i] = strings.ReplaceAll(a, file, edited)
	}
	origin := m.regions[0].name
	runs := []struct {
		name string
		args []string
		cond func(*http.Client, string) bool
	}{
		{fmt.Sprintf("apply: create %d namespaces", o.namespaces), args, countIs(tenant, o.namespaces)},
		{"apply: again, no change", args, nil},
		{"apply: one namespace edited", editedArgs, maxConsumersIs(tenant+"/"+nsName(o.namespaces/2), 7)},
	}
	var out []*bulkResult
	for _, r := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), o.bulkTimeout)
		cmd := exec.CommandContext(ctx, m.strata, r.args...)
		cmd.Env = append(os.Environ(), "STRATA_ADMIN_URL="+m.regions[0].brokers[0].report.Admin)
		start := time.Now()
		b, err := cmd.CombinedOutput()
		took := time.Since(start)
		cancel()
		if err != nil {
			return out, "", fmt.Errorf("%s %s: %v\n%s", m.strata, strings.Join(r.args, " "), err, b)
		}
		res := &bulkResult{name: r.name, n: o.namespaces, writes: took, note: "its output ends: " + lastLine(string(b))}
		if r.cond != nil {
			res.visible, res.order = m.waitVisible(origin, start, o.bulkTimeout, 20*time.Millisecond, r.cond)
		}
		out = append(out, res)
	}
	return out, "`" + m.strata + " " + strings.Join(args, " ") + "`", nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
