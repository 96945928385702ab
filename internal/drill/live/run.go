package live

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/drill"
	"github.com/stratamesh/strata/tenancy"
)

// Config is one drill.
type Config struct {
	// Region is the region cut; Survivor the region the clients move to
	// (empty: the first other region of Regions).
	Region, Survivor string
	// Regions is the namespace's replication list (Region and at least
	// one other).
	Regions []string
	// Namespace holds the drill's topic drill-<unix ms>.
	Namespace tenancy.NSName
	Mode      string
	// Load is the publish rate in msgs/s; Warmup how long clients run in
	// Region before the cut (default 3 s); For the time from the cut to
	// the heal.
	Load   float64
	Warmup time.Duration
	For    time.Duration
	// SyncInterval is the replicated subscriptions' sync interval (for
	// the duplicates bound; default 1 s).
	SyncInterval time.Duration
	// CatchUpTimeout bounds the wait for catch-up after the heal
	// (default 2 min).
	CatchUpTimeout time.Duration
	// Keep keeps the drill topic instead of deleting it at the end.
	Keep bool
	// Endpoints returns every region's NATS URLs; it is called again
	// after the heal (a restarted region may listen elsewhere).
	Endpoints func() (map[string][]string, error)
	// NATSOptions are added to every connection (TLS).
	NATSOptions []nats.Option
	// Progress, if set, is told the drill's state every 250 ms.
	Progress func(Status)
	Logger   *slog.Logger
}

// Status is what the progress display shows.
type Status struct {
	Phase            string // warmup | cut | outage | heal | catch-up | done
	Since            time.Duration
	Acked, Delivered int
	Region           string // where the clients are
}

// Run performs the drill and returns its log; an error means the drill
// could not be carried out (the log is then partial).
func Run(ctx context.Context, cfg Config, fault Fault) (drill.Log, error) {
	if cfg.Warmup <= 0 {
		cfg.Warmup = 3 * time.Second
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = time.Second
	}
	if cfg.CatchUpTimeout <= 0 {
		cfg.CatchUpTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var err error
	if cfg.Survivor, err = drill.PickSurvivor(cfg.Namespace, cfg.Regions, cfg.Region, cfg.Survivor); err != nil {
		return drill.Log{}, err
	}
	d := &driver{cfg: cfg, rec: &recorder{}, conns: map[string]*conn{}}
	d.topic = fmt.Sprintf("drill-%d", time.Now().UnixMilli())
	d.subject = cfg.Namespace.Tenant + "." + cfg.Namespace.Namespace + "." + d.topic
	d.stream = cfg.Namespace.Tenant + ":" + cfg.Namespace.Namespace + ":" + d.topic
	d.log = drill.Log{Region: cfg.Region, Survivor: cfg.Survivor, Regions: cfg.Regions, Mode: cfg.Mode,
		Load: cfg.Load, SyncInterval: cfg.SyncInterval, Final: map[string][]string{}}
	defer d.closeAll()
	err = d.run(ctx, fault)
	d.log.Acks, d.log.Deliveries = d.rec.acks, d.rec.deliveries
	return d.log, err
}

type driver struct {
	cfg                    Config
	rec                    *recorder
	topic, subject, stream string
	log                    drill.Log
	mu                     sync.Mutex
	conns                  map[string]*conn // readers, per region
	phase                  string
	phaseAt                time.Time
	where                  string
}

func (d *driver) setPhase(p, where string) {
	d.mu.Lock()
	d.phase, d.phaseAt, d.where = p, time.Now(), where
	d.mu.Unlock()
	d.cfg.Logger.Info("drill", "phase", p, "region", where, "topic", d.stream)
}

func (d *driver) status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, n := d.rec.counts()
	return Status{Phase: d.phase, Since: time.Since(d.phaseAt), Acked: a, Delivered: n, Region: d.where}
}

func (d *driver) urls(region string) ([]string, error) {
	eps, err := d.cfg.Endpoints()
	if err != nil {
		return nil, err
	}
	return eps[region], nil
}

