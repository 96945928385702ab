// Package quotasim is a deterministic simulation of the mesh-wide quota
// core (tenancy/quota): regions of brokers and a coordinator each, every
// node with a clock of its own (an offset from the mesh's time, for
// skew), messages over links with latency, jitter, loss and cuts, and
// publishers offering a rate at each broker. It plays the drivers' part:
// brokers report and coordinators tick every interval, messages go
// through Encode and DecodeMsg, and every admission is recorded with the
// mesh's (global) time, so tests and benchmarks can check what the mesh
// admitted over any window.
//
// Time is manual: Run advances it in steps (Config.Step), processing
// every event (publish, report, tick, delivery) at its exact time in
// order. Nothing here reads the clock or starts a goroutine; the same
// Config and calls give the same results on every run.
package quotasim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stratamesh/strata/tenancy/quota"
)

// Config describes a simulated mesh.
type Config struct {
	// Regions are the regions' names (at least one).
	Regions []string
	// Brokers is each region's number of brokers (default 1).
	Brokers int
	// Tenant is the one tenant simulated (default "t"), with Limits.
	Tenant string
	Limits quota.Limits
	// Step is Run's step, at which connection counts are sampled
	// (default 10 ms).
	Step time.Duration
	// Interval is how often brokers report and coordinators tick
	// (default quota.DefaultInterval).
	Interval time.Duration
	// LeaseTTL and Depth configure the brokers and coordinators (quota's
	// defaults when 0).
	LeaseTTL time.Duration
	Depth    time.Duration
	// LAN and WAN are the one-way latencies inside a region (default
	// 1 ms) and between regions (default 40 ms); Jitter is added to
	// each message, uniform in [0, Jitter).
	LAN, WAN, Jitter time.Duration
	// Skew is each region's clock offset from the mesh's time.
	Skew map[string]time.Duration
	// Size is each publish's size in bytes (default 100).
	Size int
	// Seed seeds the jitter, loss and phases.
	Seed int64
}

func (c *Config) fill() error {
	if len(c.Regions) == 0 {
		return errors.New("quotasim: no regions")
	}
	seen := map[string]bool{}
	for _, r := range c.Regions {
		if r == "" || strings.ContainsAny(r, "/ ") || seen[r] {
			return fmt.Errorf("quotasim: bad or repeated region name %q", r)
		}
		seen[r] = true
	}
	if c.Brokers <= 0 {
		c.Brokers = 1
	}
	if c.Tenant == "" {
		c.Tenant = "t"
	}
	if c.Step <= 0 {
		c.Step = 10 * time.Millisecond
	}
	if c.Interval <= 0 {
		c.Interval = quota.DefaultInterval
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = quota.DefaultLeaseTTL
	}
	if c.Depth <= 0 {
		c.Depth = quota.DefaultDepth
	}
	if c.LAN <= 0 {
		c.LAN = time.Millisecond
	}
	if c.WAN <= 0 {
		c.WAN = 40 * time.Millisecond
	}
	if c.Size <= 0 {
		c.Size = 100
	}
	return nil
}

// Epoch is the mesh's time 0 on every node's clock (plus its skew).
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Sim is a simulated mesh.
type Sim struct {
	cfg     Config
	now     time.Duration
	seq     uint64
	events  eventHeap
	rng     *rand.Rand
	regions []*region
	brokers []*Broker
	byAddr  map[string]*Broker
	cut     map[[2]string]bool
	loss    map[[2]string]float64
	// Counters of messages, for reports.
	Sent, Lost, Delivered int
	log                   []Sent
	maxConns              int
	connSamples           []connSample
}

type region struct {
	name    string
	brokers []*Broker
	coords  []*Coord // every incarnation started, oldest first
	skew    time.Duration
}

// Broker is one simulated broker.
type Broker struct {
	ID     string // "<region>-<i>"
	Region string
	Q      *quota.Broker
	skew   time.Duration
	phase  time.Duration
	rate   float64       // offered msgs/s
	next   time.Duration // next arrival
	gen    uint64        // arrival generation (a rate change restarts arrivals)
	// Admits are the global times of its admitted publishes, in order.
	Admits  []time.Duration
	Offered int
	// Connections: attempts per second, how long each lasts.
	connRate float64
	connHold time.Duration
	connNext time.Duration
	connGen  uint64
	Conns    int
	Refused  int
}

// Coord is one incarnation of a region's coordinator.
type Coord struct {
	Region string
	Term   uint64
	Q      *quota.Coordinator
	skew   time.Duration
	phase  time.Duration
	alive  bool
}

