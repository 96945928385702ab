package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Core NATS between tenants: subscriptions, publishes, requests and the
// mesh's internal subjects (steps of TestTenantIsolation).

// snoopSubjects are what alpha subscribes to while bravo works.
var snoopSubjects = []string{">", "*.>", victim + ".>", victim + ".ns.orders", "orders.>", "chat.room",
	"_INBOX.>", "$JS.API.>", "$JS.ACK.>", "$STRATA.>", "$SR.>", "$SYS.>", "$A." + victim + ".>"}

// snoop: alpha subscribes (in both regions) to everything it can name
// while bravo makes its data: a stream ORDERS and its consumer billing
// (JetStream API), messages stored on bravo.ns.orders and orders.new
// (replicated to r2), core messages on chat.room, requests to a service
// of bravo's. bravo's own subscribers on the same brokers get every
// message; alpha's subscriptions get none.
func (s *isoSuite) snoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	snoops := map[string]map[string]*nats.Subscription{}
	witness := map[string]map[string]*nats.Subscription{}
	for _, r := range s.regions {
		snoops[r] = s.subscribe(t, s.alice[r], snoopSubjects...)
		q, err := s.alice[r].QueueSubscribeSync("chat.room", "steal")
		if err != nil {
			t.Fatal(err)
		}
		snoops[r]["chat.room (queue)"] = q
		// bravo's witness on the same broker as alpha's subscriptions.
		witness[r] = s.subscribe(t, s.bob1[r], ">", victim+".>", "orders.>", "chat.room")
		// bravo's publisher on b2 knows of the witness's interest once a
		// probe reaches it.
		waitFor(t, r+": bravo's publisher on b2 reaches bravo's subscriber on b1", 30*time.Second, func() bool {
			if err := s.bob2[r].Publish("probe", nil); err != nil {
				t.Fatal(err)
			}
			m, err := witness[r][">"].NextMsg(200 * time.Millisecond)
			return err == nil && m.Subject == "probe"
		})
	}
	for _, r := range s.regions {
		if err := s.alice[r].Flush(); err != nil {
			t.Fatal(err)
		}
	}

	// bravo's data, made in r1.
	jb := s.bob1["r1"].js(t)
	st, err := jb.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatalf("bravo creates ORDERS: %v", err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour})
	if err != nil {
		t.Fatalf("bravo creates the consumer billing: %v", err)
	}
	pub := s.bob2["r1"].js(t)
	for i := 1; i <= 5; i++ {
		if _, err := pub.Publish(ctx, victim+".ns.orders", []byte(fmt.Sprintf("bravo-secret-%d", i))); err != nil {
			t.Fatalf("bravo publishes on %s.ns.orders: %v", victim, err)
		}
	}
	for i := 1; i <= 3; i++ {
		if ack, err := pub.Publish(ctx, "orders.new", []byte(fmt.Sprintf("bravo-order-%d", i))); err != nil || ack.Stream != "ORDERS" {
			t.Fatalf("bravo publishes on orders.new: %v %v", ack, err)
		}
	}
	for _, r := range s.regions {
		for i := 1; i <= 3; i++ {
			if err := s.bob2[r].Publish("chat.room", []byte(fmt.Sprintf("bravo-chat-%s-%d", r, i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.bob2[r].Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Requests to bravo's service (replies to bravo's inboxes on b1).
	for _, r := range s.regions {
		stop := s.respond(t, s.bob2[r], "svc.echo", nil)
		waitFor(t, r+": bravo's request is answered", 30*time.Second, func() bool {
			m, err := s.bob1[r].Request("svc.echo", []byte("from-bravo"), 2*time.Second)
			return err == nil && string(m.Data) == "echo from-bravo"
		})
		stop()
	}
	// bravo takes one message of billing and leaves it unacknowledged.
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		s.billingReply = m.Reply()
	}
	if s.billingReply == "" {
		t.Fatalf("bravo's fetch from billing got nothing: %v", batch.Error())
	}

	// bravo's witnesses have it all: in r1 as published, in r2 as
	// replicated.
	for _, r := range s.regions {
		for subj, want := range map[string]int{victim + ".>": 5, "orders.>": 3, "chat.room": 3} {
			for i := 0; i < want; i++ {
				if _, err := witness[r][subj].NextMsg(30 * time.Second); err != nil {
					t.Fatalf("%s: bravo's own subscriber on %s got %d of %d messages: %v", r, subj, i, want, err)
				}
			}
		}
		s.unsubscribe(t, witness[r])
	}
	for _, r := range s.regions {
		s.sawNothing(t, r, snoops[r])
		s.unsubscribe(t, snoops[r])
		s.logErrs(t, s.alice[r])
	}
}

// subscribe makes a synchronous subscription of ic to each subject.
func (s *isoSuite) subscribe(t *testing.T, ic *isoConn, subjects ...string) map[string]*nats.Subscription {
	t.Helper()
	out := map[string]*nats.Subscription{}
	for _, subj := range subjects {
		sub, err := ic.SubscribeSync(subj)
		if err != nil {
			t.Fatalf("%s subscribes to %s: %v", ic.user, subj, err)
		}
		out[subj] = sub
	}
	if err := ic.Flush(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *isoSuite) unsubscribe(t *testing.T, subs map[string]*nats.Subscription) {
	t.Helper()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
}

var markers atomic.Int64

// sawNothing fails if any of subs (alice's, in region) holds a message
// other than alice's own marker. alice first publishes a marker and waits
// for it on the same connection: a broker delivers one connection's
// messages in order and the client queues each to its subscription as it
// reads it, so whatever the broker delivered to alice before (bravo's
// messages, had they leaked: bravo's subscribers on this broker have had
// them) is in subs' queues by then.
func (s *isoSuite) sawNothing(t *testing.T, region string, subs map[string]*nats.Subscription) {
	t.Helper()
	a := s.alice[region]
	subject := fmt.Sprintf("%s.marker.m%d", attacker, markers.Add(1))
	mark, err := a.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer mark.Unsubscribe()
	if err := a.Publish(subject, []byte("marker")); err != nil {
		t.Fatal(err)
	}
	if _, err := mark.NextMsg(30 * time.Second); err != nil {
		t.Fatalf("%s: alice's marker did not come back: %v", region, err)
	}
	for name, sub := range subs {
		n, _, err := sub.Pending()
		if err != nil {
			continue // the broker refused the subscription: nothing to see
		}
		for i := 0; i < n; i++ {
			m, err := sub.NextMsg(time.Second) // queued already
			if err != nil {
				t.Fatalf("%s: alice's subscription %s: %d pending, then %v", region, name, n, err)
			}
			if !strings.HasPrefix(m.Subject, attacker+".marker.") {
				t.Errorf("%s: alice's subscription %s got bravo's %s %q", region, name, m.Subject, m.Data)
			}
		}
	}
}

// logErrs logs the asynchronous errors ic was told so far (a refused
// subscription is one way of seeing nothing).
func (s *isoSuite) logErrs(t *testing.T, ic *isoConn) {
	t.Helper()
	for {
		select {
		case err := <-ic.errs:
			t.Logf("%s was told: %v", ic.user, err)
		default:
			return
		}
	}
}

// respond answers requests on subject as ic ("echo " + the request),
// recording each request's data in got (when not nil); the returned
// function stops it.
func (s *isoSuite) respond(t *testing.T, ic *isoConn, subject string, got func(string)) func() {
	t.Helper()
	sub, err := ic.Subscribe(subject, func(m *nats.Msg) {
		if got != nil {
			got(string(m.Data))
		}
		_ = m.Respond(append([]byte("echo "), m.Data...))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := ic.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() { _ = sub.Unsubscribe() }
}

// sideBySide: alpha makes its own stream ORDERS on the same subjects as
// bravo's; each tenant's publishes land in its own, each sees its own
// only, in both regions.
func (s *isoSuite) sideBySide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ja := s.alice["r1"].js(t)
	if _, err := ja.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatalf("alpha creates its ORDERS next to bravo's: %v", err)
	}
	for i := 1; i <= 2; i++ {
		ack, err := ja.Publish(ctx, "orders.new", []byte(fmt.Sprintf("alpha-order-%d", i)))
		if err != nil || ack.Stream != "ORDERS" || ack.Sequence != uint64(i) {
			t.Fatalf("alpha's publish %d on orders.new: %+v %v, want its own ORDERS at seq %d", i, ack, err, i)
		}
	}
	want := map[string]map[string]uint64{ // tenant → stream → messages
		attacker: {"ORDERS": 2},
		victim:   {"ORDERS": 3, "ns:orders": 5},
	}
	for _, r := range s.regions {
		for tenant, conn := range map[string]*isoConn{attacker: s.alice[r], victim: s.bob1[r]} {
			js := conn.js(t)
			var got map[string]uint64
			waitFor(t, fmt.Sprintf("%s: %s's streams are %v", r, tenant, want[tenant]), 60*time.Second, func() bool {
				got = map[string]uint64{}
				l := js.ListStreams(ctx)
				for info := range l.Info() {
					got[info.Config.Name] = info.State.Msgs
				}
				return l.Err() == nil && fmt.Sprint(got) == fmt.Sprint(want[tenant])
			})
		}
	}
}

// expectPubDenied publishes msg as ic and fails unless the broker
// answers -ERR 'Permissions Violation for Publish to "<subject>"'.
func expectPubDenied(t *testing.T, ic *isoConn, msg *nats.Msg) {
	t.Helper()
	for len(ic.errs) > 0 {
		<-ic.errs
	}
	if err := ic.PublishMsg(msg); err != nil {
		t.Fatalf("%s publishes %s: %v", ic.user, msg.Subject, err)
	}
	if err := ic.Flush(); err != nil {
		t.Fatalf("%s publishes %s: flush: %v", ic.user, msg.Subject, err)
	}
	want := `Permissions Violation for Publish to "` + msg.Subject + `"`
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-ic.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), want) {
				return
			}
			t.Logf("%s, publishing %s, was told %v", ic.user, msg.Subject, err)
		case <-deadline:
			t.Fatalf("%s's publish to %s was not refused (no %s)", ic.user, msg.Subject, want)
		}
	}
}

