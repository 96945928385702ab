package mledger

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/internal/testutil"
)

// etcdProxy is a TCP proxy in front of the shared etcd whose answers
// (server → client bytes) can be held back: a request sent while paused
// reaches etcd and is applied, but its answer does not come back — an
// ambiguous write, as after a network delay or partition.
type etcdProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newEtcdProxy(t *testing.T) *etcdProxy {
	u, err := url.Parse(metatest.Etcd().ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &etcdProxy{ln: ln, target: u.Host}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *etcdProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *etcdProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(s, c); s.Close(); c.Close() }()
		go func() {
			defer p.wg.Done()
			defer c.Close()
			defer s.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					p.mu.Lock()
					for p.paused && !p.closed {
						p.cond.Wait()
					}
					p.mu.Unlock()
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *etcdProxy) pause(v bool) {
	p.mu.Lock()
	p.paused = v
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *etcdProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

// proxiedStore opens a Store on e's etcd prefix through a new etcdProxy,
// closed when the test ends.
func proxiedStore(t *testing.T, e *env) (*etcdProxy, *meta.Store) {
	t.Helper()
	proxy := newEtcdProxy(t)
	pcfg := meta.DefaultConfig()
	pcfg.Endpoints = []string{proxy.url()}
	pcfg.Prefix = e.st.Prefix()
	pst, err := meta.Open(testCtx(t), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pst.Close() })
	return proxy, pst
}

// gatedTier is a memTier whose copies wait for release, then run after.
type gatedTier struct {
	*memTier
	release chan struct{}
	after   func()
}

func (g *gatedTier) Offload(ctx context.Context, src EntryReader, id, last, length int64, base string, progress OffloadProgress) (int64, error) {
	select {
	case <-g.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n, err := g.memTier.Offload(ctx, src, id, last, length, base, progress)
	if err == nil && g.after != nil {
		g.after()
	}
	return n, err
}

// TestAmbiguousOffloadRecordKeepsTheTierCopy: the owner stops (Drop, or
// a loss: fenced by a new owner) while the Txn recording a ledger's tier
// copy is in flight; the Txn is applied, its answer held back. The next
// owner finds the copy recorded and deletes the bookie copy after the
// deletion lag, so the tier copy must still be there: every acknowledged
// message reads back. (offloadLedger took the error for "not recorded"
// and deleted the tier copy, and the ledger's messages were gone.)
func TestAmbiguousOffloadRecordKeepsTheTierCopy(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	proxy, pst := proxiedStore(t, e)
	ctx := testCtx(t)

	base := newMemTier()
	tier := &gatedTier{memTier: base, release: make(chan struct{}), after: func() { proxy.pause(true) }}
	cfg := e.config(testTopic, nil, offloadConfig(tier), func(c *Config) { c.Store = pst })
	ml := e.open(testTopic, cfg)
	for i := 1; i <= 150; i++ {
		mustPublish(t, ml, "acme.prod.orders", fmt.Sprintf("msg-%d", i), PublishOptions{})
	}
	// Quiescent: the rollover written, the spare recorded, nothing dirty.
	testutil.Eventually(t, "rollover written", 30*time.Second, func() bool {
		ml.mu.Lock()
		defer ml.mu.Unlock()
		return ml.prev == nil && ml.spare != nil && ml.spareSaved && !ml.dirty && ml.off.running
	})
	var tm0 TopicMeta
	testutil.Eventually(t, "two ledgers listed in etcd, the first closed", 30*time.Second, func() bool {
		var err error
		tm0, _, err = Load(ctx, e.st, testTopic)
		return err == nil && len(tm0.Ledgers) == 2 && tm0.Ledgers[0].State == LedgerClosed && tm0.Ledgers[0].Offload == nil
	})
	first := tm0.Ledgers[0].ID

	close(tier.release) // the copy completes; etcd's answers are held from now on
	testutil.Eventually(t, "the offload record applied in etcd", 30*time.Second, func() bool {
		tm, _, err := Load(ctx, e.st, testTopic)
		return err == nil && len(tm.Ledgers) > 0 && tm.Ledgers[0].Offload != nil
	})
	ml.Drop() // the owner stops with the record's answer still in flight
	proxy.pause(false)

	tm, _, _ := Load(ctx, e.st, testTopic)
	rec := tm.Ledgers[0].Offload
	copies := base.bases()
	t.Logf("etcd records ledger %d's tier copy %q; tier holds %v", first, rec.Base, copies)

	// The next owner: deletes the bookie copy (lag 0) and reads from the
	// tier copy its record names.
	ml2 := e.open(testTopic, e.config(testTopic, nil, offloadConfig(base)))
	testutil.Eventually(t, "bookie copy of the offloaded ledger deleted", 30*time.Second, func() bool {
		o := ml2.offloadOf(first)
		return o != nil && o.BookieDeleted
	})
	dropCaches(ml2)
	for s := uint64(1); s <= 100; s++ {
		m, err := ml2.Read(ctx, s)
		if err != nil || string(m.Data) != fmt.Sprintf("msg-%d", s) {
			t.Fatalf("acknowledged seq %d after takeover: %q, %v (tier copies %v, recorded %q)", s, m.Data, err, copies, rec.Base)
		}
	}
}

// TestAmbiguousRolloverWriteIsSafe: the rollover's list write is
// applied but its answer never reaches the owner, which stops; the next
// owner finds every acknowledged message (those of the switched-to
// spare included) and continues the sequence.
func TestAmbiguousRolloverWriteIsSafe(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	proxy, pst := proxiedStore(t, e)
	ctx := testCtx(t)
	roll := func(c *Config) { c.Limits.RolloverEntries = 10; c.Store = pst }
	ml := e.open(testTopic, e.config(testTopic, nil, roll))
	for i := 1; i <= 10; i++ {
		mustPublish(t, ml, "s", fmt.Sprintf("m%d", i), PublishOptions{})
	}
	testutil.Eventually(t, "quiescent", 30*time.Second, func() bool {
		ml.mu.Lock()
		defer ml.mu.Unlock()
		return ml.prev == nil && ml.spare != nil && ml.spareSaved && !ml.dirty
	})
	testutil.Eventually(t, "the spare recorded in etcd", 30*time.Second, func() bool {
		tm, _, err := Load(ctx, e.st, testTopic)
		return err == nil && tm.Spare != 0
	})
	proxy.pause(true)
	for i := 11; i <= 15; i++ { // in the recorded spare: acknowledged at once
		mustPublish(t, ml, "s", fmt.Sprintf("m%d", i), PublishOptions{})
	}
	testutil.Eventually(t, "rollover list applied", 30*time.Second, func() bool {
		tm, _, err := Load(ctx, e.st, testTopic)
		return err == nil && len(tm.Ledgers) >= 2 && tm.Ledgers[0].State == LedgerClosed
	})
	ml.Drop()
	proxy.pause(false)
	ml2 := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Limits.RolloverEntries = 10 }))
	if st := ml2.State(); st.LastSeq != 15 {
		t.Fatalf("after takeover %+v", st)
	}
	for s := uint64(1); s <= 15; s++ {
		if m, err := ml2.Read(ctx, s); err != nil || string(m.Data) != fmt.Sprintf("m%d", s) {
			t.Fatalf("seq %d: %q %v", s, m.Data, err)
		}
	}
	if seq := mustPublish(t, ml2, "s", "next", PublishOptions{}); seq != 16 {
		t.Fatalf("next seq %d", seq)
	}
}
