package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker"
	strata "github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy/quota"
)

// fakeQuotas is a jetstream.Quotas for tests: it refuses the publishes
// of the tenants in refusePub and the Checks of the (tenant, kind) pairs
// in refuse, and records every call and the last use reported.
type fakeQuotas struct {
	mu        sync.Mutex
	refusePub map[string]bool
	refuse    map[string]map[quota.Kind]bool
	admitted  map[string][]int               // tenant → sizes charged
	checked   map[string][quota.NumKinds]int // tenant → Check calls per kind
	use       map[string][quota.NumKinds]float64
}

func newFakeQuotas() *fakeQuotas {
	return &fakeQuotas{refusePub: map[string]bool{}, refuse: map[string]map[quota.Kind]bool{},
		admitted: map[string][]int{}, checked: map[string][quota.NumKinds]int{}, use: map[string][quota.NumKinds]float64{}}
}

func (f *fakeQuotas) AdmitPublish(tenant string, size int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admitted[tenant] = append(f.admitted[tenant], size)
	if f.refusePub[tenant] {
		return &quota.Refusal{Tenant: tenant, Kind: quota.PublishRate, Limit: 10, Use: 12}
	}
	return nil
}

func (f *fakeQuotas) Check(tenant string, k quota.Kind, n float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.checked[tenant]
	c[k]++
	f.checked[tenant] = c
	if f.refuse[tenant][k] {
		return &quota.Refusal{Tenant: tenant, Kind: k, Limit: 2, Use: 2}
	}
	return nil
}

func (f *fakeQuotas) SetUse(tenant string, k quota.Kind, v float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.use[tenant]
	u[k] = v
	f.use[tenant] = u
}

func (f *fakeQuotas) set(tenant string, k quota.Kind, refused bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse[tenant] == nil {
		f.refuse[tenant] = map[quota.Kind]bool{}
	}
	f.refuse[tenant][k] = refused
}

func (f *fakeQuotas) setPub(tenant string, refused bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusePub[tenant] = refused
}

func (f *fakeQuotas) charged(tenant string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.admitted[tenant])
}

func (f *fakeQuotas) checks(tenant string, k quota.Kind) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checked[tenant][k]
}

func (f *fakeQuotas) usage(tenant string) [quota.NumKinds]float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.use[tenant]
}

// wantQuotaError fails unless err is JetStream error 10429 (HTTP 429)
// whose description names tenant demo's quota k.
func wantQuotaError(t *testing.T, what string, err error, k quota.Kind) {
	t.Helper()
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("%s: %v; want JetStream error 10429", what, err)
	}
	want := `tenant "demo" is over its ` + k.String() + ` quota`
	if apiErr.ErrorCode != 10429 || apiErr.Code != 429 || !strings.Contains(apiErr.Description, want) {
		t.Fatalf("%s: %+v; want err_code 10429, code 429 and a description containing %q", what, apiErr, want)
	}
}

func quotaJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A JetStream publish refused by its tenant's publish quota, or by its
// storage quota, gets the 10429 PubAck with the refusal and nothing is
// stored; a publish refused for storage was charged once to the
// publish rate (at the front door, before the owner checks storage). The stream goes on taking publishes once the quota allows.
func TestQuotaJetStreamPublishRefused(t *testing.T) {
	fq := newFakeQuotas()
	r := newStrataRegion(t, 1, func(c *strata.Config) { c.Quotas = fq })
	js := quotaJS(t, r.brokers[0].url())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack, err := js.Publish(ctx, "demo.events.orders", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := func() uint64 {
		t.Helper()
		s, err := js.Stream(ctx, ack.Stream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().State.Msgs
	}
	if got := fq.charged("demo"); got != 1 {
		t.Fatalf("%d publishes charged, want 1", got)
	}

	fq.setPub("demo", true)
	_, err = js.Publish(ctx, "demo.events.orders", []byte("refused"))
	wantQuotaError(t, "publish over the publish quota", err, quota.PublishRate)
	if n := msgs(); n != 1 {
		t.Fatalf("stream holds %d messages after a refused publish, want 1", n)
	}
	fq.setPub("demo", false)

	fq.set("demo", quota.Storage, true)
	before := fq.charged("demo")
	_, err = js.Publish(ctx, "demo.events.orders", []byte("refused"))
	wantQuotaError(t, "publish over the storage quota", err, quota.Storage)
	if n := msgs(); n != 1 {
		t.Fatalf("stream holds %d messages after a refused publish, want 1", n)
	}
	// The rate is charged at the front door, before the owner checks
	// storage: the refused publish was charged once.
	if got := fq.charged("demo"); got != before+1 {
		t.Fatalf("a publish refused for storage: %d charges, want %d", got, before+1)
	}
	fq.set("demo", quota.Storage, false)

	ack, err = js.Publish(ctx, "demo.events.orders", []byte("second"))
	if err != nil || ack.Sequence != 2 {
		t.Fatalf("publish after the quota allows: %+v, %v; want seq 2", ack, err)
	}
	if n := msgs(); n != 2 {
		t.Fatalf("stream holds %d messages, want 2", n)
	}
}

// Creating a topic (STREAM.CREATE, or a publish into a namespace that
// auto-creates topics) or a consumer past the tenant's count quota gets
// 10429 and creates nothing.
func TestQuotaJetStreamCreationsRefused(t *testing.T) {
	fq := newFakeQuotas()
	r := newStrataRegion(t, 1, func(c *strata.Config) { c.Quotas = fq })
	b := r.brokers[0]
	js := quotaJS(t, b.url())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	fq.set("demo", quota.Topics, true)
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}})
	wantQuotaError(t, "stream create", err, quota.Topics)
	if _, err := js.Stream(ctx, "orders"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream info after a refused create: %v; want not found", err)
	}
	_, err = js.Publish(ctx, "demo.events.auto", []byte("x"))
	wantQuotaError(t, "auto-creating publish", err, quota.Topics)
	if got := b.js.Topics("demo", ""); len(got) != 0 {
		t.Fatalf("topics after refused creations: %+v", got)
	}
	if got := fq.charged("demo"); got != 0 {
		t.Fatalf("%d publishes charged; a refused auto-create stores nothing", got)
	}
	fq.set("demo", quota.Topics, false)

	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	fq.set("demo", quota.Consumers, true)
	_, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c1", AckPolicy: jetstream.AckExplicitPolicy})
	wantQuotaError(t, "consumer create", err, quota.Consumers)
	if names := consumerNames(ctx, t, s); len(names) != 0 {
		t.Fatalf("consumers after a refused create: %v", names)
	}
	fq.set("demo", quota.Consumers, false)
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c1", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	// Updating an existing consumer creates none: not checked.
	fq.set("demo", quota.Consumers, true)
	checks := fq.checks("demo", quota.Consumers)
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "c1", AckPolicy: jetstream.AckExplicitPolicy, Description: "updated"}); err != nil {
		t.Fatalf("updating a consumer under a full consumer quota: %v", err)
	}
	if got := fq.checks("demo", quota.Consumers); got != checks {
		t.Fatal("updating a consumer was checked against the consumer quota")
	}
}

