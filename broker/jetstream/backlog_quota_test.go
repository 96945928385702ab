package jetstream_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/quota"
)

// Backlog quotas (backlog.go). Messages are 200 bytes of payload on
// "demo.<ns>.t": about 225 bytes stored, so a 1000-byte quota is within
// for 4 of them and over with 5.

const bqLimit = 1000

var bqPayload = bytes.Repeat([]byte("x"), 200)

// bqHold is the hold bound of these tests.
const bqHold = 1500 * time.Millisecond

// storageFullQuotas is a tenant quota gate whose storage quota a test fills and
// frees; everything else is admitted.
type storageFullQuotas struct{ full atomic.Bool }

func (q *storageFullQuotas) AdmitPublish(string, int) error { return nil }

func (q *storageFullQuotas) Check(tenant string, k quota.Kind, n float64) error {
	if k == quota.Storage && q.full.Load() {
		return &quota.Refusal{Tenant: tenant, Kind: quota.Storage, Limit: 4096, Use: 4096}
	}
	return nil
}

func (q *storageFullQuotas) SetUse(string, quota.Kind, float64) {}

// backlogRegion is one broker whose tenant demo has the namespaces nss
// (besides "streams"), checking backlogs every 50 ms.
func backlogRegion(t *testing.T, nss map[string]jetstream.Namespace, q jetstream.Quotas) (*strataRegion, natsjs.JetStream) {
	t.Helper()
	pol := jetstream.StaticPolicies{"demo": {"streams": {AutoCreateTopics: true}}}
	for k, v := range nss {
		v.AutoCreateTopics = true
		pol["demo"][k] = v
	}
	r := newStrataRegion(t, 1, func(c *jetstream.Config) {
		c.Policies = pol
		c.Backlog = jetstream.BacklogConfig{Check: 50 * time.Millisecond, Hold: bqHold}
		if q != nil {
			c.Quotas = q
		}
	})
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return r, js
}

func bqName(ns string) tenancy.Name { return tenancy.Name{Tenant: "demo", Namespace: ns, Topic: "t"} }

func bqPublish(t *testing.T, js natsjs.JetStream, ns string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := js.Publish(testCtx(t), "demo."+ns+".t", bqPayload); err != nil {
			t.Fatalf("publish %d on %s: %v", i, ns, err)
		}
	}
}

// waitRounds waits until topic n's backlog has been measured twice more
// (so whatever the last change causes has been seen).
func waitRounds(t *testing.T, svc *jetstream.Service, n tenancy.Name) {
	t.Helper()
	r0 := svc.BacklogChecks(n)
	testutil.Eventually(t, "two more backlog rounds", 10*time.Second, func() bool { return svc.BacklogChecks(n) >= r0+2 })
}

func waitVerdict(t *testing.T, svc *jetstream.Service, n tenancy.Name, over bool) string {
	t.Helper()
	var v string
	testutil.Eventually(t, fmt.Sprintf("topic %s over its backlog quota: %v", n, over), 10*time.Second, func() bool {
		v = svc.BacklogVerdict(n)
		return (v != "") == over
	})
	return v
}

