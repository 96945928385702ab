package consumer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// fakeSource is an in-memory topic: msgs[i] has sequence i+1; sequences
// below first are trimmed.
type fakeSource struct {
	msgs  []Msg
	first uint64
	fail  map[uint64]error // Load errors to inject
	loads int
}

func newSource() *fakeSource { return &fakeSource{first: 1, fail: map[uint64]error{}} }

func (s *fakeSource) publish(t time.Time, subject, data string) uint64 {
	seq := uint64(len(s.msgs)) + 1
	s.msgs = append(s.msgs, Msg{Seq: seq, Subject: subject, Data: []byte(data), Time: t})
	return seq
}

// trim removes every sequence <= seq.
func (s *fakeSource) trim(seq uint64) { s.first = max(s.first, min(seq, s.LastSeq())+1) }

func (s *fakeSource) FirstSeq() uint64 { return s.first }
func (s *fakeSource) LastSeq() uint64  { return uint64(len(s.msgs)) }

func (s *fakeSource) Load(seq uint64) (Msg, error) {
	s.loads++
	if err := s.fail[seq]; err != nil {
		return Msg{}, err
	}
	if seq < s.first {
		return Msg{}, fmt.Errorf("ledger: entry trimmed: %w", ErrGone)
	}
	if seq == 0 || seq > s.LastSeq() {
		return Msg{}, fmt.Errorf("fake: no sequence %d", seq)
	}
	return s.msgs[seq-1], nil
}

func (s *fakeSource) SeqAtTime(t time.Time) (uint64, error) {
	for seq := s.first; seq <= s.LastSeq(); seq++ {
		if !s.msgs[seq-1].Time.Before(t) {
			return seq, nil
		}
	}
	return s.LastSeq() + 1, nil
}

