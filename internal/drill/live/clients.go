package live

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/drill"
)

// conn is one region's connection.
type conn struct {
	region string
	nc     *nats.Conn
	js     jetstream.JetStream
}

func dial(region string, urls []string, opts []nats.Option) (*conn, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("drill: region %s has no NATS URL", region)
	}
	o := append([]nats.Option{nats.Name("strata-drill"), nats.IgnoreDiscoveredServers(), nats.Timeout(2 * time.Second),
		nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(strings.Join(urls, ","), o...)
	if err != nil {
		return nil, fmt.Errorf("drill: connect to %s (%s): %w", region, strings.Join(urls, ","), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &conn{region: region, nc: nc, js: js}, nil
}

func (c *conn) close() {
	if c != nil {
		c.nc.Close()
	}
}

// recorder collects the drill's events; the clients and the driver share it.
type recorder struct {
	mu         sync.Mutex
	acks       []drill.Ack
	deliveries []drill.Delivery
}

func (r *recorder) ack(id, region string, at time.Time) {
	r.mu.Lock()
	r.acks = append(r.acks, drill.Ack{ID: id, Region: region, At: at})
	r.mu.Unlock()
}

func (r *recorder) deliver(id, region string, at time.Time) {
	r.mu.Lock()
	r.deliveries = append(r.deliveries, drill.Delivery{ID: id, Region: region, At: at})
	r.mu.Unlock()
}

func (r *recorder) counts() (acks, deliveries int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks), len(r.deliveries)
}

func (r *recorder) acked() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]bool, len(r.acks))
	for _, a := range r.acks {
		m[a.ID] = true
	}
	return m
}

// switcher holds the connection the clients use now; the driver moves it.
type switcher struct {
	mu   sync.Mutex
	cur  *conn
	cons jetstream.Consumer
	gen  int
}

func (s *switcher) get() (*conn, jetstream.Consumer, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.cons, s.gen
}

func (s *switcher) set(c *conn, cons jetstream.Consumer) {
	s.mu.Lock()
	s.cur, s.cons = c, cons
	s.gen++
	s.mu.Unlock()
}

// produce publishes ids "d0000001"… at rate msgs/s on subject until stop
// is closed, each retried (same Nats-Msg-Id) until acknowledged.
func produce(stop <-chan struct{}, sw *switcher, rec *recorder, subject string, rate float64, first int) {
	start := time.Now()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		select {
		case <-stop:
			return
		case <-time.After(time.Until(due)):
		}
		id := msgID(first + i)
		for {
			c, _, _ := sw.get()
			if c != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := c.js.Publish(ctx, subject, []byte(id), jetstream.WithMsgID(id))
				cancel()
				if err == nil {
					rec.ack(id, c.region, time.Now())
					break
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func msgID(i int) string { return fmt.Sprintf("d%07d", i) }

// consume fetches from the switcher's consumer and acknowledges every
// message (double ack) until stop is closed.
func consume(stop <-chan struct{}, sw *switcher, rec *recorder) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, cons, gen := sw.get()
		if cons == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		batch, err := cons.Fetch(20, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for m := range batch.Messages() {
			rec.deliver(string(m.Data()), c.region, time.Now())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = m.DoubleAck(ctx)
			cancel()
			if _, _, g := sw.get(); g != gen {
				break // moved: leave the rest of the batch to the old region
			}
		}
	}
}

// readIDs returns the payload (the id) of every message stream holds in
// the region of c, read by an ephemeral consumer that acknowledges
// nothing.
func readIDs(ctx context.Context, c *conn, stream string) ([]string, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("%s: stream %s: %w", c.region, stream, err)
	}
	total := s.CachedInfo().State.Msgs
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("%s: reader on %s: %w", c.region, stream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.DeleteConsumer(dctx, cons.CachedInfo().Name)
		cancel()
	}()
	ids := make([]string, 0, total)
	for uint64(len(ids)) < total {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, fmt.Errorf("%s: read %s: %w", c.region, stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			ids = append(ids, string(m.Data()))
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("%s: read %s: %w", c.region, stream, err)
		}
		if n == 0 {
			break
		}
	}
	return ids, nil
}

// count is how many messages stream holds in c's region.
func count(ctx context.Context, c *conn, stream string) (uint64, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}
