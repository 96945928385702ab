package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// warmups is how many warm-up messages (sequence 0) each region must
// receive before the measured publishing starts.
const warmups = 20

// receiver is a core NATS subscriber in one region. Its handler runs on
// the subscription's one goroutine; mu guards what the phase reads.
type receiver struct {
	name   string
	nc     *nats.Conn
	mu     sync.Mutex
	seen   []bool // by sequence
	count  int    // distinct sequences received
	dups   int
	warm   int
	noHdr  int // copies without Strata-Origin-Time
	lags   []time.Duration
	olags  []time.Duration
	recvAt []int64 // by sequence: when the copy arrived (Unix ns; 0: not yet)
	last   time.Time
	asyncE atomic.Value // the connection's last async error (slow consumer…)
}

func (rc *receiver) handle(m *nats.Msg) {
	now := time.Now()
	if len(m.Data) < 16 {
		return
	}
	seq := binary.BigEndian.Uint64(m.Data)
	sent := time.Unix(0, int64(binary.BigEndian.Uint64(m.Data[8:])))
	var olag time.Duration
	ot, err := time.Parse(time.RFC3339Nano, m.Header.Get("Strata-Origin-Time"))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if seq == 0 {
		rc.warm++
		return
	}
	for uint64(len(rc.seen)) <= seq {
		rc.seen = append(rc.seen, make([]bool, len(rc.seen)+1024)...)
	}
	if rc.seen[seq] {
		rc.dups++
		return
	}
	rc.seen[seq] = true
	for uint64(len(rc.recvAt)) <= seq {
		rc.recvAt = append(rc.recvAt, make([]int64, len(rc.recvAt)+1024)...)
	}
	rc.recvAt[seq] = now.UnixNano()
	rc.count++
	rc.last = now
	rc.lags = append(rc.lags, now.Sub(sent))
	if err != nil {
		rc.noHdr++
		return
	}
	olag = now.Sub(ot)
	rc.olags = append(rc.olags, olag)
}

func (rc *receiver) snapshot() (count, warm int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.count, rc.warm
}

// regionResult is one receiving region's figures of a phase.
type regionResult struct {
	name                 string
	received, dups, miss int
	noHdr                int
	rate                 float64 // distinct messages received ÷ (last receipt − start)
	p50, p90, p99, max   time.Duration
	originP50, originP99 time.Duration
	// commitP50, commitP99: a copy's arrival minus the moment the
	// publisher got that message's PubAck (the origin's commit as the
	// client saw it): the replication part of the lag alone. early
	// counts copies that arrived before their PubAck did (counted as 0).
	commitP50, commitP99 time.Duration
	early                int
	asyncErr             string
}

// phaseResult is one rate's figures.
type phaseResult struct {
	name, topic       string
	target            int
	sent, acked       int
	pubErrs           int
	firstPubErr       string
	pubRate           float64 // acked ÷ (last PubAck − start)
	pubTime           time.Duration
	maxSlip           time.Duration // paced: the latest a message went out against its schedule
	ackP50, ackP99    time.Duration
	owners            []string
	regions           []regionResult
	cursorLagEnd      map[string]uint64 // by remote, when the last PubAck arrived
	cursorStateEnd    map[string]string
	cursorLagDrained  map[string]uint64 // by remote, after the drain
	cursorResent      map[string]uint64
	drainTime         time.Duration // last PubAck → every region received every acked message
	cursorZeroTime    time.Duration // last PubAck → both cursors report lag_msgs 0
	drainedCompletely bool
	cpu               cpuUse // from the first publish until every region received every acked message
}