func (s *fakeSource) LastForSubject(subject string) uint64 {
	for seq := s.LastSeq(); seq >= s.first && seq > 0; seq-- {
		if s.msgs[seq-1].Subject == subject {
			return seq
		}
	}
	return 0
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// harness drives one consumer with a manual clock and a driver that
// persists when asked.
type harness struct {
	t         testing.TB
	src       *fakeSource
	c         *Consumer
	now       time.Time
	persisted State
}

func pullCfg(mod func(*jsapi.ConsumerConfig)) jsapi.ConsumerConfig {
	cfg := jsapi.ConsumerConfig{Durable: "proc", AckPolicy: jsapi.AckExplicit, AckWait: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	return cfg
}

// pinCfg is pullCfg for a pinned_client consumer with group "g" and a
// priority_timeout of 5 s.
func pinCfg(mod func(*jsapi.ConsumerConfig)) jsapi.ConsumerConfig {
	return pullCfg(func(c *jsapi.ConsumerConfig) {
		c.PriorityPolicy, c.PriorityGroups, c.PriorityTimeout = jsapi.PriorityPinned, []string{"g"}, 5*time.Second
		if mod != nil {
			mod(c)
		}
	})
}

// pinCounter returns a PinIDs option giving "P1", "P2", … (prefix p, so
// that two lives of a consumer can use different ones).
func pinCounter(p string) PinIDs {
	n := 0
	return func() string { n++; return fmt.Sprintf("%s%d", p, n) }
}

// newHarness creates the consumer over src (fresh) and persists its
// first snapshot, as the driver does on CONSUMER.CREATE.
func newHarness(t testing.TB, src *fakeSource, cfg jsapi.ConsumerConfig, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, src: src, now: t0}
	opts = append([]Option{StreamName("ORDERS")}, opts...)
	c, err := New(cfg, nil, h.now, src, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.c = c
	if outs := h.persist(); len(outs) != 0 {
		t.Fatalf("first persist: %v", outs)
	}
	return h
}

// persist is the driver persisting the current snapshot.
func (h *harness) persist() []Out {
	st, gen, dirty := h.c.Snapshot()
	if !dirty {
		return nil
	}
	h.persisted = st
	return h.c.Persisted(gen)
}

// restart restores a new consumer from the last persisted state.
func (h *harness) restart(opts ...Option) {
	h.t.Helper()
	opts = append([]Option{StreamName("ORDERS")}, opts...)
	st := h.persisted
	c, err := New(h.c.Config(), &st, h.now, h.src, opts...)
	if err != nil {
		h.t.Fatalf("restore: %v", err)
	}
	h.c = c
}

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

func (h *harness) pull(reply string, req jsapi.PullRequest) []Out {
	return h.c.Pull(h.now, reply, req)
}

func (h *harness) ack(o Out, kind jsapi.AckKind) []Out {
	return h.c.Ack(h.now, o.Ack.StreamSeq, o.Ack.ConsumerSeq, jsapi.Ack{Kind: kind}, "")
}

func (h *harness) tick() []Out { return h.c.Tick(h.now) }

func (h *harness) publish(subject, data string) uint64 { return h.src.publish(h.now, subject, data) }

func (h *harness) publishN(n int) {
	for i := 0; i < n; i++ {
		h.publish(fmt.Sprintf("ord.%d", i%3), fmt.Sprintf("m%d", h.src.LastSeq()+1))
	}
}

func kinds(outs []Out, k OutKind) []Out {
	var r []Out
	for _, o := range outs {
		if o.Kind == k {
			r = append(r, o)
		}
	}
	return r
}

func seqsOf(outs []Out) []uint64 {
	var r []uint64
	for _, o := range kinds(outs, Deliver) {
		r = append(r, o.Ack.StreamSeq)
	}
	return r
}

// fmtOuts renders outs compactly for comparisons and failures.
func fmtOuts(outs []Out) string {
	var b strings.Builder
	for i, o := range outs {
		if i > 0 {
			b.WriteString("; ")
		}
		switch o.Kind {
		case Deliver:
			fmt.Fprintf(&b, "%s<-%d(d%d,n%d)", o.Reply, o.Ack.StreamSeq, o.Ack.ConsumerSeq, o.Ack.Delivered)
			if o.PinID != "" {
				fmt.Fprintf(&b, "@%s", o.PinID)
			}
		case Status:
			fmt.Fprintf(&b, "%s<-%d %s", o.Reply, o.Status, o.Description)
			if o.Status == jsapi.StatusTimeout || o.Status == jsapi.StatusConflict {
				fmt.Fprintf(&b, " [%d/%d]", o.PendingMsgs, o.PendingBytes)
			}
		case AckReply:
			fmt.Fprintf(&b, "ackok:%s", o.Reply)
		case Advisory:
			fmt.Fprintf(&b, "maxdeliver:%d(%d)", o.Seq, o.Ack.Delivered)
		case Pinned:
			fmt.Fprintf(&b, "pinned:%s=%s>%s", o.Group, o.PinID, o.Reply)
		case Unpinned:
			fmt.Fprintf(&b, "unpinned:%s(%s)", o.Group, o.Reason)
		}
	}
	return b.String()
}

func expectOuts(t testing.TB, outs []Out, want string) {
	t.Helper()
	if got := fmtOuts(outs); got != want {
		t.Fatalf("outs:\n got %s\nwant %s", got, want)
	}
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkInvariants checks the cursor's internal consistency.
func (c *Consumer) checkInvariants(t fataler) {
	t.Helper()
	md := c.acks.MarkDelete()
	if md > c.delivered {
		t.Fatalf("mark-delete %d above delivered %d", md, c.delivered)
	}
	for s, p := range c.pending {
		if s <= md || s > c.delivered || c.acks.Contains(s) {
			t.Fatalf("pending %d: md %d delivered %d acked %v", s, md, c.delivered, c.acks.Contains(s))
		}
		if p.count == 0 || p.state < stInFlight || p.state > stDelayed {
			t.Fatalf("pending %d: bad entry %+v", s, *p)
		}
		if p.dseq > c.dseq {
			t.Fatalf("pending %d: dseq %d above last %d", s, p.dseq, c.dseq)
		}
	}
	if c.delivered > md {
		acked := c.acks.Count(md+1, c.delivered)
		if want := int(c.delivered-md) - acked; want != len(c.pending)+len(c.held) {
			t.Fatalf("pending %d + held %d, want %d (md %d delivered %d acked %d)", len(c.pending), len(c.held), want, md, c.delivered, acked)
		}
	}
	c.checkKeyShared(t)
	if (c.pin.id == "") != c.pin.ts.IsZero() || (c.pin.id != "" && !c.pinned()) {
		t.Fatalf("pin %+v", c.pin)
	}
	if c.dseq > c.persistedReserved && c.dseq > 0 {
		t.Fatalf("dseq %d above persisted reservation %d", c.dseq, c.persistedReserved)
	}
	if c.cfg.AckPolicy == jsapi.AckNone && len(c.pending) > 0 {
		t.Fatalf("ack none with %d pending", len(c.pending))
	}
}

// checkKeyShared checks the key_shared bookkeeping: a key is bound to one
// puller, exactly while deliveries of it are in flight there; held
// messages are ascending, read past, neither acked nor pending, and
// counted per key; no new message passes a held one of its key.
func (c *Consumer) checkKeyShared(t fataler) {
	t.Helper()
	if c.ks == nil {
		if len(c.keys) > 0 || len(c.held) > 0 {
			t.Fatalf("keys %v held %v without key_shared", c.keys, c.held)
		}
		return
	}
	want := map[string]*binding{}
	for s, p := range c.pending {
		inFlight := p.state == stInFlight && p.keyed && p.reply != ""
		if p.bound != inFlight {
			t.Fatalf("pending %d: bound %v, in flight with a key %v (%+v)", s, p.bound, inFlight, *p)
		}
		if !p.bound {
			continue
		}
		b := want[p.key]
		if b == nil {
			b = &binding{puller: p.reply}
			want[p.key] = b
		}
		if b.puller != p.reply {
			t.Fatalf("key %q in flight at %s and %s", p.key, b.puller, p.reply)
		}
		b.n++
	}
	if len(want) != len(c.keys) {
		t.Fatalf("keys %d, want %d", len(c.keys), len(want))
	}
	for k, b := range want {
		if got := c.keys[k]; got == nil || *got != *b {
			t.Fatalf("key %q bound %+v, want %+v", k, got, *b)
		}
	}
	counts, unkeyed := map[string]int{}, 0
	for i, h := range c.held {
		if i > 0 && h.seq <= c.held[i-1].seq {
			t.Fatalf("held not ascending: %v", c.held)
		}
		if h.seq > c.delivered || c.acks.Contains(h.seq) || c.pending[h.seq] != nil {
			t.Fatalf("held %d: delivered %d acked %v pending %v", h.seq, c.delivered, c.acks.Contains(h.seq), c.pending[h.seq] != nil)
		}
		if h.keyed {
			counts[h.key]++
		} else {
			unkeyed++
		}
	}
	if unkeyed != c.heldUnkeyed || len(counts) != len(c.heldKeys) {
		t.Fatalf("held keys %v (%d unkeyed), counted %v (%d)", counts, unkeyed, c.heldKeys, c.heldUnkeyed)
	}
	for k, n := range counts {
		if c.heldKeys[k] != n {
			t.Fatalf("held key %q: %d, counted %d", k, n, c.heldKeys[k])
		}
	}
}
