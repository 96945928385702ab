package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// Pulsar's subscription types (spec §4 "Subscription types") with real
// processes: brokers are `strata node` processes (startJSCluster) and
// the clients under test are this test binary re-run as a child process
// (subsChildEnv), so a client can be SIGKILLed like a crashed
// application, and each puller has its own connection, process and
// clock reading.

// subsChildEnv, when set, makes this binary a subscription client
// process instead of a test run: its value is a JSON subsChildSpec. It is
// checked in init, before TestMain builds the strata binary.
const subsChildEnv = "STRATA_E2E_SUBS_CHILD"

func init() {
	if spec := os.Getenv(subsChildEnv); spec != "" {
		os.Exit(subsChildMain(spec))
	}
}

// subsChildSpec is what a child process does.
type subsChildSpec struct {
	// Mode is "pinned" (pinnedChild) or "keyshared" (keySharedChild).
	Mode     string
	URL      string // the broker to connect to
	Stream   string
	Consumer string
	// Group is the priority group (pinned).
	Group string
	// AckUpTo: the pinned child AckSyncs the messages up to this stream
	// sequence except Skip, acks nothing after it, and prints "done"
	// once it has handled it.
	AckUpTo uint64
	Skip    []uint64
	// MaxAckDelay: the key_shared child acks each message after a random
	// delay up to this (in order), so it holds several at once.
	MaxAckDelay time.Duration
}

// stampedOut writes whole lines to stdout, each ending with the wall
// clock in ns taken under the lock, so a process's lines are in time
// order. (Every process runs on this machine: one clock.)
type stampedOut struct{ mu sync.Mutex }

func (o *stampedOut) line(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(os.Stdout, format+" %d\n", append(args, time.Now().UnixNano())...)
}

func subsChildMain(raw string) int {
	var spec subsChildSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "subs child:", err)
		return 2
	}
	nc, err := nats.Connect(spec.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Timeout(5*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "subs child: connect:", err)
		return 2
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "subs child:", err)
		return 2
	}
	var cons jetstream.Consumer
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cons, err = js.Consumer(ctx, spec.Stream, spec.Consumer)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "subs child: consumer:", err)
			return 2
		}
		time.Sleep(100 * time.Millisecond) // pacing between retries
	}
	out := &stampedOut{}
	errs := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		out.line("note %s", strings.ReplaceAll(err.Error(), " ", "_"))
	})
	switch spec.Mode {
	case "pinned":
		err = pinnedChild(cons, spec, out, errs)
	case "keyshared":
		err = keySharedChild(cons, spec, out, errs)
	default:
		err = fmt.Errorf("unknown mode %q", spec.Mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "subs child:", err)
		return 2
	}
	out.line("ready")
	select {} // until killed
}

// pinnedChild consumes with priority group spec.Group and prints
//
//	recv SEQ DELIVERED PIN T  (PIN "-": no Nats-Pin-Id)
//	acked SEQ T       (its AckSync returned)
//	done T            (it handled spec.AckUpTo)
func pinnedChild(cons jetstream.Consumer, spec subsChildSpec, out *stampedOut, errs jetstream.PullConsumeOpt) error {
	_, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			out.line("note metadata:_%v", err)
			return
		}
		seq := md.Sequence.Stream
		pin := m.Headers().Get("Nats-Pin-Id")
		if pin == "" {
			pin = "-"
		}
		out.line("recv %d %d %s", seq, md.NumDelivered, pin)
		if seq <= spec.AckUpTo && !slices.Contains(spec.Skip, seq) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := m.DoubleAck(ctx)
			cancel()
			if err != nil {
				out.line("note acksync_%d:_%s", seq, strings.ReplaceAll(err.Error(), " ", "_"))
			} else {
				out.line("acked %d", seq)
			}
		}
		if seq == spec.AckUpTo && md.NumDelivered == 1 {
			out.line("done")
		}
	}, jetstream.PullPriorityGroup(spec.Group), jetstream.PullExpiry(time.Second), errs)
	return err
}

