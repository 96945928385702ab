package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// jsRegion is one region of two brokers and four bookies (E3/Qw2/Qa2),
// with small ledgers so that a run rolls over many times, and streams
// created through the JetStream API in demo/streams.
const jsRegion = `mesh: e2e-js
defaults:
  rollover: {max_entries: 300}
  jetstream: {tenant: demo, namespace: streams}
regions:
  - name: solo
    brokers: 2
    bookies: 4
    ledger: {ensemble: 3, write_quorum: 2, ack_quorum: 2}
tenants:
  - name: demo
    namespaces:
      - name: streams
`

// jsCluster is a meta node, four bookies and two brokers of one region,
// each its own `strata node` process, so a test can kill, freeze and
// restart brokers.
type jsCluster struct {
	dir, topo string
	common    []string
	meta      *nodeProcess
	brokers   map[string]*nodeProcess
	args      map[string][]string
}

func startJSCluster(t *testing.T) *jsCluster {
	t.Helper()
	return startJSClusterWith(t, jsRegion)
}

// startJSClusterWith is startJSCluster with topology file topo.
func startJSClusterWith(t *testing.T, topo string) *jsCluster {
	t.Helper()
	dir := t.TempDir()
	c := &jsCluster{dir: dir, topo: writeTopology(t, dir, "js.yaml", topo), brokers: map[string]*nodeProcess{}, args: map[string][]string{}}
	c.common = []string{"--topology", c.topo, "--region", "solo", "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "info"}
	c.meta = startNodeProcess(t, filepath.Join(dir, "meta.log"), append(c.common, "--id", "meta")...)
	join := []string{"--etcd", c.meta.report.Etcd, "--join", c.meta.report.SerfLAN}
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		startNodeProcess(t, filepath.Join(dir, id+".log"), append(append(append([]string{}, c.common...), "--id", id), join...)...)
	}
	for _, id := range []string{"b1", "b2"} {
		c.args[id] = append(append(append([]string{}, c.common...), "--id", id), join...)
		c.brokers[id] = startNodeProcess(t, filepath.Join(dir, id+".log"), c.args[id]...)
	}
	c.waitBundlesSpread(t)
	return c
}

// waitBundlesSpread waits until both brokers own bundles, evenly, and
// agree on it for 300 ms. Placement moves bundles (load shedding) for a
// moment after the brokers start; a test that picks a topic's owner must
// not race with that (the owner it picked could hand the topic over).
func (c *jsCluster) waitBundlesSpread(t *testing.T) {
	t.Helper()
	live := []string{"b1", "b2"}
	hc := &http.Client{Timeout: 5 * time.Second}
	var prev map[string]string
	var prevAt time.Time
	testutil.Eventually(t, "the bundles spread over both brokers", 60*time.Second, func() bool {
		var seen map[string]string
		for _, id := range live {
			rows, err := bundlesAt(hc, c.brokers[id].report.Admin)
			if err != nil || len(rows) == 0 {
				return false
			}
			m := map[string]string{}
			for _, r := range rows {
				if r.Unloading != "" || r.Owner == "" {
					return false
				}
				m[r.Bundle] = strings.TrimPrefix(r.Owner, brokerPrefix)
			}
			if seen != nil && !sameOwners(seen, m) {
				return false
			}
			seen = m
		}
		if !balancedOver(seen, live) {
			prev = nil
			return false
		}
		if prev == nil || !sameOwners(prev, seen) {
			prev, prevAt = seen, time.Now()
			return false
		}
		return time.Since(prevAt) >= 300*time.Millisecond
	})
}

func (c *jsCluster) restart(t *testing.T, id string) {
	t.Helper()
	c.brokers[id].kill()
	c.brokers[id] = startNodeProcess(t, filepath.Join(c.dir, id+".log"), c.args[id]...)
}