// reader is a cached connection to region for reading.
func (d *driver) reader(region string) (*conn, error) {
	d.mu.Lock()
	c := d.conns[region]
	d.mu.Unlock()
	if c != nil && c.nc.IsConnected() {
		return c, nil
	}
	c.close()
	u, err := d.urls(region)
	if err != nil {
		return nil, err
	}
	c, err = dial(region, u, d.cfg.NATSOptions)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns[region] = c
	d.mu.Unlock()
	return c, nil
}

func (d *driver) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.close()
	}
}

func (d *driver) run(ctx context.Context, fault Fault) error {
	stopProgress := make(chan struct{})
	var wg sync.WaitGroup
	if d.cfg.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					d.cfg.Progress(d.status())
				}
			}
		}()
	}
	defer func() { close(stopProgress); wg.Wait() }()

	d.setPhase("setup", d.cfg.Region)
	home, err := d.setup(ctx)
	if err != nil {
		return err
	}
	sw := &switcher{}
	cons, err := home.js.Consumer(ctx, d.stream, "drill")
	if err != nil {
		return fmt.Errorf("drill: consumer in %s: %w", d.cfg.Region, err)
	}
	sw.set(home, cons)
	stopProd, stopCons := make(chan struct{}), make(chan struct{})
	endProd := sync.OnceFunc(func() { close(stopProd) })
	endCons := sync.OnceFunc(func() { close(stopCons) })
	var clients sync.WaitGroup
	clients.Add(2)
	go func() { defer clients.Done(); produce(stopProd, sw, d.rec, d.subject, d.cfg.Load, 1) }()
	go func() { defer clients.Done(); consume(stopCons, sw, d.rec) }()
	defer func() { endProd(); endCons(); clients.Wait() }()

	d.log.Start = time.Now()
	d.setPhase("warmup", d.cfg.Region)
	if err := sleep(ctx, d.cfg.Warmup); err != nil {
		return err
	}

	d.setPhase("cut", d.cfg.Region)
	d.log.CutBegan = time.Now()
	if err := fault.Cut(ctx); err != nil {
		return fmt.Errorf("drill: cut %s: %w", d.cfg.Region, err)
	}
	d.log.Cut = time.Now()
	home.close() // in-flight requests to the lost region fail now
	healAt := d.log.Cut.Add(d.cfg.For)
	d.setPhase("outage", d.cfg.Survivor)

	// Move the clients (the RTO) while reading what the survivor holds (the RPO).
	moved := make(chan error, 1)
	go func() { moved <- d.move(ctx, sw, healAt) }()
	sc, err := d.reader(d.cfg.Survivor)
	if err == nil {
		d.log.SurvivorAtCut, err = readIDs(ctx, sc, d.stream)
	}
	if err != nil {
		return fmt.Errorf("drill: reading %s at the cut: %w", d.cfg.Survivor, err)
	}
	if err := <-moved; err != nil {
		return err
	}
	if err := sleep(ctx, time.Until(healAt)); err != nil {
		return err
	}

	endProd() // the acknowledged set is final from here
	d.setPhase("heal", d.cfg.Region)
	if err := fault.Heal(ctx); err != nil {
		return fmt.Errorf("drill: heal %s: %w", d.cfg.Region, err)
	}
	d.log.Healed = time.Now()
	d.setPhase("catch-up", d.cfg.Survivor)
	d.catchUp(ctx, sw)
	endCons()
	d.setPhase("done", d.cfg.Survivor)
	if !d.cfg.Keep {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := d.reader(d.cfg.Survivor); err == nil {
			if err := c.js.DeleteStream(dctx, d.stream); err != nil {
				d.cfg.Logger.Warn("drill: deleting the drill topic", "topic", d.stream, "err", err)
			}
		}
	}
	return nil
}