// publishInto: alpha publishes into bravo's topic subjects (plain, with
// a reply as a JetStream publish does, with headers), refused every
// time, even for a user whose JWT allows those subjects; on a plain subject both use, alpha's message stays in alpha's
// subject space: bravo's subscribers never get it.
func (s *isoSuite) publishInto(t *testing.T) {
	for _, r := range s.regions {
		a := s.alice[r]
		for _, subj := range []string{victim + ".ns.orders", victim + ".ns.orders.eu", victim + ".ns.newtopic", victim + ".streams.ORDERS", victim + ".x"} {
			expectPubDenied(t, a, &nats.Msg{Subject: subj, Data: []byte("forged")})
			expectPubDenied(t, a, &nats.Msg{Subject: subj, Reply: "_INBOX.alpha", Data: []byte("forged")})
			expectPubDenied(t, a, &nats.Msg{Subject: subj, Header: nats.Header{"Nats-Msg-Id": []string{"forged"}}, Data: []byte("forged")})
		}
		// spy, whose user JWT allows publishing on bravo's and the mesh's
		// subjects, is refused the same.
		spy := s.connect(t, r, "b2", "spy")
		for _, subj := range []string{victim + ".ns.orders", victim + ".streams.ORDERS", "$STRATA.REPL." + victim + ".ns.orders", "$SR.FWD.b1"} {
			expectPubDenied(t, spy, &nats.Msg{Subject: subj, Data: []byte("forged")})
		}
		// chat.room: bravo's subscribers on both brokers of the region;
		// alpha publishes on b1, then bravo's marker from b1 follows it
		// (on b1 and over the same route to b2).
		subs := map[string]*nats.Subscription{}
		for name, ic := range map[string]*isoConn{"b1": s.bob1[r], "b2": s.bob2[r]} {
			subs[name] = s.subscribe(t, ic, "chat.room")["chat.room"]
		}
		waitFor(t, r+": bravo's chat.room subscriber on b2 is known on b1", 30*time.Second, func() bool {
			if err := s.bob1[r].Publish("chat.room", []byte("bravo-probe")); err != nil {
				t.Fatal(err)
			}
			_, err := subs["b2"].NextMsg(200 * time.Millisecond)
			return err == nil
		})
		if err := a.Publish("chat.room", []byte("alpha-intruder")); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.bob1[r].Publish("chat.room", []byte("bravo-marker")); err != nil {
			t.Fatal(err)
		}
		for name, sub := range subs {
			for {
				m, err := sub.NextMsg(30 * time.Second)
				if err != nil {
					t.Fatalf("%s: bravo's chat.room subscriber on %s: %v, waiting for bravo's own marker", r, name, err)
				}
				if string(m.Data) == "bravo-marker" {
					break
				}
				if string(m.Data) != "bravo-probe" {
					t.Fatalf("%s: bravo's chat.room subscriber on %s got %s", r, name, msgData(m))
				}
			}
			_ = sub.Unsubscribe()
		}
	}
}