// keySharedChild consumes and acks every message, each after a random
// delay (acks in delivery order, by a second goroutine), and prints
//
//	recv SUBJECT SEQ DELIVERED T
//	ack SUBJECT SEQ T          (just before the ack is sent)
func keySharedChild(cons jetstream.Consumer, spec subsChildSpec, out *stampedOut, errs jetstream.PullConsumeOpt) error {
	type toAck struct {
		m   jetstream.Msg
		seq uint64
		due time.Time
	}
	acks := make(chan toAck, 1<<14)
	go func() {
		for a := range acks {
			time.Sleep(time.Until(a.due)) // simulated processing
			out.line("ack %s %d", a.m.Subject(), a.seq)
			if err := a.m.Ack(); err != nil {
				out.line("note ack_%d:_%s", a.seq, strings.ReplaceAll(err.Error(), " ", "_"))
			}
		}
	}()
	_, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			out.line("note metadata:_%v", err)
			return
		}
		out.line("recv %s %d %d", m.Subject(), md.Sequence.Stream, md.NumDelivered)
		acks <- toAck{m: m, seq: md.Sequence.Stream, due: time.Now().Add(rand.N(spec.MaxAckDelay + 1))}
	}, jetstream.PullMaxMessages(10), jetstream.PullExpiry(2*time.Second), errs)
	return err
}

// subsChild is a running child process and the lines it printed.
type subsChild struct {
	name   string
	cmd    *exec.Cmd
	stderr syncBuffer
	eof    chan struct{} // stdout closed
	once   sync.Once
	mu     sync.Mutex
	lines  []string
}

func startSubsChild(t *testing.T, name string, spec subsChildSpec) *subsChild {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := &subsChild{name: name, eof: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), subsChildEnv+"="+string(raw))
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.eof)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			ls := c.snapshot()
			t.Logf("--- child %s: %d lines, the last: %q; stderr:\n%s", name, len(ls), ls[max(0, len(ls)-20):], tail([]byte(c.stderr.String()), 3000))
		}
	})
	return c
}

// kill SIGKILLs the child and waits until all it printed has been read.
func (c *subsChild) kill() {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		<-c.eof
		_ = c.cmd.Wait()
	})
}

func (c *subsChild) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.lines)
}

// waitLine waits until the child printed a line whose first field is
// word, failing early if the child exits.
func (c *subsChild) waitLine(t *testing.T, word string, timeout time.Duration) time.Duration {
	t.Helper()
	return testutil.Eventually(t, c.name+" prints "+word, timeout, func() bool {
		for _, l := range c.snapshot() {
			if f := strings.Fields(l); len(f) > 0 && f[0] == word {
				return true
			}
		}
		select {
		case <-c.eof:
			t.Fatalf("child %s exited: %s", c.name, c.stderr.String())
		default:
		}
		return false
	})
}

// publishOne publishes until a PubAck arrives (the topic may still be
// getting its owner) and returns the stream sequence.
func publishOne(t *testing.T, js jetstream.JetStream, subject string, data []byte, msgID string) uint64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ack, err := js.Publish(ctx, subject, data, jetstream.WithMsgID(msgID))
		cancel()
		if err == nil {
			return ack.Sequence
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: %v", msgID, err)
		}
		time.Sleep(50 * time.Millisecond) // pacing between retries
	}
}

func consumerInfo(t *testing.T, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, name)
	if err != nil {
		t.Fatalf("consumer %s: %v", name, err)
	}
	return c.CachedInfo()
}

func pinOf(ci *jetstream.ConsumerInfo) string {
	if len(ci.PriorityGroups) != 1 {
		return "?"
	}
	return ci.PriorityGroups[0].PinnedClientID
}

// standbyDelivery is one message the in-process standby client got.
type standbyDelivery struct {
	seq, delivered uint64
	pin            string
	at             time.Time
}

