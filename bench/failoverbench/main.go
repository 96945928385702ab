// Command failoverbench measures topic failover and forwarding in one
// region of real `strata node` processes (issue 7's benchmark; results go
// to docs/perf.md):
//
//   - Failover time, p50/p99 over -runs runs: for a new stream each run,
//     a publisher (sync publishes with Nats-Msg-Id, retried) and a pull
//     consumer connected to a broker that does not own the stream; the
//     owner is SIGKILLed; measured from the kill to the first PubAck of a
//     publish sent after it, and to the first delivery of such a message.
//     The killed broker is restarted and placement allowed to settle
//     before the next run.
//
//   - Throughput through a forwarding broker vs through the owner:
//     `-msgs` async publishes (window 500) of `-size` bytes, then a pull
//     consumer reading them all, each way.
//
//     go run ./bench/failoverbench -strata bin/strata [-runs 20] [-brokers 3]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/bench/benchnode"
	"github.com/stratamesh/strata/internal/harness"
)

const topology = `mesh: failover-bench
defaults:
  jetstream: {tenant: bench, namespace: js}
regions:
  - name: r
    brokers: %d
    bookies: 4
    ledger: {ensemble: 3, write_quorum: 2, ack_quorum: 2}
tenants:
  - name: bench
    namespaces:
      - name: js
        bundles: 4
`

// node is one node and its current ready report.
type node struct {
	id     string
	report harness.Report
	n      *harness.Node
}

type region struct {
	strata, dir string
	h           *harness.Harness // runs every node
	common      []string
	join        []string
	brokers     map[string]*node
	ids         []string
}

func main() {
	strata := flag.String("strata", "bin/strata", "strata binary")
	runs := flag.Int("runs", 20, "failover runs")
	brokers := flag.Int("brokers", 3, "brokers in the region")
	msgs := flag.Int("msgs", 100000, "messages for the throughput comparison")
	size := flag.Int("size", 128, "message size in bytes for the throughput comparison")
	keep := flag.Bool("keep", false, "keep the data directory and node logs")
	flag.Parse()
	if err := run(*strata, *runs, *brokers, *msgs, *size, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "failoverbench:", err)
		os.Exit(1)
	}
}

func run(strata string, runs, nBrokers, msgs, size int, keep bool) error {
	dir, err := os.MkdirTemp("", "strata-failover.")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "# data and logs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	topo := filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(topo, []byte(fmt.Sprintf(topology, nBrokers)), 0o644); err != nil {
		return err
	}
	r := &region{strata: strata, dir: dir, brokers: map[string]*node{}, h: harness.New(harness.Config{StopGrace: 5 * time.Second})}
	defer r.h.Close()
	r.common = []string{"--topology", topo, "--region", "r", "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback"}
	meta, err := r.start("meta", nil)
	if err != nil {
		return err
	}
	r.join = []string{"--etcd", meta.report.Etcd, "--join", meta.report.SerfLAN}
	for i := 1; i <= 4; i++ {
		if _, err := r.start(fmt.Sprintf("k%d", i), r.join); err != nil {
			return err
		}
	}
	for i := 1; i <= nBrokers; i++ {
		id := fmt.Sprintf("b%d", i)
		b, err := r.start(id, r.join)
		if err != nil {
			return err
		}
		r.brokers[id] = b
		r.ids = append(r.ids, id)
	}
	if err := r.waitBalanced(60 * time.Second); err != nil {
		return err
	}
	fmt.Printf("# %s commit %s %d cores; failover runs=%d brokers=%d bookies=4 E3/Qw2/Qa2 lease 3s (default)\n",
		time.Now().UTC().Format(time.RFC3339), commit(), runtime.NumCPU(), runs, nBrokers)

	var pubs, dlvs []time.Duration
	for i := 1; i <= runs; i++ {
		p, d, victim, err := r.failoverRun(i)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		fmt.Printf("run %2d: killed %s; first publish after %v, first delivery after %v\n", i, victim, p.Round(time.Millisecond), d.Round(time.Millisecond))
		pubs, dlvs = append(pubs, p), append(dlvs, d)
		if err := r.restart(victim); err != nil {
			return err
		}
		if err := r.waitBalanced(60 * time.Second); err != nil {
			return err
		}
	}
	if runs == 0 {
		return r.throughput(msgs, size)
	}
	fmt.Printf("\n| measure | p50 | p99 | max |\n|---|---|---|---|\n")
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"SIGKILL → first PubAck through another broker", pubs}, {"SIGKILL → first delivery through another broker", dlvs}} {
		fmt.Printf("| %s | %v | %v | %v |\n", m.name, ms(benchnode.Pct(m.d, 0.50)), ms(benchnode.Pct(m.d, 0.99)), ms(slices.Max(m.d)))
	}
	return r.throughput(msgs, size)
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + " ms" }

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// start runs one node (through the harness) with its log in the data
// directory.
func (r *region) start(id string, extra []string) (*node, error) {
	spec := harness.SpecFromArgs(r.strata, append(append(append([]string{}, r.common...), "--id", id), extra...))
	spec.Log = filepath.Join(r.dir, id+".log")
	n, err := r.h.Start(spec)
	if err != nil {
		return nil, err
	}
	return &node{id: id, report: n.Report(), n: n}, nil
}