func msgData(m *nats.Msg) string {
	if m == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s %q", m.Subject, m.Data)
}

// requestAcross: alpha's requests to bravo's service find no responder
// (bravo's subscription is in bravo's subject space) or are refused
// (bravo's subjects); alpha's _INBOX.> sees none of bravo's replies.
func (s *isoSuite) requestAcross(t *testing.T) {
	for _, r := range s.regions {
		var mu sync.Mutex
		var got []string
		stop := s.respond(t, s.bob2[r], "svc.echo", func(d string) {
			mu.Lock()
			got = append(got, d)
			mu.Unlock()
		})
		// bravo's own request first: the responder's interest has reached b1.
		waitFor(t, r+": bravo's request is answered", 30*time.Second, func() bool {
			m, err := s.bob1[r].Request("svc.echo", []byte("from-bravo"), 2*time.Second)
			return err == nil && string(m.Data) == "echo from-bravo"
		})
		if m, err := s.alice[r].Request("svc.echo", []byte("from-alpha"), 10*time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("%s: alpha's request to svc.echo: %v %v, want no responders", r, msgData(m), err)
		}
		expectPubDenied(t, s.alice[r], &nats.Msg{Subject: victim + ".svc.echo", Reply: "_INBOX.alpha", Data: []byte("from-alpha")})
		// (subscribed after its own requests: alpha's > would take them)
		snoop := s.subscribe(t, s.alice[r], "_INBOX.>", ">")
		if m, err := s.bob1[r].Request("svc.echo", []byte("from-bravo"), 10*time.Second); err != nil || string(m.Data) != "echo from-bravo" {
			t.Fatalf("%s: bravo's request: %v %v", r, msgData(m), err)
		}
		stop()
		mu.Lock()
		for _, d := range got {
			if d != "from-bravo" {
				t.Errorf("%s: bravo's responder got %q", r, d)
			}
		}
		mu.Unlock()
		s.sawNothing(t, r, snoop)
		s.unsubscribe(t, snoop)
	}
}