// TestFailoverSubscriptionPinnedClientKilled: an Exclusive/Failover
// subscription (priority_policy pinned_client) whose pinned client, a
// separate process on b1, AckSyncs part of the stream and is SIGKILLed.
// The standby, here on b2, gets nothing while the pin lives (also for
// longer than priority_timeout, since the pinned client keeps pulling),
// then takes over with a new pin id from the first message the dead
// client left unacked, and receives every message it left; nothing it
// AckSync-ed is delivered again.
func TestFailoverSubscriptionPinnedClientKilled(t *testing.T) {
	const (
		stream, durable, group = "FAILOVER", "fo", "A"
		n                      = 100
		ackUpTo                = 40
		pinTTL                 = 3 * time.Second
		// ackWait is longer than the dead client's life (its acks plus
		// the hold below), so none of its unacked messages is redelivered
		// to it or to its last pull (which outlives it by up to 1 s).
		ackWait = 12 * time.Second
		hold    = pinTTL + time.Second
	)
	skip := []uint64{17, 18, 33} // left unacked: the first unacked is 17
	c := startJSCluster(t)
	b1, b2 := c.brokers["b1"].report.NATS, c.brokers["b2"].report.NATS
	_, js := jsConnect(t, b2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"fo.>"}}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for i := 1; i <= n; i++ {
		if seq := publishOne(t, js, "fo.x", body(i), "fo-"+strconv.Itoa(i)); seq != uint64(i) {
			t.Fatalf("message %d stored at seq %d", i, seq)
		}
	}
	t.Logf("%d messages published in %v", n, time.Since(began).Round(time.Millisecond))
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{group}, PinnedTTL: pinTTL,
	}); err != nil {
		t.Fatal(err)
	}

	// The pinned client: the first to pull, so it gets the pin.
	child := startSubsChild(t, "pinned", subsChildSpec{Mode: "pinned", URL: b1, Stream: stream, Consumer: durable,
		Group: group, AckUpTo: ackUpTo, Skip: skip})
	took := child.waitLine(t, "done", 60*time.Second)
	t.Logf("the pinned client (on b1) handled seqs 1..%d in %v", ackUpTo, took.Round(time.Millisecond))
	childPin := "-"
	for _, l := range child.snapshot() {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "recv" {
			childPin = f[3]
			break
		}
	}
	if childPin == "-" {
		ls := child.snapshot()
		t.Fatalf("the pinned client's deliveries carry no Nats-Pin-Id: %q", ls[:min(3, len(ls))])
	}
	if p := pinOf(consumerInfo(t, js, stream, durable)); p != childPin {
		t.Fatalf("CONSUMER.INFO pinned_client_id %q, the client saw %q", p, childPin)
	}

	// The standby, in this process on b2, with its own connection.
	_, sjs := jsConnect(t, b2)
	scons, err := sjs.Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	var (
		smu  sync.Mutex
		sgot []standbyDelivery
	)
	arrived := make(chan struct{}, 1<<12)
	var ackSyncsDone atomic.Int64 // the standby's AckSyncs answered (or failed)
	cc, err := scons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			t.Error(err)
			return
		}
		smu.Lock()
		sgot = append(sgot, standbyDelivery{md.Sequence.Stream, md.NumDelivered, m.Headers().Get("Nats-Pin-Id"), time.Now()})
		smu.Unlock()
		actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := m.DoubleAck(actx); err != nil {
			t.Errorf("standby AckSync of seq %d: %v", md.Sequence.Stream, err)
		}
		acancel()
		ackSyncsDone.Add(1)
		arrived <- struct{}{}
	}, jetstream.PullPriorityGroup(group), jetstream.PullExpiry(time.Second),
		jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	standby := func() []standbyDelivery {
		smu.Lock()
		defer smu.Unlock()
		return slices.Clone(sgot)
	}
	testutil.Eventually(t, "both clients' pulls waiting", 30*time.Second, func() bool {
		return consumerInfo(t, js, stream, durable).NumWaiting >= 2
	})
	// Nothing for the standby while the pinned client lives and pulls,
	// for longer than priority_timeout (an absence: it takes a wait).
	select {
	case <-arrived:
		t.Fatalf("the standby got %+v while the client was pinned", standby())
	case <-time.After(hold):
	}
	if p := pinOf(consumerInfo(t, js, stream, durable)); p != childPin {
		t.Fatalf("the pin moved to %q while its client pulled", p)
	}

	child.kill()
	killed := time.Now()
	acked := map[uint64]bool{}
	redeliveredToChild := 0
	for _, l := range child.snapshot() {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "acked":
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			acked[seq] = true
		case len(f) == 5 && f[0] == "recv":
			if f[2] != "1" {
				redeliveredToChild++
			}
			if f[3] != childPin {
				t.Errorf("the pinned client got a delivery with pin %q, not %q: %s", f[3], childPin, l)
			}
		}
	}
	if len(acked) != ackUpTo-len(skip) {
		t.Fatalf("the pinned client AckSync-ed %d messages, want %d", len(acked), ackUpTo-len(skip))
	}
	var left []uint64 // what the dead client did not ack, in order
	for seq := uint64(1); seq <= n; seq++ {
		if !acked[seq] {
			left = append(left, seq)
		}
	}
	t.Logf("SIGKILLed the pinned client; it AckSync-ed %d messages, left %d unacked from seq %d", len(acked), len(left), left[0])

	pinEnd := testutil.Eventually(t, "the dead client's pin ends", 30*time.Second, func() bool {
		return pinOf(consumerInfo(t, js, stream, durable)) != childPin
	})
	t.Logf("the pin ended %v after the kill (priority_timeout %v)", pinEnd.Round(time.Millisecond), pinTTL)
	testutil.Eventually(t, "the standby gets every message the dead client left", 60*time.Second, func() bool {
		seen := map[uint64]bool{}
		for _, d := range standby() {
			seen[d.seq] = true
		}
		return len(seen) >= len(left)
	})
	got := standby()
	t.Logf("the standby got its first message %v after the kill and the last of the %d %v after it (ack_wait %v)",
		got[0].at.Sub(killed).Round(time.Millisecond), len(left), got[len(got)-1].at.Sub(killed).Round(time.Millisecond), ackWait)
	newPin := got[0].pin
	if newPin == "" || newPin == childPin {
		t.Fatalf("the standby's first delivery has pin %q (the dead client's: %q)", newPin, childPin)
	}
	if redeliveredToChild > 0 {
		t.Logf("the client lived past ack_wait (%d redeliveries to it): not checking the standby's order", redeliveredToChild)
	} else if got[0].seq != left[0] {
		t.Errorf("the standby started at seq %d, want the first unacked, %d", got[0].seq, left[0])
	}
	var seqs []uint64
	for _, d := range got {
		seqs = append(seqs, d.seq)
		switch {
		case acked[d.seq]:
			t.Errorf("seq %d, AckSync-ed by the dead client, was delivered again", d.seq)
		case d.at.Before(killed):
			t.Errorf("the standby got seq %d before the pinned client died", d.seq)
		case d.pin != newPin:
			t.Errorf("the standby's seq %d has pin %q, its first had %q", d.seq, d.pin, newPin)
		case d.delivered < 2:
			t.Errorf("seq %d reached the standby as a first delivery; the dead client had them all", d.seq)
		}
	}
	if redeliveredToChild == 0 && !slices.Equal(seqs, left) {
		t.Errorf("the standby got %v; want each unacked seq once, lowest first: %v", seqs, left)
	}

	// New messages go to the new pin too.
	for i := n + 1; i <= n+10; i++ {
		publishOne(t, js, "fo.x", body(i), "fo-"+strconv.Itoa(i))
	}
	testutil.Eventually(t, "the standby gets the new messages", 30*time.Second, func() bool {
		return slices.ContainsFunc(standby(), func(d standbyDelivery) bool { return d.seq == n+10 })
	})
	for _, d := range standby()[len(got):] {
		if d.pin != newPin || d.seq <= n {
			t.Errorf("after the takeover the standby got seq %d (delivery %d) with pin %q; its pin is %q", d.seq, d.delivered, d.pin, newPin)
		}
	}
	var ci *jetstream.ConsumerInfo
	testutil.Eventually(t, "the consumer is fully acked", 30*time.Second, func() bool {
		ci = consumerInfo(t, js, stream, durable)
		return ci.AckFloor.Stream == n+10 && ci.NumAckPending == 0
	})
	if p := pinOf(ci); p != newPin {
		t.Errorf("CONSUMER.INFO pinned_client_id %q, want the standby's %q", p, newPin)
	}
	// The broker applies an AckSync before its answer reaches the client:
	// let the standby's last ones return before the test closes its
	// connection (they failed with "connection closed" otherwise).
	testutil.Eventually(t, "the standby's AckSyncs answered", 30*time.Second, func() bool {
		return ackSyncsDone.Load() == int64(len(standby()))
	})
}