// owner asks a broker's admin API which broker owns demo/streams/<topic>
// ("" while none does), by node id.
func (c *jsCluster) owner(t *testing.T, topic string) string {
	t.Helper()
	for _, id := range []string{"b1", "b2"} {
		p := c.brokers[id]
		if p.exited() {
			continue
		}
		resp, err := http.Get(p.report.Admin + "/admin/v1/topics/demo/streams")
		if err != nil {
			continue
		}
		var body struct {
			Topics []struct {
				Topic, Owner string
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, tp := range body.Topics {
			if tp.Topic == topic && tp.Owner != "" {
				return strings.TrimPrefix(tp.Owner, "solo.")
			}
		}
	}
	return ""
}

func other(id string) string {
	if id == "b1" {
		return "b2"
	}
	return "b1"
}

// ledgerRun is what a publisher and a consumer saw over one run.
type ledgerRun struct {
	mu sync.Mutex
	// acked maps each message index to the sequence its PubAck gave.
	acked map[int]uint64
	// persisted holds the sequences whose AckSync returned: they must
	// never be delivered again.
	persisted map[uint64]bool
	// consumed counts deliveries per index; redelivered counts deliveries
	// of an already persisted-acked sequence (must stay 0).
	consumed    map[int]int
	redelivered []uint64
}

// publishWithRetries publishes messages [from, to) in order through js,
// each with Nats-Msg-Id "m-<i>", retrying each until a PubAck arrives
// (so a message is published only after the previous one is stored).
func publishWithRetries(t *testing.T, js jetstream.JetStream, run *ledgerRun, from, to int, deadline time.Time) {
	for i := from; i < to; i++ {
		for attempt := 0; ; attempt++ {
			if time.Now().After(deadline) {
				t.Errorf("message %d not acknowledged before the deadline", i)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ack, err := js.Publish(ctx, "ord.new", body(i), jetstream.WithMsgID(fmt.Sprintf("m-%d", i)))
			cancel()
			if err != nil {
				time.Sleep(50 * time.Millisecond) // pacing between retries, not synchronisation
				continue
			}
			run.mu.Lock()
			if prev, ok := run.acked[i]; ok && prev != ack.Sequence {
				t.Errorf("message %d acked as seq %d and as seq %d", i, prev, ack.Sequence)
			}
			run.acked[i] = ack.Sequence
			run.mu.Unlock()
			break
		}
	}
}

// consumeAll fetches from durable "proc" and AckSyncs every message until
// want distinct messages were acknowledged or stop closes.
func consumeAll(t *testing.T, js jetstream.JetStream, run *ledgerRun, want int, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		run.mu.Lock()
		n := len(run.consumed)
		run.mu.Unlock()
		if n >= want {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cons, err := js.Consumer(ctx, "ORDERS", "proc")
		cancel()
		if err != nil {
			time.Sleep(100 * time.Millisecond) // pacing while the owner moves
			continue
		}
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			time.Sleep(100 * time.Millisecond) // pacing while the owner moves
			continue
		}
		for msg := range batch.Messages() {
			md, err := msg.Metadata()
			if err != nil {
				t.Errorf("metadata: %v", err)
				continue
			}
			var idx int
			if _, err := fmt.Sscanf(msg.Headers().Get(jetstream.MsgIDHeader), "m-%d", &idx); err != nil {
				t.Errorf("seq %d has no msg id: %v", md.Sequence.Stream, err)
				continue
			}
			run.mu.Lock()
			if run.persisted[md.Sequence.Stream] {
				run.redelivered = append(run.redelivered, md.Sequence.Stream)
			}
			run.consumed[idx]++
			run.mu.Unlock()
			if err := msg.DoubleAck(context.Background()); err == nil {
				run.mu.Lock()
				run.persisted[md.Sequence.Stream] = true
				run.mu.Unlock()
			}
		}
	}
}

// checkStream reads the whole stream through a fresh ordered consumer and
// checks it holds messages 0..n-1 exactly once, in order, at sequences
// 1..n, and that every PubAck named the sequence the message has.
func checkStream(t *testing.T, js jetstream.JetStream, run *ledgerRun, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) || info.State.LastSeq != uint64(n) || info.State.FirstSeq != 1 {
		t.Errorf("stream state: %d messages, seqs %d..%d; want %d messages, seqs 1..%d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq, n, n)
	}
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= n; want++ {
		msg, err := oc.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("reading seq %d back: %v", want, err)
		}
		md, _ := msg.Metadata()
		var idx int
		fmt.Sscanf(msg.Headers().Get(jetstream.MsgIDHeader), "m-%d", &idx)
		if md.Sequence.Stream != uint64(want) || idx != want-1 {
			t.Fatalf("position %d holds seq %d with message %d; want seq %d with message %d", want, md.Sequence.Stream, idx, want, want-1)
		}
		if string(msg.Data()) != string(body(idx)) {
			t.Fatalf("seq %d: payload differs", want)
		}
		if seq, ok := run.acked[idx]; ok && seq != uint64(want) {
			t.Fatalf("message %d was acked as seq %d but is stored at seq %d", idx, seq, want)
		}
	}
}

func jsConnect(t *testing.T, urls ...string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func createOrders(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"ord.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "proc", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 3 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
}

// TestJetStreamOwnerKilled publishes with Nats-Msg-Id and retries through
// one broker while a durable consumer reads through the other; the
// topic's owner is SIGKILLed mid-run and started again. After quiescence
// every acknowledged message is stored exactly once, in order, at
// gap-free sequences across the ledger rollovers; the consumer resumed
// from its persisted cursor, and no message whose AckSync returned was
// delivered again.
func TestJetStreamOwnerKilled(t *testing.T) {
	c := startJSCluster(t)
	b1, b2 := c.brokers["b1"].report.NATS, c.brokers["b2"].report.NATS
	_, jsA := jsConnect(t, b1, b2)
	_, jsB := jsConnect(t, b2, b1)
	createOrders(t, jsA)
	var owner string
	testutil.Eventually(t, "the topic has an owner", 30*time.Second, func() bool {
		owner = c.owner(t, "ORDERS")
		return owner != ""
	})
	t.Logf("demo/streams/ORDERS is owned by %s", owner)

	n := scale(2000)
	run := &ledgerRun{acked: map[int]uint64{}, persisted: map[uint64]bool{}, consumed: map[int]int{}}
	deadline := time.Now().Add(4 * time.Minute)
	stop := make(chan struct{})
	consumed := make(chan struct{})
	go func() { defer close(consumed); consumeAll(t, jsB, run, n, stop) }()
	began := time.Now()
	publishWithRetries(t, jsA, run, 0, n/3, deadline)
	t.Logf("%d publishes acknowledged in %v", n/3, time.Since(began))

	start := time.Now()
	c.brokers[owner].kill()
	t.Logf("SIGKILLed the owner %s after %d acknowledged publishes", owner, n/3)
	published := make(chan struct{})
	go func() { defer close(published); publishWithRetries(t, jsA, run, n/3, n, deadline) }()
	testutil.Eventually(t, "another broker owns the topic", 30*time.Second, func() bool {
		o := c.owner(t, "ORDERS")
		return o != "" && o != owner
	})
	t.Logf("ownership moved in %v", time.Since(start))
	c.restart(t, owner)
	<-published
	t.Logf("all %d publishes acknowledged after %v", n, time.Since(began))
	select {
	case <-consumed:
	case <-time.After(time.Until(deadline)):
		close(stop)
		<-consumed
		t.Errorf("the consumer acknowledged %d of %d messages before the deadline", len(run.consumed), n)
	}
	if t.Failed() {
		return
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if len(run.acked) != n {
		t.Fatalf("%d of %d publishes acknowledged", len(run.acked), n)
	}
	if len(run.redelivered) > 0 {
		t.Errorf("%d deliveries of messages whose AckSync had returned, e.g. seq %d", len(run.redelivered), run.redelivered[0])
	}
	checkStream(t, jsA, run, n)
	redeliveries := 0
	for _, k := range run.consumed {
		redeliveries += k - 1
	}
	t.Logf("%d messages stored once each; %d redeliveries (unacknowledged at the kill)", n, redeliveries)
}

// TestJetStreamStaleOwner freezes the topic's owner (SIGSTOP) for longer
// than its lease while publishes go on through the other broker, which
// takes the topic over; after SIGCONT the old owner acknowledges nothing
// more (every PubAck any client got is backed by the stored message at
// that sequence) and stops serving the topic.
func TestJetStreamStaleOwner(t *testing.T) {
	c := startJSCluster(t)
	b1, b2 := c.brokers["b1"].report.NATS, c.brokers["b2"].report.NATS
	_, js1 := jsConnect(t, b1)
	createOrders(t, js1)
	var owner string
	testutil.Eventually(t, "the topic has an owner", 30*time.Second, func() bool {
		owner = c.owner(t, "ORDERS")
		return owner != ""
	})
	viaOwner := b1
	viaOther := b2
	if owner == "b2" {
		viaOwner, viaOther = b2, b1
	}
	_, jsOwner := jsConnect(t, viaOwner)
	_, jsOther := jsConnect(t, viaOther)
	run := &ledgerRun{acked: map[int]uint64{}, persisted: map[uint64]bool{}, consumed: map[int]int{}}
	deadline := time.Now().Add(3 * time.Minute)
	publishWithRetries(t, jsOther, run, 0, 200, deadline)

	c.brokers[owner].signal(syscall.SIGSTOP)
	t.Logf("SIGSTOPped the owner %s", owner)
	// Publishes sent to the frozen owner itself: they wait in its socket
	// and reach it only after SIGCONT, when it is no longer the owner.
	var inflight []jetstream.PubAckFuture
	for i := 200; i < 260; i++ {
		f, err := jsOwner.PublishAsync("ord.new", body(i), jetstream.WithMsgID(fmt.Sprintf("m-%d", i)))
		if err == nil {
			inflight = append(inflight, f)
		}
	}
	frozen := time.Now()
	publishWithRetries(t, jsOther, run, 260, 400, deadline)
	t.Logf("publishes resumed through %s after %v", other(owner), time.Since(frozen))
	c.brokers[owner].signal(syscall.SIGCONT)
	// The stale owner's in-flight publishes: any PubAck must be backed by
	// the stored message; the rest are retried through the live broker.
	// The stale owner answers none of them (its adds are fenced), so
	// they are given 10 s in all.
	settle := time.After(10 * time.Second)
	answered := 0
inflight:
	for j, f := range inflight {
		i := 200 + j
		select {
		case ack := <-f.Ok():
			answered++
			run.mu.Lock()
			run.acked[i] = ack.Sequence
			run.mu.Unlock()
		case <-f.Err():
			answered++
		case <-settle:
			break inflight
		}
	}
	t.Logf("%d of %d publishes in flight on the frozen owner were answered", answered, len(inflight))
	publishWithRetries(t, jsOther, run, 200, 260, deadline) // dedup keeps one copy
	publishWithRetries(t, jsOther, run, 400, 500, deadline)
	if t.Failed() {
		return
	}
	// The stale owner dropped the topic.
	logb, _ := os.ReadFile(filepath.Join(c.dir, owner+".log"))
	if !strings.Contains(string(logb), "ownership lost") {
		t.Errorf("the old owner's log does not show it dropped the topic:\n%s", tail(logb, 3000))
	}
	// (The thawed broker may own the topic again later, through a fresh
	// takeover once placement hands it a bundle: that is not the stale
	// instance writing.)
	// Publishes 0..499, exactly once, in index order except 200..259,
	// which may be stored where their first successful attempt landed.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := jsOther.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 500 || info.State.LastSeq != 500 {
		t.Fatalf("stream holds %d messages up to seq %d; want 500 and 500", info.State.Msgs, info.State.LastSeq)
	}
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]uint64{}
	for want := uint64(1); want <= 500; want++ {
		msg, err := oc.Next(jetstream.FetchMaxWait(10 * time.Second))
		for try := 0; (errors.Is(err, jetstream.ErrConsumerLeadershipChanged) || errors.Is(err, nats.ErrNoResponders)) && try < 10; try++ {
			if errors.Is(err, nats.ErrNoResponders) {
				// The ephemeral consumer went with its bundle (the thawed
				// broker took it back): read on with a new one from here.
				time.Sleep(200 * time.Millisecond)
				if oc, err = st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
					DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: want}); err != nil {
					continue
				}
			}
			msg, err = oc.Next(jetstream.FetchMaxWait(10 * time.Second)) // the bundle moved: retry
		}
		if err != nil {
			t.Fatalf("reading seq %d: %v", want, err)
		}
		md, _ := msg.Metadata()
		var idx int
		fmt.Sscanf(msg.Headers().Get(jetstream.MsgIDHeader), "m-%d", &idx)
		if md.Sequence.Stream != want {
			t.Fatalf("gap: got seq %d, want %d", md.Sequence.Stream, want)
		}
		if _, dup := seen[idx]; dup {
			t.Fatalf("message %d stored twice (seqs %d and %d)", idx, seen[idx], want)
		}
		seen[idx] = want
	}
	for i, seq := range run.acked {
		if seen[i] != seq {
			t.Errorf("message %d was acknowledged as seq %d but is stored at seq %d", i, seq, seen[i])
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

var _ = errors.New
