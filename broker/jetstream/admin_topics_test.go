package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/tenancy"
)

// TestAdminTopicWrites: CreateTopic makes a namespace's topic with its
// policies (idempotently; refused for a namespace that does not exist or
// subjects another stream captures), a subscription reset restarts
// delivery at a sequence or a time, and DeleteTopic removes the topic.
func TestAdminTopicWrites(t *testing.T) {
	r := newStrataRegion(t, 1, func(c *jetstream.Config) {
		c.Policies = jetstream.StaticPolicies{
			"demo": {"streams": {AutoCreateTopics: true}, "manual": {MaxMsgs: 100}},
		}
	})
	svc := r.brokers[0].js
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := natsjs.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	name := tenancy.Name{Tenant: "demo", Namespace: "manual", Topic: "orders"}
	if created, err := svc.CreateTopic(ctx, name); err != nil || !created {
		t.Fatalf("CreateTopic: %v, %v; want created", created, err)
	}
	if created, err := svc.CreateTopic(ctx, name); err != nil || created {
		t.Fatalf("CreateTopic again: %v, %v; want it to exist", created, err)
	}
	if _, err := svc.CreateTopic(ctx, tenancy.Name{Tenant: "demo", Namespace: "nosuch", Topic: "x"}); !errors.Is(err, jetstream.ErrNamespaceNotFound) {
		t.Fatalf("CreateTopic in a namespace that does not exist: %v", err)
	}
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "CLASH", Subjects: []string{"demo.manual.clash.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateTopic(ctx, tenancy.Name{Tenant: "demo", Namespace: "manual", Topic: "clash"}); !errors.Is(err, jetstream.ErrSubjectOverlap) || !strings.Contains(err.Error(), "CLASH") {
		t.Fatalf("CreateTopic over another stream's subjects: %v", err)
	}
	st, err := js.Stream(ctx, "manual:orders")
	if err != nil {
		t.Fatal(err)
	}
	if in, err := st.Info(ctx); err != nil || in.Config.MaxMsgs != 100 || len(in.Config.Subjects) != 2 {
		t.Fatalf("the created topic: %+v, %v; want the namespace's max_msgs 100 and its subjects", in, err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := js.Publish(ctx, "demo.manual.orders", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	stamps := map[string]time.Time{} // each message's stored time, as delivered
	read := func(want string) {
		t.Helper()
		cons, err := js.Consumer(ctx, "manual:orders", "s")
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(6, natsjs.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
			if md, err := m.Metadata(); err == nil {
				stamps[string(m.Data())] = md.Timestamp
			}
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if g := strings.Join(got, ","); g != want {
			t.Fatalf("read %s; want %s", g, want)
		}
	}
	if err := svc.PutSubscription(ctx, name, "s", jetstream.SubscriptionRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.UpdateConsumer(ctx, "manual:orders", natsjs.ConsumerConfig{Durable: "s", AckPolicy: natsjs.AckExplicitPolicy, MaxDeliver: 7}); err != nil {
		t.Fatal(err)
	}
	read("1,2,3,4,5")
	if err := svc.PutSubscription(ctx, name, "s", jetstream.SubscriptionRequest{ResetTo: &jetstream.ResetTo{Seq: 3}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, "manual:orders", "s")
	if err != nil {
		t.Fatal(err)
	}
	if in := cons.CachedInfo(); in.Config.MaxDeliver != 7 || in.Config.DeliverPolicy != natsjs.DeliverByStartSequencePolicy || in.Config.OptStartSeq != 3 {
		t.Fatalf("after the reset: %+v; want its max_deliver kept, by_start_sequence 3", in.Config)
	}
	read("3,4,5")
	// By time: the first message stored at or after message 4's time.
	if err := svc.PutSubscription(ctx, name, "s", jetstream.SubscriptionRequest{ResetTo: &jetstream.ResetTo{Time: stamps["4"]}}); err != nil {
		t.Fatal(err)
	}
	if stamps["3"].Equal(stamps["4"]) {
		read("3,4,5") // stored in the same nanosecond: the time cannot tell them apart
	} else {
		read("4,5")
	}
	// A subscription that does not exist is created at the position.
	if err := svc.PutSubscription(ctx, name, "late", jetstream.SubscriptionRequest{ResetTo: &jetstream.ResetTo{Seq: 5}}); err != nil {
		t.Fatal(err)
	}
	if c, err := js.Consumer(ctx, "manual:orders", "late"); err != nil || c.CachedInfo().NumPending != 1 {
		t.Fatalf("late: %v; want 1 pending", err)
	}

	if err := svc.DeleteTopic(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, "manual:orders"); !errors.Is(err, natsjs.ErrStreamNotFound) {
		t.Fatalf("after DeleteTopic: %v; want stream not found", err)
	}
	if err := svc.DeleteTopic(ctx, name); !errors.Is(err, jetstream.ErrTopicNotFound) {
		t.Fatalf("DeleteTopic again: %v", err)
	}
}