// ksEvent is one line of a key_shared puller's log.
type ksEvent struct {
	puller    string
	ack       bool // an ack line (else a delivery)
	key       string
	seq       uint64
	delivered uint64
	at        int64 // wall clock, ns
}

// ksWindow is a time a puller held a key: from a delivery while it had
// none of the key unacked to the ack that left it none.
type ksWindow struct {
	puller     string
	start, end int64
	seqs       []uint64
}

// TestKeySharedThreePullerProcesses: a Key_Shared subscription pulled by
// three child processes (on b1, b2 and b1), each acking every message
// after a random delay, while the test publishes 1,500 messages over 30
// keys (the key is the subject: the stream does not capture its topic's
// subject). From the pullers' logs: every message is delivered and
// acked; per key, first deliveries come in stream order and the key is
// held by one puller at a time (the windows from a delivery to the ack
// that leaves a puller none of the key unacked never overlap across
// pullers); nothing is delivered twice except after ack_wait.
func TestKeySharedThreePullerProcesses(t *testing.T) {
	const (
		stream, durable = "KS", "ks"
		keys            = 30
		ackWait         = 2 * time.Second
		maxAckDelay     = 10 * time.Millisecond
	)
	n := scale(1500)
	c := startJSCluster(t)
	b1, b2 := c.brokers["b1"].report.NATS, c.brokers["b2"].report.NATS
	nc, js := jsConnect(t, b2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"ks.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		Metadata: map[string]string{"strata.subscription": "key_shared", "strata.key": "subject"},
	}); err != nil {
		t.Fatal(err)
	}
	pullers := map[string]*subsChild{}
	for i, url := range []string{b1, b2, b1} {
		name := fmt.Sprintf("p%d", i+1)
		pullers[name] = startSubsChild(t, name, subsChildSpec{Mode: "keyshared", URL: url, Stream: stream, Consumer: durable, MaxAckDelay: maxAckDelay})
	}
	for _, name := range []string{"p1", "p2", "p3"} {
		pullers[name].waitLine(t, "ready", 60*time.Second)
	}
	testutil.Eventually(t, "three pullers waiting", 30*time.Second, func() bool {
		return consumerInfo(t, js, stream, durable).NumWaiting >= 3
	})

	seed := time.Now().UnixNano()
	t.Logf("key seed %d", seed)
	began := time.Now()
	ksPublish(t, nc, js, n, keys, rand.New(rand.NewPCG(uint64(seed), 0)))
	t.Logf("%d messages published through b2 in %v", n, time.Since(began).Round(time.Millisecond))
	took := testutil.Eventually(t, "every message acked", 60*time.Second, func() bool {
		ci := consumerInfo(t, js, stream, durable)
		return ci.AckFloor.Stream == uint64(n) && ci.NumAckPending == 0 && ci.NumPending == 0
	})
	t.Logf("all acked %v after the last publish (%v after the first)", took.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	var events []ksEvent
	for _, name := range []string{"p1", "p2", "p3"} {
		p := pullers[name]
		p.kill()
		count := 0
		for _, l := range p.snapshot() {
			e, ok := parseKSEvent(name, l)
			if !ok {
				continue
			}
			if !e.ack {
				count++
			}
			events = append(events, e)
		}
		t.Logf("%s got %d deliveries", name, count)
		if count == 0 {
			t.Errorf("%s got no message: the keys were not shared", name)
		}
	}
	checkKeyShared(t, events, n, ackWait)
}