// internalSubjects: alpha publishes on the mesh's own subjects —
// replication batches, subscription sync, tombstones, configuration,
// the replication-state and offload requests, the region's forward and
// delivery links — as a replicator or a broker would; each is refused.
// $SYS requests find no responder in alpha's subject space.
func (s *isoSuite) internalSubjects(t *testing.T) {
	batch := []byte(`{"origin":"r1","topic":"` + victim + `/ns/orders","entries":[{"seq":6,"data":"Zm9yZ2Vk"}]}`)
	for _, r := range s.regions {
		a := s.alice[r]
		for _, subj := range []string{
			"$STRATA.REPL." + victim + ".ns.orders", "$STRATA.REPL." + victim + ".streams.ORDERS",
			"$STRATA.RSUB." + victim + ".streams.ORDERS", "$STRATA.RDEL." + victim + ".ns.orders",
			"$STRATA.CONFIG.TOPICS", "$STRATA.ADMIN.REPL." + victim + ".ns.orders", "$STRATA.ADMIN.OFFLOAD." + victim + ".ns.orders",
			"$SR.FWD.b1", "$SR.FWD.b2", "$SR.DLV.b1",
		} {
			expectPubDenied(t, a, &nats.Msg{Subject: subj, Data: batch})
			expectPubDenied(t, a, &nats.Msg{Subject: subj, Reply: "_INBOX.alpha", Data: batch})
		}
		for _, subj := range []string{"$SYS.REQ.SERVER.PING", "$SYS.REQ.ACCOUNT." + victim + ".CONNZ", "$SYS.REQ.SERVER.PING.CONNZ"} {
			if m, err := a.Request(subj, nil, 10*time.Second); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("%s: alpha's request on %s: %v %v, want no responders", r, subj, msgData(m), err)
			}
		}
	}
}