type connSample struct {
	at    time.Duration
	total int
	per   map[string]int
}

// New is a mesh at time 0: every broker and a coordinator (term 1) per
// region, the tenant set everywhere, nothing offered.
func New(cfg Config) (*Sim, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), byAddr: map[string]*Broker{},
		cut: map[[2]string]bool{}, loss: map[[2]string]float64{}}
	for _, name := range cfg.Regions {
		r := &region{name: name, skew: cfg.Skew[name]}
		s.regions = append(s.regions, r)
		for i := range cfg.Brokers {
			id := fmt.Sprintf("%s-%d", name, i)
			b := &Broker{ID: id, Region: name, skew: r.skew,
				phase: time.Duration(s.rng.Int63n(int64(cfg.Interval)))}
			b.Q = quota.NewBroker(quota.BrokerConfig{ID: id, LeaseTTL: cfg.LeaseTTL, Depth: cfg.Depth})
			b.Q.SetTenant(cfg.Tenant, cfg.Limits, quota.BrokerBase(cfg.Limits, name, len(cfg.Regions), cfg.Brokers), s.local(b.skew))
			r.brokers = append(r.brokers, b)
			s.brokers = append(s.brokers, b)
			s.byAddr["broker/"+id] = b
			s.schedule(b.phase, evReport, b, nil)
		}
		s.startCoord(r, 1)
	}
	return s, nil
}

func (s *Sim) startCoord(r *region, term uint64) *Coord {
	c := &Coord{Region: r.name, Term: term, skew: r.skew, alive: true,
		phase: time.Duration(s.rng.Int63n(int64(s.cfg.Interval)))}
	c.Q = quota.NewCoordinator(quota.CoordConfig{Region: r.name, Regions: s.cfg.Regions, Term: term,
		Brokers: s.cfg.Brokers, Interval: s.cfg.Interval, LeaseTTL: s.cfg.LeaseTTL}, s.local(c.skew))
	c.Q.SetTenant(s.cfg.Tenant, s.cfg.Limits)
	r.coords = append(r.coords, c)
	s.schedule(s.now+c.phase, evTick, nil, c)
	return c
}

// local is a node's clock now.
func (s *Sim) local(skew time.Duration) time.Time { return Epoch.Add(s.now + skew) }

// Clock is region's clock now (the mesh's time plus its skew).
func (s *Sim) Clock(regionName string) time.Time { return s.local(s.cfg.Skew[regionName]) }

// Now is the mesh's time since the start.
func (s *Sim) Now() time.Duration { return s.now }

// Config is the simulation's configuration, defaults filled in.
func (s *Sim) Config() Config { return s.cfg }

// Brokers are every broker, region by region.
func (s *Sim) Brokers() []*Broker { return s.brokers }

func (s *Sim) region(name string) (*region, error) {
	for _, r := range s.regions {
		if r.name == name {
			return r, nil
		}
	}
	return nil, fmt.Errorf("quotasim: no region %q", name)
}

// Offer sets the rate (msgs/s) region's publishers offer, split evenly
// between its brokers; arrivals are evenly spaced from now.
func (s *Sim) Offer(regionName string, rate float64) error {
	r, err := s.region(regionName)
	if err != nil {
		return err
	}
	if rate < 0 || math.IsNaN(rate) {
		return fmt.Errorf("quotasim: offer %v for %s: want a rate ≥ 0", rate, regionName)
	}
	for i, b := range r.brokers {
		b.rate = rate / float64(len(r.brokers))
		b.gen++
		if b.rate > 0 {
			// Stagger the brokers' first arrivals within one gap.
			gap := time.Duration(float64(time.Second) / b.rate)
			b.next = s.now + gap*time.Duration(i+1)/time.Duration(len(r.brokers)+1)
			s.schedule(b.next, evArrive, b, nil).gen = b.gen
		}
	}
	return nil
}

// Connect sets region's connection attempts (per second, split evenly
// between its brokers), each accepted one lasting hold.
func (s *Sim) Connect(regionName string, rate float64, hold time.Duration) error {
	r, err := s.region(regionName)
	if err != nil {
		return err
	}
	for i, b := range r.brokers {
		b.connRate, b.connHold = rate/float64(len(r.brokers)), hold
		b.connGen++
		if b.connRate > 0 {
			gap := time.Duration(float64(time.Second) / b.connRate)
			b.connNext = s.now + gap*time.Duration(i+1)/time.Duration(len(r.brokers)+1)
			s.schedule(b.connNext, evConnect, b, nil).gen = b.connGen
		}
	}
	return nil
}