// ksPublish publishes n messages on "ks.kNN" (keys chosen by rng),
// pipelined, each with a Nats-Msg-Id so that a retry stores it once.
func ksPublish(t *testing.T, nc *nats.Conn, js jetstream.JetStream, n, keys int, rng *rand.Rand) {
	t.Helper()
	pjs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
	if err != nil {
		t.Fatal(err)
	}
	type sent struct {
		subject string
		f       jetstream.PubAckFuture
	}
	all := make([]sent, n)
	for i := range n {
		all[i].subject = fmt.Sprintf("ks.k%02d", rng.IntN(keys))
		all[i].f, _ = pjs.PublishAsync(all[i].subject, body(i), jetstream.WithMsgID("ks-"+strconv.Itoa(i)))
	}
	retried := 0
	for i, s := range all {
		ok := false
		if s.f != nil {
			select {
			case <-s.f.Ok():
				ok = true
			case <-s.f.Err():
			case <-time.After(30 * time.Second):
			}
		}
		if !ok {
			retried++
			publishOne(t, js, s.subject, body(i), "ks-"+strconv.Itoa(i))
		}
	}
	if retried > 0 {
		t.Logf("%d publishes retried", retried)
	}
}

// parseKSEvent reads "recv SUBJECT SEQ DELIVERED T" or "ack SUBJECT SEQ T".
func parseKSEvent(puller, line string) (ksEvent, bool) {
	f := strings.Fields(line)
	e := ksEvent{puller: puller}
	var err1, err2, err3 error
	switch {
	case len(f) == 5 && f[0] == "recv":
		e.key = f[1]
		e.seq, err1 = strconv.ParseUint(f[2], 10, 64)
		e.delivered, err2 = strconv.ParseUint(f[3], 10, 64)
		e.at, err3 = strconv.ParseInt(f[4], 10, 64)
	case len(f) == 4 && f[0] == "ack":
		e.ack, e.key = true, f[1]
		e.seq, err1 = strconv.ParseUint(f[2], 10, 64)
		e.at, err3 = strconv.ParseInt(f[3], 10, 64)
	default:
		return e, false
	}
	return e, err1 == nil && err2 == nil && err3 == nil
}