// bqDrain fetches and acknowledges every message the consumer has (at
// most max), returning their stream sequences.
func bqDrain(t *testing.T, c natsjs.Consumer, max int) []uint64 {
	t.Helper()
	var seqs []uint64
	for len(seqs) < max {
		b, err := c.FetchNoWait(max)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range b.Messages() {
			md, _ := m.Metadata()
			seqs = append(seqs, md.Sequence.Stream)
			if err := m.DoubleAck(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			got++
		}
		if got == 0 {
			break
		}
	}
	return seqs
}

func wantQuotaRefusal(t *testing.T, err error, parts ...string) {
	t.Helper()
	var apiErr *natsjs.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10429 {
		t.Fatalf("got %v, want JetStream error 10429", err)
	}
	for _, p := range parts {
		if !strings.Contains(apiErr.Description, p) {
			t.Fatalf("refusal %q does not say %q", apiErr.Description, p)
		}
	}
}

// TestBacklogQuotaException: a subscription over the size bound makes
// the topic refuse publishes with 10429 naming everything a client needs;
// once it catches up, publishes are stored again.
func TestBacklogQuotaException(t *testing.T) {
	r, js := backlogRegion(t, map[string]jetstream.Namespace{
		"bqx": {BacklogQuota: &jetstream.BacklogQuota{Size: bqLimit, Policy: tenancy.BacklogReject}},
	}, nil)
	svc, name := r.brokers[0].js, bqName("bqx")
	if _, err := svc.CreateTopic(testCtx(t), name); err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(testCtx(t), "bqx:t", natsjs.ConsumerConfig{Durable: "slow", AckPolicy: natsjs.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	bqPublish(t, js, "bqx", 5) // over only once the fifth is stored
	waitVerdict(t, svc, name, true)
	_, err = js.Publish(testCtx(t), "demo.bqx.t", bqPayload)
	wantQuotaRefusal(t, err, `tenant "demo" namespace "bqx" topic "t": subscription "slow" is over its backlog_quota size limit: limit 1000 bytes, backlog `,
		"(policy producer_exception)")
	if got := bqDrain(t, c, 10); len(got) != 5 {
		t.Fatalf("the subscription read %v: want the 5 stored, not the refused one", got)
	}
	waitVerdict(t, svc, name, false)
	bqPublish(t, js, "bqx", 1)
}

// TestBacklogQuotaHold: over the quota, publishes are held (in order,
// behind each other) and stored once the subscription catches up; one
// held past the bound is refused.
func TestBacklogQuotaHold(t *testing.T) {
	r, js := backlogRegion(t, map[string]jetstream.Namespace{
		"bqh": {BacklogQuota: &jetstream.BacklogQuota{Size: bqLimit, Policy: tenancy.BacklogHold}},
	}, nil)
	svc, name := r.brokers[0].js, bqName("bqh")
	if _, err := svc.CreateTopic(testCtx(t), name); err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(testCtx(t), "bqh:t", natsjs.ConsumerConfig{Durable: "slow", AckPolicy: natsjs.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	bqPublish(t, js, "bqh", 5)
	waitVerdict(t, svc, name, true)
	var futs []natsjs.PubAckFuture
	for i := 0; i < 3; i++ {
		f, err := js.PublishAsync("demo.bqh.t", fmt.Appendf(nil, "held-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	testutil.Eventually(t, "3 publishes held", 10*time.Second, func() bool { return svc.HeldPublishes(name) == 3 })
	for i, f := range futs {
		select {
		case <-f.Ok():
			t.Fatalf("held publish %d answered while held", i)
		case err := <-f.Err():
			t.Fatalf("held publish %d refused while within its hold: %v", i, err)
		default:
		}
	}
	if got := bqDrain(t, c, 5); len(got) != 5 {
		t.Fatalf("the subscription read %v, want the 5 stored before the hold", got)
	}
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			if ack.Sequence != uint64(6+i) {
				t.Fatalf("held publish %d stored at %d, want %d (publish order)", i, ack.Sequence, 6+i)
			}
		case err := <-f.Err():
			t.Fatalf("held publish %d: %v", i, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("held publish %d never answered", i)
		}
	}
	if got := bqDrain(t, c, 5); len(got) != 3 || got[0] != 6 {
		t.Fatalf("after the hold the subscription read %v, want 6-8", got)
	}

	// The bound: nobody reads, so a held publish is refused after it.
	bqPublish(t, js, "bqh", 5)
	waitVerdict(t, svc, name, true)
	f, err := js.PublishAsync("demo.bqh.t", []byte("late"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ack := <-f.Ok():
		t.Fatalf("stored at %d while the subscription stayed over", ack.Sequence)
	case err := <-f.Err():
		wantQuotaRefusal(t, err, `subscription "slow" is over its backlog_quota size limit`, "(policy producer_request_hold: held 1.5s, then refused)")
	case <-time.After(10 * time.Second):
		t.Fatal("held publish never answered")
	}
	if n := svc.HeldPublishes(name); n != 0 {
		t.Fatalf("%d publishes still held", n)
	}
}

// TestBacklogQuotaEviction: under consumer_backlog_eviction producers
// are never refused; the subscription's oldest messages are acknowledged
// for it until it is within the quota.
func TestBacklogQuotaEviction(t *testing.T) {
	r, js := backlogRegion(t, map[string]jetstream.Namespace{
		"bqe": {BacklogQuota: &jetstream.BacklogQuota{Size: bqLimit, Policy: tenancy.BacklogEvictOld}},
	}, nil)
	svc, name := r.brokers[0].js, bqName("bqe")
	if _, err := svc.CreateTopic(testCtx(t), name); err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(testCtx(t), "bqe:t", natsjs.ConsumerConfig{Durable: "slow", AckPolicy: natsjs.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	bqPublish(t, js, "bqe", 20) // never refused
	testutil.Eventually(t, "the oldest messages evicted", 10*time.Second, func() bool {
		info, err := c.Info(testCtx(t))
		return err == nil && info.AckFloor.Stream >= 16
	})
	waitRounds(t, svc, name)
	if v := svc.BacklogVerdict(name); v != "" {
		t.Fatalf("eviction set a producer verdict: %s", v)
	}
	got := bqDrain(t, c, 20)
	if len(got) == 0 || len(got) > 4 || got[len(got)-1] != 20 {
		t.Fatalf("after eviction the subscription read %v, want at most the newest 4 (quota 1000 bytes)", got)
	}
}

// TestBacklogQuotaRewind: the rewind rule. A subscription created on
// existing data, or reset to the first message, counts only what is
// published after that toward its backlog: replaying never refuses
// producers nor is evicted, new messages count, and once it catches up
// it counts fully again.
func TestBacklogQuotaRewind(t *testing.T) {
	r, js := backlogRegion(t, map[string]jetstream.Namespace{
		"bqr": {BacklogQuota: &jetstream.BacklogQuota{Size: bqLimit, Policy: tenancy.BacklogReject}},
		"bqe": {BacklogQuota: &jetstream.BacklogQuota{Size: bqLimit, Policy: tenancy.BacklogEvictOld}},
	}, nil)
	svc, name := r.brokers[0].js, bqName("bqr")
	bqPublish(t, js, "bqr", 10) // history: 2250 bytes, no subscription yet
	c, err := js.CreateOrUpdateConsumer(testCtx(t), "bqr:t", natsjs.ConsumerConfig{
		Durable: "replay", AckPolicy: natsjs.AckExplicitPolicy, DeliverPolicy: natsjs.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	waitRounds(t, svc, name)
	bqPublish(t, js, "bqr", 3) // 3 new ones: within
	waitRounds(t, svc, name)
	if v := svc.BacklogVerdict(name); v != "" {
		t.Fatalf("replaying history refused producers: %s", v)
	}
	// Half caught up, then reset to the first message (an admin reset).
	if got := bqDrain(t, c, 5); len(got) != 5 {
		t.Fatalf("read %v", got)
	}
	if err := svc.PutSubscription(testCtx(t), name, "replay", jetstream.SubscriptionRequest{ResetTo: &jetstream.ResetTo{Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	bqPublish(t, js, "bqr", 4) // 4 after the reset: within
	waitRounds(t, svc, name)
	if v := svc.BacklogVerdict(name); v != "" {
		t.Fatalf("a reset subscription's history refused producers: %s", v)
	}
	bqPublish(t, js, "bqr", 1) // the fifth after the reset: over
	v := waitVerdict(t, svc, name, true)
	if !strings.Contains(v, `subscription "replay"`) {
		t.Fatalf("verdict %q", v)
	}
	c, err = js.Consumer(testCtx(t), "bqr:t", "replay")
	if err != nil {
		t.Fatal(err)
	}
	if got := bqDrain(t, c, 30); len(got) != 18 || got[0] != 1 {
		t.Fatalf("the reset subscription read %v, want 1-18", got)
	}
	waitVerdict(t, svc, name, false)
	// Caught up past the reset point: it counts fully again.
	bqPublish(t, js, "bqr", 5)
	waitVerdict(t, svc, name, true)

	// Under eviction, a replaying subscription keeps its history; what
	// is evicted is the oldest of what it counts, the new messages.
	en := bqName("bqe")
	bqPublish(t, js, "bqe", 10)
	ec, err := js.CreateOrUpdateConsumer(testCtx(t), "bqe:t", natsjs.ConsumerConfig{Durable: "replay", AckPolicy: natsjs.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	bqPublish(t, js, "bqe", 20) // 11-30: about 4500 bytes counted
	testutil.Eventually(t, "the oldest new messages evicted", 10*time.Second, func() bool {
		info, err := ec.Info(testCtx(t))
		return err == nil && info.NumPending <= 10+4 // the history and at most the newest 4
	})
	waitRounds(t, svc, en)
	got := bqDrain(t, ec, 40)
	if len(got) < 11 || len(got) > 14 || got[0] != 1 || got[9] != 10 || got[10] < 27 || got[len(got)-1] != 30 {
		t.Fatalf("the replaying subscription read %v, want its history 1-10, then at most the newest 4", got)
	}
}

// TestBacklogQuotaAge: an ephemeral consumer's oldest unacknowledged
// message older than the age bound refuses publishes, naming the bound.
func TestBacklogQuotaAge(t *testing.T) {
	r, js := backlogRegion(t, map[string]jetstream.Namespace{
		"bqa": {BacklogQuota: &jetstream.BacklogQuota{Age: 300 * time.Millisecond, Policy: tenancy.BacklogReject}},
	}, nil)
	svc, name := r.brokers[0].js, bqName("bqa")
	if _, err := svc.CreateTopic(testCtx(t), name); err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateConsumer(testCtx(t), "bqa:t", natsjs.ConsumerConfig{AckPolicy: natsjs.AckExplicitPolicy, InactiveThreshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	bqPublish(t, js, "bqa", 1)
	waitVerdict(t, svc, name, true)
	_, err = js.Publish(testCtx(t), "demo.bqa.t", bqPayload)
	wantQuotaRefusal(t, err, "is over its backlog_quota age limit: limit 300ms, oldest unacknowledged message ")
	if got := bqDrain(t, c, 5); len(got) != 1 {
		t.Fatalf("read %v", got)
	}
	waitVerdict(t, svc, name, false)
	bqPublish(t, js, "bqa", 1)
}

// TestStorageQuotaHold: a publish the storage quota refuses is held when
// the namespace's backlog policy is producer_request_hold, publishes
// after it wait behind it, both are stored in order once the quota
// allows, and one held past the bound gets the storage refusal. Under
// another policy it is not held.
func TestStorageQuotaHold(t *testing.T) {
	q := &storageFullQuotas{}
	r, js := backlogRegion(t, map[string]jetstream.Namespace{
		"bqs": {BacklogQuota: &jetstream.BacklogQuota{Size: 1 << 30, Policy: tenancy.BacklogHold}},
		"bqx": {BacklogQuota: &jetstream.BacklogQuota{Size: 1 << 30, Policy: tenancy.BacklogReject}},
	}, q)
	svc, name := r.brokers[0].js, bqName("bqs")
	bqPublish(t, js, "bqs", 1)
	bqPublish(t, js, "bqx", 1)
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	inbox := nats.NewInbox()
	replies, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	q.full.Store(true)
	refusal := fmt.Errorf("admission: %w", &quota.Refusal{Tenant: "demo", Kind: quota.Storage, Limit: 4096, Use: 4096})
	if svc.StorageRefused(bqName("bqx"), "demo.bqx.t", inbox, []byte("x"), refusal) {
		t.Fatal("held under producer_exception")
	}
	if svc.StorageRefused(name, "demo.bqs.t", inbox, []byte("x"), &quota.Refusal{Tenant: "demo", Kind: quota.PublishRate}) {
		t.Fatal("a rate refusal held")
	}
	if !svc.StorageRefused(name, "demo.bqs.t", inbox, []byte("first"), refusal) {
		t.Fatal("not held")
	}
	f, err := js.PublishAsync("demo.bqs.t", []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "both publishes held", 10*time.Second, func() bool { return svc.HeldPublishes(name) == 2 })
	q.full.Store(false)
	msg, err := replies.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ack struct {
		Seq   uint64          `json:"seq"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &ack); err != nil || ack.Seq != 2 || ack.Error != nil {
		t.Fatalf("first held publish answered %s, want seq 2", msg.Data)
	}
	select {
	case a := <-f.Ok():
		if a.Sequence != 3 {
			t.Fatalf("second stored at %d, want 3", a.Sequence)
		}
	case err := <-f.Err():
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("second never answered")
	}

	// The bound.
	q.full.Store(true)
	if !svc.StorageRefused(name, "demo.bqs.t", inbox, []byte("late"), refusal) {
		t.Fatal("not held")
	}
	msg, err = replies.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var nack struct {
		Error natsjs.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &nack); err != nil || nack.Error.ErrorCode != 10429 ||
		!strings.Contains(nack.Error.Description, `tenant "demo" is over its storage quota`) ||
		!strings.Contains(nack.Error.Description, "held 1.5s under namespace demo/bqs's backlog_quota policy producer_request_hold") {
		t.Fatalf("held publish past the bound answered %s", msg.Data)
	}
}

// TestBacklogQuotaReplicatorExempt: a replicated namespace whose remote
// region is down: its replicator cursor's backlog grows far past the
// quota, and producers are neither refused nor held.
func TestBacklogQuotaReplicatorExempt(t *testing.T) {
	pol := jetstream.StaticPolicies{"demo": {
		"streams": {AutoCreateTopics: true},
		"geo": {AutoCreateTopics: true, Replication: []string{"r1", "r2"},
			BacklogQuota: &jetstream.BacklogQuota{Size: bqLimit, Policy: tenancy.BacklogReject}},
	}}
	r := newStrataRegion(t, 1, func(c *jetstream.Config) {
		c.Policies = pol
		c.Region = "r1"
		c.RemoteBrokers = func(string) []string { return []string{"nats://127.0.0.1:1"} } // down
		c.Backlog = jetstream.BacklogConfig{Check: 50 * time.Millisecond}
	})
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := natsjs.New(nc)
	svc, name := r.brokers[0].js, bqName("geo")
	if _, err := svc.CreateTopic(testCtx(t), name); err != nil {
		t.Fatal(err)
	}
	c, err := js.CreateOrUpdateConsumer(testCtx(t), "geo:t", natsjs.ConsumerConfig{Durable: "reader", AckPolicy: natsjs.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // the subscription keeps up
		bqPublish(t, js, "geo", 1)
		if got := bqDrain(t, c, 1); len(got) != 1 {
			t.Fatalf("read %v", got)
		}
	}
	testutil.Eventually(t, "the replicator cursor's backlog past the quota", 10*time.Second, func() bool {
		for _, rs := range svc.Replication() {
			if rs.Topic == name.String() && rs.LagMsgs == 20 && rs.LagBytes > 4*bqLimit {
				return true
			}
		}
		return false
	})
	waitRounds(t, svc, name)
	if v := svc.BacklogVerdict(name); v != "" {
		t.Fatalf("the replicator cursor's backlog refuses producers: %s", v)
	}
	bqPublish(t, js, "geo", 5)
	if n := svc.HeldPublishes(name); n != 0 {
		t.Fatalf("%d publishes held", n)
	}
}
