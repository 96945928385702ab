package jetstream_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Key_Shared subscriptions (spec §4): a consumer with metadata
// "strata.subscription": "key_shared", pulled by three nats.go clients
// with Consume. Strata only: the reference has no such subscription.

// ksLog checks, while three pullers consume, the Key_Shared rules as the
// clients can see them:
//   - a key is never unacked at two live pullers at once (a puller
//     counts a message as unacked from its handler until just before it
//     sends the ack, so the check has no false alarms);
//   - per key, first deliveries come in stream order;
//   - a message is delivered for the first time once, and again only if
//     the puller that stops left it unacked, or it went to that puller's
//     inbox after it stopped (Strata keeps a stopped client's pull until
//     it expires: it has no interest check), and its ack_wait passed.
type ksLog struct {
	t      *testing.T
	keyOf  map[uint64]string // stream sequence → key, as published
	mu     sync.Mutex
	holder map[string]string    // key → puller with unacked messages of it
	held   map[string]int       // key → how many
	first  map[uint64]time.Time // first deliveries
	last   map[string]uint64    // key → latest first delivery
	acked  map[uint64]bool
	orphan map[uint64]bool // left unacked by a stopped puller
	stop   time.Time       // when the puller that stops stopped
	redel  int
	moves  int // a key went to another puller than its last one
}

func newKSLog(t *testing.T) *ksLog {
	return &ksLog{t: t, keyOf: map[uint64]string{}, holder: map[string]string{}, held: map[string]int{},
		first: map[uint64]time.Time{}, last: map[string]uint64{}, acked: map[uint64]bool{}, orphan: map[uint64]bool{}}
}

// received records a delivery to puller p.
func (l *ksLog) received(p string, md *jetstream.MsgMetadata, ackWait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq := md.Sequence.Stream
	key := l.keyOf[seq]
	if h := l.holder[key]; h != "" && h != p && l.held[key] > 0 {
		l.t.Errorf("key %q: seq %d to %s while %s has %d unacked", key, seq, p, h, l.held[key])
	}
	if h := l.holder[key]; h != "" && h != p {
		l.moves++
	}
	l.holder[key] = p
	l.held[key]++
	if md.NumDelivered == 1 {
		if _, dup := l.first[seq]; dup {
			l.t.Errorf("seq %d delivered for the first time twice", seq)
		}
		if last, ok := l.last[key]; ok && seq <= last {
			l.t.Errorf("key %q: first delivery of %d after %d", key, seq, last)
		}
		l.first[seq], l.last[key] = time.Now(), seq
		return
	}
	l.redel++
	switch at, seen := l.first[seq]; {
	case !seen && (l.stop.IsZero() || time.Since(l.stop) < ackWait*9/10):
		l.t.Errorf("seq %d redelivered (%d) but never delivered, %v after the stop", seq, md.NumDelivered, time.Since(l.stop))
	case seen && !l.orphan[seq]:
		l.t.Errorf("seq %d redelivered to %s though no stopped puller held it (acked %v)", seq, p, l.acked[seq])
	case seen && time.Since(at) < ackWait*9/10:
		l.t.Errorf("seq %d redelivered %v after its delivery, before ack_wait", seq, time.Since(at))
	}
}

// acking is called just before puller p acks seq.
func (l *ksLog) acking(p string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release(p, seq)
	l.acked[seq] = true
}

// abandoned: the stopped puller p will never ack seq.
func (l *ksLog) abandoned(p string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release(p, seq)
	l.orphan[seq] = true
	if l.stop.IsZero() {
		l.stop = time.Now()
	}
}

func (l *ksLog) release(p string, seq uint64) {
	key := l.keyOf[seq]
	if l.holder[key] == p && l.held[key] > 0 {
		l.held[key]--
	}
}