// restart starts the killed broker id again with the same arguments.
func (r *region) restart(id string) error {
	if err := r.h.Restart("r", id); err != nil {
		return err
	}
	n, _ := r.h.Node("r", id)
	r.brokers[id] = &node{id: id, report: n.Report(), n: n}
	return nil
}

// admin GETs path from a live broker.
func (r *region) admin(path string, v any) error {
	var last error
	for _, id := range r.ids {
		b := r.brokers[id]
		if b.n.State() == harness.StateExited {
			continue
		}
		resp, err := http.Get(b.report.Admin + path)
		if err != nil {
			last = err
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(v)
		resp.Body.Close()
		if err == nil {
			return nil
		}
		last = err
	}
	return fmt.Errorf("no broker answered %s: %v", path, last)
}

// waitBalanced waits until every bundle is owned and every broker owns
// some (counts differ by at most 1).
func (r *region) waitBalanced(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var a struct {
			Bundles []struct{ Bundle, Owner string }
		}
		if r.admin("/admin/v1/bundles", &a) == nil && len(a.Bundles) > 0 {
			counts := map[string]int{}
			owned := true
			for _, b := range a.Bundles {
				owned = owned && b.Owner != ""
				counts[b.Owner]++
			}
			lo, hi := len(a.Bundles), 0
			for _, id := range r.ids {
				c := counts["r."+id]
				lo, hi = min(lo, c), max(hi, c)
			}
			if owned && hi-lo <= 1 {
				time.Sleep(500 * time.Millisecond) // let the last handover's topics open
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("bundles did not settle over the brokers")
}

// owner returns the broker id owning stream name's topic bench/js/name.
func (r *region) owner(name string) string {
	var a struct {
		Topics []struct{ Topic, Owner string }
	}
	if r.admin("/admin/v1/topics/bench/js", &a) != nil {
		return ""
	}
	for _, t := range a.Topics {
		if t.Topic == name {
			return strings.TrimPrefix(t.Owner, "r.")
		}
	}
	return ""
}

func connect(url string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) {}))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// failoverRun creates stream FO<i>, publishes and consumes through a
// non-owner, kills the owner, and measures.
func (r *region) failoverRun(i int) (pub, dlv time.Duration, victim string, err error) {
	name := fmt.Sprintf("FO%d", i)
	subj := fmt.Sprintf("fo.%d", i)
	_, js0, err := connect(r.brokers[r.ids[0]].report.NATS)
	if err != nil {
		return 0, 0, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}})
	if err != nil {
		return 0, 0, "", fmt.Errorf("create stream: %w", err)
	}
	for victim = r.owner(name); victim == ""; victim = r.owner(name) {
		if ctx.Err() != nil {
			return 0, 0, "", errors.New("the stream got no owner")
		}
		time.Sleep(50 * time.Millisecond)
	}
	via := ""
	for _, id := range r.ids {
		if id != victim {
			via = id
			break
		}
	}
	nc, js, err := connect(r.brokers[via].report.NATS)
	if err != nil {
		return 0, 0, "", err
	}
	defer nc.Close()
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return 0, 0, "", fmt.Errorf("create consumer: %w", err)
	}
	cons, err = js.Consumer(ctx, name, "d")
	if err != nil {
		return 0, 0, "", err
	}
	var mu sync.Mutex
	var killed time.Time
	var firstAfter int = -1 // index of the first publish started after the kill
	var gotPub, gotDlv time.Time
	done := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		idx, _ := strconv.Atoi(string(m.Data()))
		mu.Lock()
		if firstAfter >= 0 && idx >= firstAfter && gotDlv.IsZero() {
			gotDlv = time.Now()
		}
		mu.Unlock()
	}, jetstream.PullExpiry(2*time.Second), jetstream.PullHeartbeat(500*time.Millisecond))
	if err != nil {
		return 0, 0, "", err
	}
	defer cc.Stop()
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			mu.Lock()
			if !killed.IsZero() && firstAfter < 0 {
				firstAfter = n
			}
			finished := !gotPub.IsZero() && !gotDlv.IsZero()
			mu.Unlock()
			if finished || ctx.Err() != nil {
				return
			}
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 250*time.Millisecond)
				_, err := js.Publish(pctx, subj, []byte(strconv.Itoa(n)), jetstream.WithMsgID(strconv.Itoa(n)))
				pcancel()
				if err == nil {
					break
				}
			}
			mu.Lock()
			if firstAfter >= 0 && n >= firstAfter && gotPub.IsZero() {
				gotPub = time.Now()
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second) // steady state
	b := r.brokers[victim]
	mu.Lock()
	killed = time.Now()
	mu.Unlock()
	if err := r.h.Kill("r", b.id); err != nil {
		return 0, 0, victim, err
	}
	<-done
	if ctx.Err() != nil {
		return 0, 0, victim, errors.New("no publish or delivery within 30 s of the kill")
	}
	return gotPub.Sub(killed), gotDlv.Sub(killed), victim, nil
}