// node names a sim node for cuts: "<region>/<broker id>" or
// "<region>/coord".
func brokerNode(b *Broker) string { return b.Region + "/" + b.ID }
func coordNode(c *Coord) string   { return c.Region + "/coord" }

func regionOf(node string) string { r, _, _ := strings.Cut(node, "/"); return r }

// Cut cuts the links between a and b both ways: each a region name or a
// node ("<region>/<broker id>", "<region>/coord"). Messages in flight on
// them are lost.
func (s *Sim) Cut(a, b string) { s.cut[[2]string{a, b}], s.cut[[2]string{b, a}] = true, true }

// CutOneWay cuts the link from a to b only.
func (s *Sim) CutOneWay(a, b string) { s.cut[[2]string{a, b}] = true }

// Heal restores the links between a and b (both ways).
func (s *Sim) Heal(a, b string) {
	delete(s.cut, [2]string{a, b})
	delete(s.cut, [2]string{b, a})
}

// Isolate cuts region off from every other region; Rejoin heals it.
func (s *Sim) Isolate(regionName string) {
	for _, r := range s.regions {
		if r.name != regionName {
			s.Cut(regionName, r.name)
		}
	}
}

// Rejoin heals every link of region to the others.
func (s *Sim) Rejoin(regionName string) {
	for _, r := range s.regions {
		if r.name != regionName {
			s.Heal(regionName, r.name)
		}
	}
}

// SetLoss makes the links between regions (or nodes) a and b drop each
// message with probability p.
func (s *Sim) SetLoss(a, b string, p float64) {
	s.loss[[2]string{a, b}], s.loss[[2]string{b, a}] = p, p
}

func (s *Sim) isCut(src, dst string) bool {
	rs, rd := regionOf(src), regionOf(dst)
	return s.cut[[2]string{rs, rd}] || s.cut[[2]string{src, dst}] || s.cut[[2]string{rs, dst}] || s.cut[[2]string{src, rd}]
}

func (s *Sim) lossOf(src, dst string) float64 {
	rs, rd := regionOf(src), regionOf(dst)
	return math.Max(math.Max(s.loss[[2]string{rs, rd}], s.loss[[2]string{src, dst}]),
		math.Max(s.loss[[2]string{rs, dst}], s.loss[[2]string{src, rd}]))
}

// Failover starts a new incarnation of region's coordinator (the next
// term); the old one keeps running until Stop.
func (s *Sim) Failover(regionName string) (*Coord, error) {
	r, err := s.region(regionName)
	if err != nil {
		return nil, err
	}
	return s.startCoord(r, r.coords[len(r.coords)-1].Term+1), nil
}

// Stop stops the incarnation term of region's coordinator: it ticks no
// more and takes no messages.
func (s *Sim) Stop(regionName string, term uint64) error {
	r, err := s.region(regionName)
	if err != nil {
		return err
	}
	for _, c := range r.coords {
		if c.Term == term {
			c.alive = false
			return nil
		}
	}
	return fmt.Errorf("quotasim: %s has no coordinator of term %d", regionName, term)
}

// Coordinator is region's newest running coordinator (nil if none).
func (s *Sim) Coordinator(regionName string) *Coord {
	r, err := s.region(regionName)
	if err != nil {
		return nil
	}
	for i := len(r.coords) - 1; i >= 0; i-- {
		if r.coords[i].alive {
			return r.coords[i]
		}
	}
	return nil
}

// Run advances the mesh's time by d, in steps.
func (s *Sim) Run(d time.Duration) {
	end := s.now + d
	for s.now < end {
		stepEnd := min(s.now+s.cfg.Step, end)
		for len(s.events) > 0 && s.events[0].at < stepEnd {
			e := heap.Pop(&s.events).(*event)
			s.now = e.at
			s.handle(e)
		}
		s.now = stepEnd
		s.sample()
	}
}

func (s *Sim) sample() {
	total := 0
	per := map[string]int{}
	for _, b := range s.brokers {
		total += b.Conns
		per[b.Region] += b.Conns
	}
	s.connSamples = append(s.connSamples, connSample{at: s.now, total: total, per: per})
	s.maxConns = max(s.maxConns, total)
}

type evKind uint8

const (
	evArrive evKind = iota
	evReport
	evTick
	evDeliver
	evConnect
	evRelease
)

