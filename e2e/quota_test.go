package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/tenancy/quota"
)

// quotaRegions are the three regions of the quota mesh, each one meta
// node, one bookie and one broker (the smallest region that runs, so
// that three fit on a small CI machine next to the publishers).
var quotaRegions = []string{"q1", "q2", "q3"}

// quotaMesh is the mesh of TestMeshWideQuota: tenant demo with a
// mesh-wide publish_rate of limit msgs/s and a small storage quota. Its
// namespace q has core NATS traffic only (no topics); namespace s
// auto-creates topics in q1.
func quotaMesh(limit int) string {
	var b strings.Builder
	b.WriteString("mesh: e2e-quota\ndefaults:\n  ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}\n  jetstream: {tenant: demo, namespace: streams}\nregions:\n")
	for _, r := range quotaRegions {
		fmt.Fprintf(&b, "  - {name: %s, brokers: 1, bookies: 1}\n", r)
	}
	fmt.Fprintf(&b, "tenants:\n  - name: demo\n    quotas: {publish_rate: %d/s, storage: 64KiB}\n    namespaces:\n      - name: streams\n      - name: q\n        replication: [q1]\n        auto_create_topics: false\n", limit)
	b.WriteString("      - name: s\n        replication: [q1]\n        auto_create_topics: true\n")
	return b.String()
}

// quotaRegion is one region of the quota mesh: its processes.
type quotaRegion struct {
	name  string
	procs []*nodeProcess // meta, bookie, broker
	nats  string
	admin string
}

func startQuotaMesh(t *testing.T, src string) map[string]*quotaRegion {
	t.Helper()
	dir := t.TempDir()
	topo := writeTopology(t, dir, "quota.yaml", src)
	out := map[string]*quotaRegion{}
	var wanSeed string
	for _, r := range quotaRegions {
		common := []string{"--topology", topo, "--region", r, "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "info"}
		log := func(id string) string { return filepath.Join(dir, r+"-"+id+".log") }
		meta := startNodeProcess(t, log("meta"), append(append([]string{}, common...), "--id", "meta")...)
		join := []string{"--etcd", meta.report.Etcd, "--join", meta.report.SerfLAN}
		k1 := startNodeProcess(t, log("k1"), append(append(append([]string{}, common...), "--id", "k1"), join...)...)
		args := append(append(append([]string{}, common...), "--id", "b1"), join...)
		if wanSeed != "" {
			args = append(args, "--wan-join", wanSeed)
		}
		b1 := startNodeProcess(t, log("b1"), args...)
		if wanSeed == "" {
			wanSeed = b1.report.SerfWAN
		}
		out[r] = &quotaRegion{name: r, procs: []*nodeProcess{meta, k1, b1}, nats: b1.report.NATS, admin: b1.report.Admin}
	}
	return out
}

// paced publishes core NATS messages on subject at rate msgs/s until
// ctx ends, in 10 ms batches, and counts what it offered.
func paced(ctx context.Context, nc *nats.Conn, subject string, rate int, offered *atomic.Int64) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var sent int64
	payload := make([]byte, 64)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			due := int64(now.Sub(start).Seconds() * float64(rate))
			for ; sent < due; sent++ {
				if nc.Publish(subject, payload) != nil {
					return
				}
				offered.Add(1)
			}
		}
	}
}

// arrivals records when each admitted message reached a subscriber in
// its region.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) add(t time.Time) {
	a.mu.Lock()
	a.at = append(a.at, t)
	a.mu.Unlock()
}

