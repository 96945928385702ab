package jetstream_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// TestForwardingThroughOtherBroker runs a region of two brokers: a stream
// owned by one is used through the other. A publish close to max_payload
// is forwarded and stored (the internal link carries the wrapping), the
// stream list answered by the non-owner shows the owner's live state, and
// a subject of the JetStream namespace that the stream does not capture is
// core NATS on both brokers (not stored).
func TestForwardingThroughOtherBroker(t *testing.T) {
	r := newStrataRegion(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var js [2]jetstream.JetStream
	for i, b := range r.brokers {
		nc, err := nats.Connect(b.url())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js[i], _ = jetstream.New(nc)
	}
	st, err := js[0].CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}})
	if err != nil {
		t.Fatal(err)
	}
	// Whichever broker owns BIG, publish through both; one of them
	// forwards.
	payload := bytes.Repeat([]byte("d"), 1<<20-200)
	for i := range js {
		testutil.Eventually(t, "a large publish stored", 20*time.Second, func() bool {
			pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
			defer pcancel()
			_, err := js[i].Publish(pctx, "big.x", payload)
			return err == nil
		})
	}
	for i := range js {
		testutil.Eventually(t, "the stream list shows both messages", 20*time.Second, func() bool {
			l := js[i].ListStreams(ctx)
			for info := range l.Info() {
				if info.Config.Name == "BIG" && info.State.Msgs == 2 {
					return true
				}
			}
			return false
		})
	}
	for i := range js {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := js[i].Publish(pctx, "demo.streams.BIG", []byte("not captured"))
		pcancel()
		if err == nil {
			t.Errorf("broker %d stored a publish on demo.streams.BIG, which stream BIG does not capture", i+1)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("stream BIG holds %d messages, want 2", info.State.Msgs)
	}
	oc, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq <= 2; seq++ {
		m, err := oc.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("reading message %d: %v", seq, err)
		}
		if !bytes.Equal(m.Data(), payload) {
			t.Errorf("message %d: %d bytes differ from the %d published", seq, len(m.Data()), len(payload))
		}
	}
}