type event struct {
	at    time.Duration
	seq   uint64
	kind  evKind
	b     *Broker
	c     *Coord
	gen   uint64
	wire  []byte
	to    string // address
	term  uint64 // ToTerm
	src   string // node
	dst   string // node (resolved at send)
	index int
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (s *Sim) schedule(at time.Duration, kind evKind, b *Broker, c *Coord) *event {
	s.seq++
	e := &event{at: at, seq: s.seq, kind: kind, b: b, c: c}
	heap.Push(&s.events, e)
	return e
}

func (s *Sim) handle(e *event) {
	switch e.kind {
	case evArrive:
		b := e.b
		if e.gen != b.gen || b.rate <= 0 {
			return
		}
		b.Offered++
		if b.Q.Admit(s.cfg.Tenant, s.cfg.Size, s.local(b.skew)) == nil {
			b.Admits = append(b.Admits, s.now)
		}
		b.next += time.Duration(float64(time.Second) / b.rate)
		s.schedule(b.next, evArrive, b, nil).gen = b.gen
	case evConnect:
		b := e.b
		if e.gen != b.connGen || b.connRate <= 0 {
			return
		}
		if b.Q.Acquire(s.cfg.Tenant, quota.Connections, s.local(b.skew)) == nil {
			b.Conns++
			s.schedule(s.now+b.connHold, evRelease, b, nil)
		} else {
			b.Refused++
		}
		b.connNext += time.Duration(float64(time.Second) / b.connRate)
		s.schedule(b.connNext, evConnect, b, nil).gen = b.connGen
	case evRelease:
		e.b.Q.Release(s.cfg.Tenant, quota.Connections)
		e.b.Conns--
	case evReport:
		s.report(e.b)
		s.schedule(s.now+s.cfg.Interval, evReport, e.b, nil)
	case evTick:
		c := e.c
		if !c.alive {
			return
		}
		for _, m := range c.Q.Tick(s.local(c.skew)) {
			s.send(coordNode(c), m)
		}
		s.schedule(s.now+s.cfg.Interval, evTick, nil, c)
	case evDeliver:
		s.deliver(e)
	}
}

// report is a broker's driver at its interval: its reports, and a hello
// to each running coordinator of its region it has no report for (the
// coordinator's announcement, in a real mesh).
func (s *Sim) report(b *Broker) {
	now := s.local(b.skew)
	msgs := b.Q.Report(now)
	r, _ := s.region(b.Region)
	for _, c := range r.coords {
		if !c.alive {
			continue
		}
		found := false
		for _, m := range msgs {
			if m.To == c.Q.From() && m.ToTerm == c.Term {
				found = true
			}
		}
		if !found {
			h := b.Q.Hello(now)
			h.To, h.ToTerm = c.Q.From(), c.Term
			msgs = append(msgs, h)
		}
	}
	for _, m := range msgs {
		s.send(brokerNode(b), m)
	}
}

// Sent is a message sent, at the mesh's time.
type Sent struct {
	At  time.Duration
	Msg *quota.Msg
}

// SentLog is every message sent so far, in order (lost ones included).
func (s *Sim) SentLog() []Sent { return s.log }

func (s *Sim) send(src string, m *quota.Msg) {
	s.Sent++
	s.log = append(s.log, Sent{At: s.now, Msg: m})
	ev := &event{kind: evDeliver, wire: m.Encode(), to: m.To, term: m.ToTerm, src: src}
	var dst string
	if b := s.byAddr[m.To]; b != nil {
		dst = brokerNode(b)
	} else if r, ok := strings.CutPrefix(m.To, "region/"); ok {
		dst = r + "/coord"
	} else {
		s.Lost++
		return
	}
	ev.dst = dst
	lat := s.cfg.LAN
	if regionOf(src) != regionOf(dst) {
		lat = s.cfg.WAN
	}
	if s.cfg.Jitter > 0 {
		lat += time.Duration(s.rng.Int63n(int64(s.cfg.Jitter)))
	}
	if s.isCut(src, dst) || s.rng.Float64() < s.lossOf(src, dst) {
		s.Lost++
		return
	}
	s.seq++
	ev.at, ev.seq = s.now+lat, s.seq
	heap.Push(&s.events, ev)
}

func (s *Sim) deliver(e *event) {
	if s.isCut(e.src, e.dst) {
		s.Lost++
		return
	}
	m, err := quota.DecodeMsg(e.wire)
	if err != nil {
		panic(fmt.Sprintf("quotasim: a message the core encoded does not decode: %v", err))
	}
	if b := s.byAddr[e.to]; b != nil {
		s.Delivered++
		b.Q.Receive(m, s.local(b.skew))
		return
	}
	r, err := s.region(regionOf(e.dst))
	if err != nil {
		s.Lost++
		return
	}
	// The driver routes to the incarnation addressed if it runs, else to
	// the region's newest running one.
	var to *Coord
	for _, c := range r.coords {
		if c.alive && c.Term == e.term {
			to = c
		}
	}
	for i := len(r.coords) - 1; to == nil && i >= 0; i-- {
		if r.coords[i].alive {
			to = r.coords[i]
		}
	}
	if to == nil {
		s.Lost++
		return
	}
	s.Delivered++
	to.Q.Receive(m, s.local(to.skew))
}

// Admitted is how many publishes the brokers of region ("" for all)
// admitted in [from, to) (mesh time).
func (s *Sim) Admitted(regionName string, from, to time.Duration) int {
	n := 0
	for _, b := range s.brokers {
		if regionName != "" && b.Region != regionName {
			continue
		}
		lo := sort.Search(len(b.Admits), func(i int) bool { return b.Admits[i] >= from })
		hi := sort.Search(len(b.Admits), func(i int) bool { return b.Admits[i] >= to })
		n += hi - lo
	}
	return n
}

// Rate is region's ("" for all) admitted msgs/s over [from, to).
func (s *Sim) Rate(regionName string, from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	return float64(s.Admitted(regionName, from, to)) / (to - from).Seconds()
}

// MaxWindow is the most publishes region's brokers ("" for all)
// admitted in any window of length w inside [from, to), and where the
// first such window starts.
func (s *Sim) MaxWindow(regionName string, w, from, to time.Duration) (int, time.Duration) {
	if regionName == "" {
		return s.MaxWindowIn(nil, w, from, to)
	}
	return s.MaxWindowIn([]string{regionName}, w, from, to)
}

// MaxWindowIn is MaxWindow for the brokers of regions together (nil:
// all).
func (s *Sim) MaxWindowIn(regions []string, w, from, to time.Duration) (int, time.Duration) {
	var all []time.Duration
	for _, b := range s.brokers {
		if regions != nil && !slices.Contains(regions, b.Region) {
			continue
		}
		lo := sort.Search(len(b.Admits), func(i int) bool { return b.Admits[i] >= from })
		hi := sort.Search(len(b.Admits), func(i int) bool { return b.Admits[i] >= to })
		all = append(all, b.Admits[lo:hi]...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if to-from <= w {
		return len(all), from
	}
	count := func(x time.Duration) int {
		lo := sort.Search(len(all), func(k int) bool { return all[k] >= x })
		hi := sort.Search(len(all), func(k int) bool { return all[k] >= x+w })
		return hi - lo
	}
	// The fullest window can be slid right until it starts at an
	// admission, or until it ends at to.
	best, at := count(to-w), to-w
	j := 0
	for i, x := range all {
		if x > to-w {
			break
		}
		for j < len(all) && all[j] < x+w {
			j++
		}
		if n := j - i; n > best || (n == best && x < at) {
			best, at = n, x
		}
	}
	return best, at
}

// Conns is region's ("" for all) connections now.
func (s *Sim) Conns(regionName string) int {
	n := 0
	for _, b := range s.brokers {
		if regionName == "" || b.Region == regionName {
			n += b.Conns
		}
	}
	return n
}

// MaxConns is the most connections region ("" for all) held at any step
// in [from, to).
func (s *Sim) MaxConns(regionName string, from, to time.Duration) int {
	best := 0
	for _, c := range s.connSamples {
		if c.at < from || c.at >= to {
			continue
		}
		v := c.total
		if regionName != "" {
			v = c.per[regionName]
		}
		best = max(best, v)
	}
	return best
}

// ConnRefused is how many connection attempts region's ("" for all)
// brokers refused.
func (s *Sim) ConnRefused(regionName string) int {
	n := 0
	for _, b := range s.brokers {
		if regionName == "" || b.Region == regionName {
			n += b.Refused
		}
	}
	return n
}

// Regions are the regions' names in the order configured.
func (s *Sim) Regions() []string { return append([]string(nil), s.cfg.Regions...) }

// Epsilon is the ε of the rate bound for this mesh's publish_rate
// (quota.Epsilon): the buckets' depth plus one publish per broker.
func (s *Sim) Epsilon() float64 {
	return quota.Epsilon(s.cfg.Limits.Mesh[quota.PublishRate], len(s.brokers), 1, s.cfg.Depth)
}