// count is the arrivals in [from, to).
func (a *arrivals) count(from, to time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, t := range a.at {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// maxWindow is the most arrivals, over every region in rs, in any 1 s
// window starting in [from, to) (windows slide by 50 ms).
func maxWindow(rs []*arrivals, from, to time.Time) (int, time.Time) {
	var all []time.Time
	for _, a := range rs {
		a.mu.Lock()
		all = append(all, a.at...)
		a.mu.Unlock()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Before(all[j]) })
	best, at := 0, from
	for w := from; w.Before(to); w = w.Add(50 * time.Millisecond) {
		i := sort.Search(len(all), func(i int) bool { return !all[i].Before(w) })
		j := sort.Search(len(all), func(i int) bool { return !all[i].Before(w.Add(time.Second)) })
		if j-i > best {
			best, at = j-i, w
		}
	}
	return best, at
}

// TestMeshWideQuota: one tenant's publish_rate holds across three
// regions (issue 25): publishers in the three regions offer twice the
// limit, split 80/10/10; the mesh admits the limit within ±10% and each
// region at least about its demand-weighted share; with one region
// frozen (SIGSTOP) the other two never exceed the limit over any 1 s
// window. Then a storage quota: publishes are refused once it is
// reached, with the error naming it, and deleting data frees budget.
// STRATA_E2E_SCALE multiplies the limit and the run.
func TestMeshWideQuota(t *testing.T) {
	limit := scale(1000)
	run := 15 * time.Second
	if scale(1) > 1 {
		run = 30 * time.Second
	}
	mesh := startQuotaMesh(t, quotaMesh(limit))

	shares := map[string]float64{"q1": 0.8, "q2": 0.1, "q3": 0.1}
	conns := map[string]*nats.Conn{}
	got := map[string]*arrivals{}
	for _, r := range quotaRegions {
		nc, err := nats.Connect(mesh[r].nats, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		conns[r] = nc
		a := &arrivals{}
		got[r] = a
		sub, err := nc.Subscribe("demo.q.>", func(*nats.Msg) { a.add(time.Now()) })
		if err != nil {
			t.Fatal(err)
		}
		sub.SetPendingLimits(-1, -1)
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	offered := map[string]*atomic.Int64{}
	for _, r := range quotaRegions {
		offered[r] = &atomic.Int64{}
		// A publisher of its own per region, on a connection of its own.
		pc, err := nats.Connect(mesh[r].nats, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pc.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			paced(ctx, pc, "demo.q.load", int(2*float64(limit)*shares[r]), offered[r])
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	// Demand is learnt and leases move within a few seconds: measure once
	// q1, the busiest region, is admitted most of its demand-weighted share.
	waitFor(t, "q1 admitted most of its share", 30*time.Second, func() bool {
		now := time.Now()
		return float64(got["q1"].count(now.Add(-time.Second), now)) >= 0.8*shares["q1"]*float64(limit)
	})
	from := time.Now()
	time.Sleep(run)
	to := time.Now()
	secs := to.Sub(from).Seconds()
	total := 0
	for _, r := range quotaRegions {
		n := got[r].count(from, to)
		total += n
		t.Logf("%s: offered %.0f msgs/s, admitted %.0f msgs/s", r, 2*float64(limit)*shares[r], float64(n)/secs)
	}
	rate := float64(total) / secs
	t.Logf("mesh-wide: admitted %.0f msgs/s against a limit of %d", rate, limit)
	if rate < 0.9*float64(limit) || rate > 1.1*float64(limit) {
		t.Errorf("admitted %.0f msgs/s mesh-wide, want %d ±10%%", rate, limit)
	}
	for _, r := range quotaRegions {
		// The demand-weighted share, less the 10% the mesh-wide figure may
		// be off and the small floor other regions keep.
		want := shares[r] * float64(limit) * 0.85
		if got := float64(got[r].count(from, to)) / secs; got < want {
			t.Errorf("%s admitted %.0f msgs/s, below its demand-weighted share (want ≥ %.0f)", r, got, want)
		}
	}

	// Freeze q3 (every process): q1 and q2 go on offering; their leases
	// from q3 lapse and the mesh stays within the limit.
	for _, p := range mesh["q3"].procs {
		p.signal(syscall.SIGSTOP)
	}
	frozeAt := time.Now()
	time.Sleep(run / 2)
	for _, p := range mesh["q3"].procs {
		p.signal(syscall.SIGCONT)
	}
	eps := quota.Epsilon(float64(limit), 2, 1, 0) // two brokers admitting
	most, at := maxWindow([]*arrivals{got["q1"], got["q2"]}, frozeAt, time.Now().Add(-time.Second))
	t.Logf("q3 frozen: q1+q2 admitted at most %d msgs in a 1 s window (at +%v); limit %d, ε %.3f", most, at.Sub(frozeAt).Round(time.Millisecond), limit, eps)
	if float64(most) > float64(limit)*(1+eps) {
		t.Errorf("with q3 frozen, q1+q2 admitted %d msgs in 1 s, over the limit %d × (1+%.3f)", most, limit, eps)
	}
	cancel()
	wg.Wait()

	t.Run("storage", func(t *testing.T) { quotaStorage(t, mesh["q1"]) })
}

// quotaStorage fills tenant demo's 64 KiB storage quota through
// JetStream, checks the refusal names the quota, then purges the stream
// and publishes again.
func quotaStorage(t *testing.T, r *quotaRegion) {
	nc, err := nats.Connect(r.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Limits are on use, not declarations: five streams declaring 1 GiB
	// each are created under the 64 KiB storage quota, and take a message.
	for i := range 5 {
		name := fmt.Sprintf("BIG%d", i)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"big" + fmt.Sprint(i) + ".>"}, MaxBytes: 1 << 30}); err != nil {
			t.Fatalf("stream %s declaring 1 GiB under a 64 KiB storage quota: %v", name, err)
		}
		if _, err := js.Publish(ctx, fmt.Sprintf("big%d.x", i), []byte("small")); err != nil {
			t.Fatalf("a small publish to %s: %v", name, err)
		}
	}
	payload := make([]byte, 1024)
	var refused error
	stored := 0
	for i := 0; i < 400 && refused == nil; i++ {
		if _, err := js.Publish(ctx, "demo.s.fill", payload); err != nil {
			if strings.Contains(err.Error(), "publish_rate") {
				// The rate allowance is still settling after the rate
				// phase (this region's share): not what this subtest
				// is about; publish again shortly.
				time.Sleep(50 * time.Millisecond)
				continue
			}
			refused = err
			break
		}
		stored++
		if stored > 64 {
			// Past the quota: the next publishes are refused once the
			// use is reported (a report interval or two).
			time.Sleep(20 * time.Millisecond)
		}
	}
	var apiErr *jetstream.APIError
	if !errors.As(refused, &apiErr) || apiErr.ErrorCode != 10429 || !strings.Contains(apiErr.Description, "storage") || !strings.Contains(apiErr.Description, `"demo"`) {
		t.Fatalf("after %d KiB stored: want a 10429 refusal naming tenant demo's storage quota, got %v", stored, refused)
	}
	t.Logf("refused after %d KiB: %v", stored, refused)
	st, err := js.Stream(ctx, "s:fill")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := js.Publish(ctx, "demo.s.fill", payload)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the purge, publishes are still refused: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
