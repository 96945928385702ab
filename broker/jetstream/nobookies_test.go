package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	strjs "github.com/stratamesh/strata/broker/jetstream"
)

// TestPublishWithoutEnoughBookiesIsAnswered: a topic whose owner cannot
// open it for want of writable bookies (ensemble 5 over the region's 4)
// answers a JetStream publish with an error naming that, well inside the
// client's timeout, instead of leaving it parked until it times out.
func TestPublishWithoutEnoughBookiesIsAnswered(t *testing.T) {
	r := newStrataRegion(t, 1, func(c *strjs.Config) { c.Ensemble = 5 })
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	start := time.Now()
	_, err = js.Publish(ctx, "demo.streams.nobookies", []byte("x"))
	took := time.Since(start)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10077 || !strings.Contains(apiErr.Description, "writable bookies") {
		t.Fatalf("publish with too few bookies after %v: %v; want JetStream error 10077 naming the bookies", took, err)
	}
	t.Logf("answered after %v: %v", took.Round(time.Millisecond), err)
}