// throughput publishes msgs messages through the owner and through a
// forwarding broker, and reads them back the same way.
func (r *region) throughput(msgs, size int) error {
	fmt.Printf("\n| path | publish msgs/s | consume msgs/s |\n|---|---|---|\n")
	payload := make([]byte, size)
	for _, path := range []string{"owner", "forwarding broker"} {
		name := "TP" + strings.ReplaceAll(path, " ", "")
		_, js0, err := connect(r.brokers[r.ids[0]].report.NATS)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		st, err := js0.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"tp." + name}})
		if err != nil {
			cancel()
			return err
		}
		owner := ""
		for owner = r.owner(name); owner == ""; owner = r.owner(name) {
			time.Sleep(50 * time.Millisecond)
		}
		via := owner
		if path != "owner" {
			for _, id := range r.ids {
				if id != owner {
					via = id
					break
				}
			}
		}
		nc, js, err := connect(r.brokers[via].report.NATS)
		if err != nil {
			cancel()
			return err
		}
		start := time.Now()
		for sent := 0; sent < msgs; {
			n := min(500, msgs-sent)
			futs := make([]jetstream.PubAckFuture, 0, n)
			for k := 0; k < n; k++ {
				f, err := js.PublishAsync("tp."+name, payload)
				if err != nil {
					cancel()
					return err
				}
				futs = append(futs, f)
			}
			for _, f := range futs {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					cancel()
					return fmt.Errorf("publish via %s: %w", path, err)
				}
			}
			sent += n
		}
		pubRate := float64(msgs) / time.Since(start).Seconds()
		if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckNonePolicy}); err != nil {
			cancel()
			return err
		}
		cons, err := js.Consumer(ctx, name, "d")
		if err != nil {
			cancel()
			return err
		}
		start = time.Now()
		got := 0
		for got < msgs {
			batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				cancel()
				return err
			}
			for range batch.Messages() {
				got++
			}
			if batch.Error() != nil && !errors.Is(batch.Error(), nats.ErrTimeout) {
				cancel()
				return batch.Error()
			}
		}
		conRate := float64(msgs) / time.Since(start).Seconds()
		fmt.Printf("| through the %s (%s→%s), %d × %d B | %.0f | %.0f |\n", path, via, owner, msgs, size, pubRate, conRate)
		nc.Close()
		cancel()
	}
	return nil
}
