package jetstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStrataHeadersRefused: a JetStream publish carrying a Strata-*
// header (reserved for replicated copies' origin) is refused with an
// error naming the header, and nothing is stored; the same message
// without it is stored.
func TestStrataHeadersRefused(t *testing.T) {
	r := newStrataRegion(t, 1, nil)
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RES", Subjects: []string{"res.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"Strata-Origin", "strata-origin-seq"} {
		msg := nats.NewMsg("res.a")
		msg.Header.Set(key, "us-east")
		msg.Data = []byte("x")
		_, err := js.PublishMsg(ctx, msg)
		if err == nil || !strings.Contains(err.Error(), "is reserved") || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(key)) {
			t.Fatalf("publish with header %s: %v; want an error naming it as reserved", key, err)
		}
	}
	msg := nats.NewMsg("res.a")
	msg.Header.Set("Origin", "fine")
	msg.Data = []byte("x")
	if ack, err := js.PublishMsg(ctx, msg); err != nil || ack.Sequence != 1 {
		t.Fatalf("publish without a Strata-* header: %+v, %v", ack, err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %+v (%v); want only the one accepted message", info.State, err)
	}
}

// TestStrataHeadersRefusedCore: a core NATS publish carrying a Strata-*
// header reaches no subscriber and creates no topic (a forged origin
// must not pass for a replicated copy); without it, it is delivered.
func TestStrataHeadersRefusedCore(t *testing.T) {
	r := newStrataRegion(t, 1, nil)
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("plain.>")
	if err != nil {
		t.Fatal(err)
	}
	forged := nats.NewMsg("plain.forged")
	forged.Header.Set("Strata-Origin", "eu-west")
	if err := nc.PublishMsg(forged); err != nil {
		t.Fatal(err)
	}
	ok := nats.NewMsg("plain.ok")
	ok.Header.Set("Origin", "fine")
	if err := nc.PublishMsg(ok); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || m.Subject != "plain.ok" {
		t.Fatalf("first delivery %v (%v); want plain.ok only, the forged one refused", m, err)
	}
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("delivered %s too", m.Subject)
	}
}