// phase publishes at rate (0: as fast as the window allows) for
// o.duration in the first region and measures the copies in the others.
func (m *mesh) phase(o options, rate int) (*phaseResult, error) {
	res := &phaseResult{name: rateName(rate), target: rate, topic: "lag" + rateName(rate),
		cursorLagEnd: map[string]uint64{}, cursorStateEnd: map[string]string{},
		cursorLagDrained: map[string]uint64{}, cursorResent: map[string]uint64{}}
	subject := "demo.geo." + res.topic
	topicPath := "demo/geo/" + res.topic
	src := m.regions[0]

	var rcs []*receiver
	defer func() {
		for _, rc := range rcs {
			rc.nc.Close()
		}
	}()
	for _, r := range m.regions[1:] {
		rc := &receiver{name: r.name}
		nc, err := nats.Connect(r.brokers[0].report.NATS, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			rc.asyncE.Store(err.Error())
		}))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		rc.nc = nc
		rcs = append(rcs, rc)
		sub, err := nc.Subscribe(subject, rc.handle)
		if err != nil {
			return nil, err
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			return nil, err
		}
		if err := nc.Flush(); err != nil {
			return nil, err
		}
	}

	var (
		ackMu   sync.Mutex
		ackAt   []int64 // by sequence: when its PubAck arrived (Unix ns)
		ackLats []time.Duration
		lastAck time.Time
		acked   atomic.Int64
		errs    atomic.Int64
		errMsg  atomic.Value
	)
	nc, err := nats.Connect(src.brokers[0].report.NATS)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	window := o.window
	if rate > 0 {
		window = o.pending
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
			now := time.Now()
			if binary.BigEndian.Uint64(m.Data) == 0 {
				return
			}
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(m.Data[8:])))
			seq := binary.BigEndian.Uint64(m.Data)
			acked.Add(1)
			ackMu.Lock()
			for uint64(len(ackAt)) <= seq {
				ackAt = append(ackAt, make([]int64, len(ackAt)+1024)...)
			}
			ackAt[seq] = now.UnixNano()
			ackLats = append(ackLats, now.Sub(sent))
			lastAck = now
			ackMu.Unlock()
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			errs.Add(1)
			errMsg.CompareAndSwap(nil, err.Error())
		}))
	if err != nil {
		return nil, err
	}

	// Warm-up: create the topic here and, through replication, in the
	// other regions; publish until both regions receive the copies (a
	// region's brokers may still be connecting their routes, and core
	// NATS delivers only to the interest there is).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	warm := make([]byte, o.size)
	for ready := false; !ready; {
		if _, err := js.Publish(ctx, subject, warm); err != nil {
			return nil, fmt.Errorf("warm-up publish: %w", err)
		}
		ready = true
		for _, rc := range rcs {
			if _, w := rc.snapshot(); w < warmups {
				ready = false
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range m.regions {
		owner := "?"
		if st, err := m.stats(r, topicPath); err == nil && st.Owner != "" {
			owner = strings.TrimPrefix(st.Owner, r.name+".")
		}
		res.owners = append(res.owners, r.name+" "+owner)
	}

	// Publish: a 1 ms ticker releases what the rate makes due; at "max"
	// the window of outstanding acks is the only brake. Publishing stops
	// at o.duration even when behind the rate (the shortfall shows as a
	// lower published rate; slip is how late a message went out against
	// its schedule, start + seq/rate).
	cpu0 := m.sampleCPU()
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := 0
	for time.Since(start) < o.duration {
		due := sent + 256
		if rate > 0 {
			due = int(float64(rate)*time.Since(start).Seconds()) + 1
		}
		for sent < due {
			now := time.Now()
			if now.Sub(start) >= o.duration {
				break
			}
			if rate > 0 {
				res.maxSlip = max(res.maxSlip, now.Sub(start.Add(time.Duration(float64(sent)*float64(time.Second)/float64(rate)))))
			}
			data := make([]byte, o.size)
			binary.BigEndian.PutUint64(data, uint64(sent+1))
			binary.BigEndian.PutUint64(data[8:], uint64(now.UnixNano()))
			if _, err := js.PublishAsync(subject, data, jetstream.WithStallWait(30*time.Second)); err != nil {
				return nil, fmt.Errorf("publish %d: %w", sent+1, err)
			}
			sent++
		}
		if rate > 0 {
			<-tick.C
		}
	}
	res.sent = sent
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%d publishes still unacknowledged 60 s after the last", js.PublishAsyncPending())
	}
	ackMu.Lock()
	res.acked, res.pubErrs = int(acked.Load()), int(errs.Load())
	if v := errMsg.Load(); v != nil {
		res.firstPubErr = v.(string)
	}
	endAck := lastAck
	res.pubTime = endAck.Sub(start)
	res.pubRate = float64(res.acked) / res.pubTime.Seconds()
	if len(ackLats) > 0 {
		res.ackP50, res.ackP99 = pct(ackLats, 0.50), pct(ackLats, 0.99)
	}
	ackMu.Unlock()

	// The replicator cursors right after the last PubAck.
	if st, err := m.stats(src, topicPath); err == nil && st.Replication != nil {
		for _, c := range st.Replication.Cursors {
			res.cursorLagEnd[c.Remote], res.cursorStateEnd[c.Remote] = c.LagMsgs, c.State
		}
	}

	// Drain: every acknowledged message in every region, then both
	// cursors at lag 0 (their status is up to a second old).
	deadline := time.Now().Add(o.drain)
	for {
		done := true
		for _, rc := range rcs {
			if n, _ := rc.snapshot(); n < res.acked {
				done = false
			}
		}
		if done {
			res.drainTime, res.drainedCompletely = time.Since(endAck), true
			res.cpu = m.cpuReport(cpu0, m.sampleCPU())
			break
		}
		if time.Now().After(deadline) {
			res.cpu = m.cpuReport(cpu0, m.sampleCPU())
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	zeroBy := time.Now().Add(30 * time.Second)
	for {
		st, err := m.stats(src, topicPath)
		zero := err == nil && st.Replication != nil && len(st.Replication.Cursors) == len(m.regions)-1
		if zero {
			for _, c := range st.Replication.Cursors {
				res.cursorLagDrained[c.Remote], res.cursorResent[c.Remote] = c.LagMsgs, c.Resent
				zero = zero && c.LagMsgs == 0
			}
		}
		if zero {
			res.cursorZeroTime = time.Since(endAck)
			break
		}
		if time.Now().After(zeroBy) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, rc := range rcs {
		rc.mu.Lock()
		rr := regionResult{name: rc.name, received: rc.count, dups: rc.dups, miss: res.acked - rc.count, noHdr: rc.noHdr}
		if len(rc.lags) > 0 {
			rr.rate = float64(rc.count) / rc.last.Sub(start).Seconds()
			rr.p50, rr.p90, rr.p99, rr.max = pct(rc.lags, 0.50), pct(rc.lags, 0.90), pct(rc.lags, 0.99), slices.Max(rc.lags)
		}
		if len(rc.olags) > 0 {
			rr.originP50, rr.originP99 = pct(rc.olags, 0.50), pct(rc.olags, 0.99)
		}
		ackMu.Lock()
		var clags []time.Duration
		for seq, at := range rc.recvAt {
			if at == 0 || seq >= len(ackAt) || ackAt[seq] == 0 {
				continue
			}
			d := time.Duration(at - ackAt[seq])
			if d < 0 {
				rr.early++
				d = 0
			}
			clags = append(clags, d)
		}
		ackMu.Unlock()
		if len(clags) > 0 {
			rr.commitP50, rr.commitP99 = pct(clags, 0.50), pct(clags, 0.99)
		}
		if v := rc.asyncE.Load(); v != nil {
			rr.asyncErr = v.(string)
		}
		rc.mu.Unlock()
		res.regions = append(res.regions, rr)
	}
	return res, nil // a drain that did not complete is reported as loss
}

// pct is the p-quantile (0..1) of d (sorted in place).
func pct(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// print writes the phase's details.
func (r *phaseResult) print(w io.Writer) {
	target := "max (window-bound)"
	if r.target > 0 {
		target = fmt.Sprintf("%d msgs/s", r.target)
	}
	fmt.Fprintf(w, "\n## rate %s, topic demo/geo/%s (owners: %s)\n", target, r.topic, strings.Join(r.owners, ", "))
	fmt.Fprintf(w, "published %d, acked %d in %v = %.0f msgs/s; PubAck p50 %s ms, p99 %s ms; publish errors %d %s",
		r.sent, r.acked, r.pubTime.Round(time.Millisecond), r.pubRate, msf(r.ackP50), msf(r.ackP99), r.pubErrs, r.firstPubErr)
	if r.target > 0 {
		fmt.Fprintf(w, "; publisher at most %s ms behind schedule", msf(r.maxSlip))
	}
	fmt.Fprintln(w)
	for _, rg := range r.regions {
		fmt.Fprintf(w, "%s: received %d of %d acked (missing %d, duplicates %d, without origin time %d), %.0f msgs/s; lag p50 %s p90 %s p99 %s max %s ms; from Strata-Origin-Time p50 %s p99 %s ms; after the PubAck p50 %s p99 %s ms (%d copies before their PubAck)",
			rg.name, rg.received, r.acked, rg.miss, rg.dups, rg.noHdr, rg.rate, msf(rg.p50), msf(rg.p90), msf(rg.p99), msf(rg.max), msf(rg.originP50), msf(rg.originP99),
			msf(rg.commitP50), msf(rg.commitP99), rg.early)
		if rg.asyncErr != "" {
			fmt.Fprintf(w, "; async error: %s", rg.asyncErr)
		}
		fmt.Fprintln(w)
	}
	var end, drained []string
	for _, rg := range r.regions {
		end = append(end, fmt.Sprintf("→%s %d (%s)", rg.name, r.cursorLagEnd[rg.name], r.cursorStateEnd[rg.name]))
		drained = append(drained, fmt.Sprintf("→%s %d (resent %d)", rg.name, r.cursorLagDrained[rg.name], r.cursorResent[rg.name]))
	}
	fmt.Fprintf(w, "replicator cursors lag_msgs at the last PubAck: %s\n", strings.Join(end, ", "))
	if r.drainedCompletely {
		fmt.Fprintf(w, "every acked message in every region %v after the last PubAck\n", r.drainTime.Round(time.Millisecond))
	} else {
		fmt.Fprintln(w, "NOT every acked message arrived before the drain deadline")
	}
	zero := "not 0 within 30 s of the drain"
	if r.cursorZeroTime > 0 {
		zero = fmt.Sprintf("0 %v after the last PubAck", r.cursorZeroTime.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "replicator cursors lag_msgs after the drain: %s; %s\n", strings.Join(drained, ", "), zero)
	fmt.Fprintln(w, r.cpu.detail)
}