func (l *ksLog) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// TestKeySharedThreePullers: 3 pullers, 24 keys, 600 messages; one
// puller stops after 60 messages, leaving its last ones unacked: they
// come back to the others after ack_wait. Everything is acked once in
// the end, every key in order at one puller at a time.
func TestKeySharedThreePullers(t *testing.T) {
	const (
		n, keys = 600, 24
		ackWait = 2 * time.Second
		stopAt  = 60
	)
	for _, tc := range []struct {
		name, stream, subject, key string
	}{
		// A stream with its own subjects: the whole subject is the key.
		{"by-subject", "ORDERS", "ord.%s", ""},
		// A topic created by a publish (demo/events/orders): the subject's
		// tokens after "demo.events.orders"; and a header key.
		{"topic-subject", "events:orders", "demo.events.orders.%s", "subject"},
		{"by-header", "ORDERS", "ord.x", "header:Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startStrata(t, targetOptions{})
			_, js := connectJS(t, tg)
			ctx := testCtx(t)
			log := newKSLog(t)
			for seq := uint64(1); seq <= n; seq++ { // before any delivery
				log.keyOf[seq] = fmt.Sprintf("k%02d", rand.IntN(keys))
			}
			publish := func(seq uint64) {
				key := log.keyOf[seq]
				subj := tc.subject
				if strings.Contains(subj, "%s") {
					subj = fmt.Sprintf(subj, key)
				}
				m := nats.NewMsg(subj)
				m.Header.Set("Key", key)
				m.Data = []byte(fmt.Sprint(seq))
				ack, err := js.PublishMsg(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				if ack.Sequence != seq {
					t.Fatalf("published seq %d, want %d", ack.Sequence, seq)
				}
			}
			if tc.stream == "ORDERS" {
				createStream(t, js, ordersConfig())
			}
			publish(1) // creates the topic of "events:orders"
			meta := map[string]string{"strata.subscription": "key_shared"}
			if tc.key != "" {
				meta["strata.key"] = tc.key
			}
			createConsumer(t, js, tc.stream, jetstream.ConsumerConfig{
				Durable: "ks", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, Metadata: meta,
			})
			var ccs []jetstream.ConsumeContext
			var stopMu sync.Mutex
			for i := range 3 {
				name := fmt.Sprintf("p%d", i+1)
				_, cjs := connectJS(t, tg)
				c, err := cjs.Consumer(ctx, tc.stream, "ks")
				if err != nil {
					t.Fatal(err)
				}
				count, stopped := 0, false
				cc, err := c.Consume(func(m jetstream.Msg) {
					md, err := m.Metadata()
					if err != nil {
						t.Error(err)
						return
					}
					stopMu.Lock()
					count++
					quit := i == 2 && count > stopAt
					if quit && !stopped {
						stopped = true
						go ccs[2].Stop()
					}
					stopMu.Unlock()
					log.received(name, md, ackWait)
					if quit { // the puller that stops acks nothing more
						log.abandoned(name, md.Sequence.Stream)
						return
					}
					time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond) // processing
					log.acking(name, md.Sequence.Stream)
					if err := m.Ack(); err != nil {
						t.Error(err)
					}
				}, jetstream.PullMaxMessages(10), jetstream.PullExpiry(3*time.Second),
					jetstream.ConsumeErrHandler(func(jetstream.ConsumeContext, error) {}))
				if err != nil {
					t.Fatal(err)
				}
				stopMu.Lock()
				ccs = append(ccs, cc)
				stopMu.Unlock()
				t.Cleanup(cc.Stop)
			}
			for seq := uint64(2); seq <= n; seq++ {
				publish(seq)
			}
			start := time.Now()
			waitCond(t, 60*time.Second, "every message acked", func() bool { return log.ackedCount() == n })
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(log.orphan) == 0 {
				t.Fatalf("the stopping puller left nothing unacked: the test did not test redelivery")
			}
			t.Logf("all %d acked %v after the last publish; keys moved between pullers %d times; %d left unacked by the stopped puller, %d redeliveries",
				n, time.Since(start).Round(time.Millisecond), log.moves, len(log.orphan), log.redel)
		})
	}
}

// Invalid key_shared metadata fails CONSUMER.CREATE with an error naming
// the field.
func TestKeySharedCreateErrors(t *testing.T) {
	tg := startStrata(t, targetOptions{})
	_, js := connectJS(t, tg)
	createStream(t, js, ordersConfig())
	for _, tc := range []struct {
		meta  map[string]string
		ack   jetstream.AckPolicy
		field string
	}{
		{map[string]string{"strata.subscription": "failover"}, jetstream.AckExplicitPolicy, "strata.subscription"},
		{map[string]string{"strata.subscription": "key_shared", "strata.key": "body"}, jetstream.AckExplicitPolicy, "strata.key"},
		{map[string]string{"strata.key": "subject"}, jetstream.AckExplicitPolicy, "strata.key"},
		{map[string]string{"strata.subscription": "key_shared"}, jetstream.AckAllPolicy, "ack_policy"},
	} {
		_, err := js.CreateOrUpdateConsumer(testCtx(t), ordersStream, jetstream.ConsumerConfig{
			Durable: "bad", AckPolicy: tc.ack, Metadata: tc.meta,
		})
		wantAPIError(t, err, 10012)
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%v: %v does not name %s", tc.meta, err, tc.field)
		}
	}
}