// setup creates the drill topic in Region (by its first publish) and the
// replicated consumer, and waits until the survivor has both.
func (d *driver) setup(ctx context.Context) (*conn, error) {
	u, err := d.urls(d.cfg.Region)
	if err != nil {
		return nil, err
	}
	home, err := dial(d.cfg.Region, u, d.cfg.NATSOptions)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id := msgID(0)
	for {
		pctx, pcancel := context.WithTimeout(sctx, 2*time.Second)
		_, err := home.js.Publish(pctx, d.subject, []byte(id), jetstream.WithMsgID(id))
		pcancel()
		if err == nil {
			d.rec.ack(id, d.cfg.Region, time.Now())
			break
		}
		if sctx.Err() != nil {
			home.close()
			return nil, fmt.Errorf("drill: creating %s in %s by a publish on %s: %w", d.stream, d.cfg.Region, d.subject, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = home.js.CreateConsumer(sctx, d.stream, jetstream.ConsumerConfig{
		Durable: "drill", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		Metadata: map[string]string{"strata.replicated": "true"},
	})
	if err != nil {
		home.close()
		return nil, fmt.Errorf("drill: replicated consumer on %s in %s: %w", d.stream, d.cfg.Region, err)
	}
	// The survivor must hold the first message and the consumer before
	// the cut, or the drill measures the setup rather than the failover.
	for {
		c, err := d.reader(d.cfg.Survivor)
		if err == nil {
			var n uint64
			if n, err = count(sctx, c, d.stream); err == nil && n >= 1 {
				_, err = c.js.Consumer(sctx, d.stream, "drill")
				if err == nil {
					return home, nil
				}
			}
		}
		if sctx.Err() != nil {
			home.close()
			return nil, fmt.Errorf("drill: %s did not get %s and its consumer within 30s: %v", d.cfg.Survivor, d.stream, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// move connects the clients to the survivor (retrying until healAt).
func (d *driver) move(ctx context.Context, sw *switcher, healAt time.Time) error {
	var last error
	for time.Now().Before(healAt.Add(30 * time.Second)) {
		u, err := d.urls(d.cfg.Survivor)
		if err == nil {
			var c *conn
			if c, err = dial(d.cfg.Survivor, u, d.cfg.NATSOptions); err == nil {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				var cons jetstream.Consumer
				cons, err = c.js.Consumer(cctx, d.stream, "drill")
				cancel()
				if err == nil {
					sw.set(c, cons)
					d.mu.Lock()
					d.conns["client:"+d.cfg.Survivor] = c
					d.mu.Unlock()
					return nil
				}
				c.close()
			}
		}
		last = err
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("drill: moving the clients to %s: %w", d.cfg.Survivor, last)
}

// catchUp waits until every acknowledged message is in every region and
// the consumer has nothing left to read, or the deadline; it fills Final,
// CaughtUp and CatchUpDeadline.
func (d *driver) catchUp(ctx context.Context, sw *switcher) {
	acked := d.rec.acked()
	deadline := time.Now().Add(d.cfg.CatchUpTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if d.present(ctx, acked) {
			if d.log.CaughtUp.IsZero() {
				d.log.CaughtUp = time.Now()
			}
			if d.drained(ctx, sw) {
				return
			}
		}
		_ = sleep(ctx, 250*time.Millisecond)
	}
	if d.log.CaughtUp.IsZero() {
		d.log.CatchUpDeadline = time.Now()
	}
}

// present reads every region when each holds at least len(acked)
// messages and reports whether every acknowledged id is in each.
func (d *driver) present(ctx context.Context, acked map[string]bool) bool {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, r := range d.cfg.Regions {
		c, err := d.reader(r)
		if err != nil {
			return false
		}
		if n, err := count(rctx, c, d.stream); err != nil || n < uint64(len(acked)) {
			return false
		}
	}
	all := true
	for _, r := range d.cfg.Regions {
		c, err := d.reader(r)
		if err != nil {
			return false
		}
		ids, err := readIDs(rctx, c, d.stream)
		if err != nil {
			return false
		}
		d.log.Final[r] = ids
		have := make(map[string]bool, len(ids))
		for _, id := range ids {
			have[id] = true
		}
		for id := range acked {
			if !have[id] {
				all = false
				break
			}
		}
	}
	return all
}

// drained reports whether the consumer in the survivor has delivered and
// had acknowledged everything.
func (d *driver) drained(ctx context.Context, sw *switcher) bool {
	_, cons, _ := sw.get()
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := cons.Info(ictx)
	return err == nil && info.NumPending == 0 && info.NumAckPending == 0
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