func consumerNames(ctx context.Context, t *testing.T, s jetstream.Stream) []string {
	t.Helper()
	l := s.ConsumerNames(ctx)
	var out []string
	for n := range l.Name() {
		out = append(out, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The broker reports, per tenant, the topics it owns, their consumers and
// the bytes they store; deleting a consumer and purging a stream lower
// them, and a broker that stops reports zero.
func TestQuotaJetStreamSetUse(t *testing.T) {
	fq := newFakeQuotas()
	r := newStrataRegion(t, 1, func(c *strata.Config) { c.Quotas = fq })
	js := quotaJS(t, r.brokers[0].url())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1000)
	for range 5 {
		if _, err := js.Publish(ctx, "orders.new", payload); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "demo.events.auto", payload); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c1", "c2"} {
		if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute}); err != nil { // ephemeral: counts too
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() float64 { return fq.usage("demo")[quota.Storage] }
	testutil.Eventually(t, "use reported", 10*time.Second, func() bool {
		u := fq.usage("demo")
		return u[quota.Topics] == 2 && u[quota.Consumers] == 3 && u[quota.Storage] >= float64(info.State.Bytes+1000)
	})
	if u := fq.usage("demo"); u[quota.Storage] > float64(6*(1000+200)) {
		t.Fatalf("storage %v for 6 messages of 1000 bytes", u[quota.Storage])
	}
	if err := s.DeleteConsumer(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	full := stored()
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "use lowered by a deleted consumer and a purge", 10*time.Second, func() bool {
		u := fq.usage("demo")
		return u[quota.Consumers] == 2 && u[quota.Storage] <= full-5000
	})
	r.brokers[0].stop(t)
	if u := fq.usage("demo"); u != ([quota.NumKinds]float64{}) {
		t.Fatalf("use after the broker stopped: %v, want zero", u)
	}
}

// meshOf is the regions of a two-region test mesh, by name, for the
// replication links' RemoteBrokers.
type meshOf struct {
	mu      sync.Mutex
	regions map[string]*strataRegion
}

func (m *meshOf) urls(region string) []string {
	m.mu.Lock()
	r := m.regions[region]
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range r.brokers {
		if !b.stopped {
			out = append(out, b.url())
		}
	}
	return out
}

// Publish rates are charged at the origin only: the copies replicated
// into another region are stored there without AdmitPublish (only the
// storage quota may refuse them), while that region still reports the
// bytes they take (storage counts in every region).
func TestQuotaReplicatedCopiesNotCharged(t *testing.T) {
	mesh := &meshOf{regions: map[string]*strataRegion{}}
	quotas := map[string]*fakeQuotas{"east": newFakeQuotas(), "west": newFakeQuotas()}
	for _, name := range []string{"east", "west"} {
		r := newStrataRegion(t, 1, func(c *strata.Config) {
			c.Region, c.RemoteBrokers, c.Quotas = name, mesh.urls, quotas[name]
			c.Policies.(strata.StaticPolicies)["demo"]["geo"] = strata.Namespace{AutoCreateTopics: true, Replication: []string{"east", "west"}}
		})
		mesh.mu.Lock()
		mesh.regions[name] = r
		mesh.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	east := quotaJS(t, mesh.urls("east")[0])
	const n = 20
	var stream string
	for i := range n {
		ack, err := east.Publish(ctx, "demo.geo.orders", []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		stream = ack.Stream
	}
	west := quotaJS(t, mesh.urls("west")[0])
	testutil.Eventually(t, "the copies stored in west", 30*time.Second, func() bool {
		s, err := west.Stream(ctx, stream)
		return err == nil && s.CachedInfo().State.Msgs == n
	})
	fe, fw := quotas["east"], quotas["west"]
	if got := fe.charged("demo"); got != n {
		t.Fatalf("east charged %d publishes, want %d", got, n)
	}
	// The storage quota may refuse a replicated batch (the sender then
	// retries: backlog_repl.go), but the publish rate is never charged.
	if got := fw.charged("demo"); got != 0 {
		t.Fatalf("west charged %d replicated copies to the publish rate; want none", got)
	}
	testutil.Eventually(t, "west reports the copies' storage", 10*time.Second, func() bool {
		u := fw.usage("demo")
		return u[quota.Topics] == 1 && u[quota.Storage] >= n
	})
}

// A core NATS publish (no reply) on a subject a stream captures, over
// the tenant's publish quota, is neither stored nor delivered: the broker
// tells the client the quota in an -ERR (at most one per 100 ms), as for
// any core publish over quota, and keeps the connection.
func TestQuotaCapturedCorePublishRefused(t *testing.T) {
	fq := newFakeQuotas()
	r := newStrataRegionWith(t, 1, func(c *strata.Config) { c.Quotas = fq }, func(c *broker.Config) { c.Quotas = coreGate{fq} })
	errs := make(chan error, 100)
	nc, err := nats.Connect(r.brokers[0].url(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack, err := js.Publish(ctx, "demo.events.orders", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("demo.events.orders")
	if err != nil {
		t.Fatal(err)
	}
	fq.setPub("demo", true)
	for i := 0; i < 50; i++ {
		if err := nc.Publish("demo.events.orders", []byte("over")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("the connection did not survive the refusals: %v", err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), `Permissions Violation for Publish to "demo.events.orders": tenant "demo" is over its publish_rate quota`) {
			t.Fatalf("async error %v; want the quota named", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no -ERR for 50 publishes over the quota")
	}
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("a refused publish reached a core subscriber: %q", m.Data)
	}
	if n := len(errs); n > 5 {
		t.Errorf("%d -ERRs for a burst of 50 refusals; want them rate-limited", n+1)
	}
	st, err := js.Stream(ctx, ack.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().State.Msgs; got != 1 {
		t.Fatalf("stream holds %d messages, want 1 (refused publishes not stored)", got)
	}
}

// coreGate is broker.Quotas over a fakeQuotas (connections unlimited).
type coreGate struct{ f *fakeQuotas }

func (g coreGate) AdmitPublish(tenant string, size int) error { return g.f.AdmitPublish(tenant, size) }
func (g coreGate) Connect(string) error                       { return nil }
func (g coreGate) Disconnect(string)                          {}