// ksReporter is the part of testing.T checkKeyShared uses (so that
// TestKeySharedThreePullerLogCheck can check the checker).
type ksReporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// checkKeyShared checks the Key_Shared rules on the merged logs (each
// puller's events in its own order) of seqs 1..n.
func checkKeyShared(t ksReporter, events []ksEvent, n int, ackWait time.Duration) {
	t.Helper()
	type seqState struct {
		deliveries []ksEvent
		acks       int
	}
	seqs := map[uint64]*seqState{}
	state := func(seq uint64) *seqState {
		if seqs[seq] == nil {
			seqs[seq] = &seqState{}
		}
		return seqs[seq]
	}
	// Windows, per puller and key, from the puller's own order.
	windows := map[string][]ksWindow{}
	open := map[[2]string]*ksWindow{}
	unacked := map[[2]string]int{}
	for _, e := range events {
		pk := [2]string{e.puller, e.key}
		if e.ack {
			state(e.seq).acks++
			if unacked[pk] == 0 {
				t.Errorf("%s acked seq %d of key %s it did not hold", e.puller, e.seq, e.key)
				continue
			}
			if unacked[pk]--; unacked[pk] == 0 {
				open[pk].end = e.at
				windows[e.key] = append(windows[e.key], *open[pk])
				delete(open, pk)
			}
			continue
		}
		s := state(e.seq)
		s.deliveries = append(s.deliveries, e)
		if unacked[pk] == 0 {
			open[pk] = &ksWindow{puller: e.puller, start: e.at}
		}
		unacked[pk]++
		open[pk].seqs = append(open[pk].seqs, e.seq)
	}
	for pk, w := range open {
		t.Errorf("%s still holds key %s (seqs %v) at the end", pk[0], pk[1], w.seqs)
	}

	// Every message delivered once, and again only after ack_wait.
	redelivered := map[uint64]bool{}
	for seq := uint64(1); seq <= uint64(n); seq++ {
		s := seqs[seq]
		if s == nil {
			t.Errorf("seq %d was never delivered", seq)
			continue
		}
		if s.acks == 0 {
			t.Errorf("seq %d was never acked", seq)
		}
		sort.Slice(s.deliveries, func(i, j int) bool { return s.deliveries[i].at < s.deliveries[j].at })
		for i, d := range s.deliveries {
			if d.delivered != uint64(i+1) {
				t.Errorf("seq %d: delivery %d says it is delivery %d (%+v)", seq, i+1, d.delivered, s.deliveries)
				break
			}
			if i > 0 {
				redelivered[seq] = true
				if gap := time.Duration(d.at - s.deliveries[i-1].at); gap < ackWait/2 {
					t.Errorf("seq %d redelivered %v after its previous delivery (ack_wait %v)", seq, gap, ackWait)
				}
			}
		}
	}
	if len(seqs) != n {
		t.Errorf("deliveries of %d distinct seqs, want %d", len(seqs), n)
	}

	// Per key: first deliveries in stream order, one holder at a time.
	byKey := map[string][]ksEvent{}
	for _, e := range events {
		if !e.ack && e.delivered == 1 {
			byKey[e.key] = append(byKey[e.key], e)
		}
	}
	moves, overlapsAfterAckWait := 0, 0
	for key, ds := range byKey {
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].at < ds[j].at })
		for i := 1; i < len(ds); i++ {
			if ds[i].seq <= ds[i-1].seq {
				t.Errorf("key %s: seq %d (at %s) delivered after seq %d (at %s)", key, ds[i].seq, ds[i].puller, ds[i-1].seq, ds[i-1].puller)
			}
		}
		ws := windows[key]
		sort.Slice(ws, func(i, j int) bool { return ws[i].start < ws[j].start })
		latest := map[string]ksWindow{} // each puller's latest hold (its holds are disjoint)
		for i, w := range ws {
			if i > 0 && ws[i-1].puller != w.puller {
				moves++
			}
			for q, prev := range latest {
				if q == w.puller || w.start > prev.end {
					continue
				}
				// A key is free again once its deliveries' ack_wait ends.
				if slices.ContainsFunc(prev.seqs, func(s uint64) bool { return redelivered[s] }) {
					overlapsAfterAckWait++
					continue
				}
				t.Errorf("key %s held by %s (seqs %v, until %d) and by %s (seqs %v, from %d) at once",
					key, prev.puller, prev.seqs, prev.end, w.puller, w.seqs, w.start)
			}
			latest[w.puller] = w
		}
	}
	if len(byKey) == 0 {
		t.Errorf("no deliveries logged")
		return
	}
	t.Logf("%d keys; they moved between pullers %d times; %d redelivered seqs (ack_wait passed); %d holds that overlapped after an ack_wait",
		len(byKey), moves, len(redelivered), overlapsAfterAckWait)
}

// ksRecorder collects what checkKeyShared reports.
type ksRecorder struct{ errs []string }

func (r *ksRecorder) Helper()                   {}
func (r *ksRecorder) Logf(string, ...any)       {}
func (r *ksRecorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

// TestKeySharedThreePullerLogCheck feeds checkKeyShared made-up logs (no
// processes): a valid one passes, and each kind of violation is reported.
func TestKeySharedThreePullerLogCheck(t *testing.T) {
	recv := func(p, key string, seq, delivered uint64, at int64) ksEvent {
		return ksEvent{puller: p, key: key, seq: seq, delivered: delivered, at: at}
	}
	ack := func(p, key string, seq uint64, at int64) ksEvent {
		return ksEvent{puller: p, ack: true, key: key, seq: seq, at: at}
	}
	const s = int64(time.Second)
	// p1 holds a (1, 2) and hands it on after its acks; p2 holds b (3).
	valid := []ksEvent{
		recv("p1", "a", 1, 1, 10), recv("p1", "a", 2, 1, 11), ack("p1", "a", 1, 12), ack("p1", "a", 2, 13),
		recv("p2", "b", 3, 1, 10), ack("p2", "b", 3, 14),
		recv("p3", "a", 4, 1, 20), ack("p3", "a", 4, 21),
	}
	more := func(es ...ksEvent) []ksEvent { return append(slices.Clone(valid), es...) }
	for _, tc := range []struct {
		name   string
		n      int // seqs 1..n were published
		events []ksEvent
		want   string // in some reported problem; "" for none
	}{
		{"valid", 4, valid, ""},
		{"held by two", 5, more(recv("p2", "a", 5, 1, 12), ack("p2", "a", 5, 30)), "at once"},
		{"out of order", 5, more(recv("p3", "a", 5, 1, 15), ack("p3", "a", 5, 16)), "delivered after"},
		{"never acked", 5, more(recv("p3", "c", 5, 1, 40)), "still holds"},
		{"twice", 5, more(recv("p3", "c", 5, 1, 40), ack("p3", "c", 5, 41), recv("p2", "c", 5, 1, 42), ack("p2", "c", 5, 43)), "says it is delivery"},
		{"early redelivery", 5, more(recv("p3", "c", 5, 1, 40), ack("p3", "c", 5, 41), recv("p3", "c", 5, 2, 42), ack("p3", "c", 5, 43)), "redelivered"},
		{"redelivery after ack_wait", 5, more(recv("p3", "c", 5, 1, 40), recv("p3", "c", 5, 2, 40+2*s), ack("p3", "c", 5, 41+2*s), ack("p3", "c", 5, 42+2*s)), ""},
		{"missing", 4, valid[:6], "never delivered"},
	} {
		r := &ksRecorder{}
		checkKeyShared(r, tc.events, tc.n, 2*time.Second)
		switch found := slices.ContainsFunc(r.errs, func(e string) bool { return tc.want != "" && strings.Contains(e, tc.want) }); {
		case tc.want == "" && len(r.errs) > 0:
			t.Errorf("%s: reported %q", tc.name, r.errs)
		case tc.want != "" && !found:
			t.Errorf("%s: want a problem with %q, got %q", tc.name, tc.want, r.errs)
		}
	}
}
