package quota_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy/quota"
)

// countMesh is a lock-step mesh of brokers and one coordinator (term 1)
// per region, driven as quotanet drives them: every interval each broker
// reports to its region's coordinator (a hello, addressed to the newest
// term, once the coordinator has announced itself and before it has
// sent anything), each coordinator ticks, and every message goes to its
// To: inside a region at once, between regions at the next step. A
// message between regions with no ToTerm travels on the hello subject
// (wan.0) and arrives stripped of all but From, Term and Sent; one that
// names a term no coordinator runs is lost. The driver also sends a
// hello to each region its coordinator sent nothing to.
type countMesh struct {
	t         *testing.T
	now       time.Time
	regions   []string
	brokers   map[string][]*meshBroker
	coords    map[string]*quota.Coordinator
	announced map[string]bool
	wan       []*quota.Msg
	limits    quota.Limits
	steps     int
}

type meshBroker struct {
	id, region string
	q          *quota.Broker
	conns      int
}

const meshTerm = 1

var meshEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newCountMesh is a mesh of regions with brokers brokers each; pre[r]
// connections of tenant t are open on region r's first broker before the
// tenant gets limits (a connections quota of limit).
func newCountMesh(t *testing.T, regions []string, brokers int, limit float64, pre map[string]int) *countMesh {
	m := &countMesh{t: t, now: meshEpoch, regions: regions, brokers: map[string][]*meshBroker{},
		coords: map[string]*quota.Coordinator{}, announced: map[string]bool{}}
	m.limits.Mesh[quota.Connections] = limit
	for _, r := range regions {
		for i := range brokers {
			id := fmt.Sprintf("%s-%d", r, i)
			m.brokers[r] = append(m.brokers[r], &meshBroker{id: id, region: r, q: quota.NewBroker(quota.BrokerConfig{ID: id})})
		}
		for range pre[r] {
			if rf := m.brokers[r][0].q.Acquire("t", quota.Connections, m.now); rf != nil {
				t.Fatalf("a connection before the quota refused: %v", rf)
			}
			m.brokers[r][0].conns++
		}
		c := quota.NewCoordinator(quota.CoordConfig{Region: r, Regions: regions, Term: meshTerm, Brokers: brokers}, m.now)
		c.SetTenant("t", m.limits)
		m.coords[r] = c
	}
	for _, r := range regions {
		for _, b := range m.brokers[r] {
			b.q.SetTenant("t", m.limits, quota.BrokerBase(m.limits, r, len(regions), brokers), m.now)
		}
	}
	return m
}

func (m *countMesh) toCoord(region string, msg *quota.Msg) {
	if msg.To != "region/"+region || msg.ToTerm != meshTerm {
		return // addressed to no running coordinator of the region: lost
	}
	m.coords[region].Receive(msg, m.now)
}

// step is one interval.
func (m *countMesh) step() {
	m.steps++
	m.now = m.now.Add(quota.DefaultInterval)
	for _, r := range m.regions {
		for _, b := range m.brokers[r] {
			msgs := b.q.Report(m.now)
			if len(msgs) == 0 && m.announced[r] {
				h := b.q.Hello(m.now)
				h.To, h.ToTerm = "region/"+r, meshTerm
				msgs = append(msgs, h)
			}
			for _, msg := range msgs {
				m.toCoord(r, msg)
			}
		}
	}
	for _, msg := range m.wan {
		dest := strings.TrimPrefix(msg.To, "region/")
		if msg.ToTerm == 0 {
			msg = &quota.Msg{From: msg.From, Term: msg.Term, Sent: msg.Sent, To: msg.To, ToTerm: meshTerm}
		}
		m.toCoord(dest, msg)
	}
	m.wan = nil
	for _, r := range m.regions {
		sent := map[string]bool{}
		for _, msg := range m.coords[r].Tick(m.now) {
			if dest, ok := strings.CutPrefix(msg.To, "region/"); ok {
				if dest == r {
					m.t.Fatalf("%s addressed a message to its own region", r)
				}
				sent[dest] = true
				m.wan = append(m.wan, msg)
				continue
			}
			for _, b := range m.brokers[r] {
				if msg.To == "broker/"+b.id {
					b.q.Receive(msg, m.now)
				}
			}
		}
		for _, other := range m.regions {
			if other != r && !sent[other] {
				m.wan = append(m.wan, &quota.Msg{From: "region/" + r, Term: meshTerm, Sent: m.now.UnixNano(), To: "region/" + other})
			}
		}
		m.announced[r] = true
	}
	if n := m.conns(""); float64(n) > m.limits.Mesh[quota.Connections] {
		m.t.Fatalf("step %d: %d connections open mesh-wide, over the limit %v", m.steps, n, m.limits.Mesh[quota.Connections])
	}
}

// connect is a client of region r trying its brokers from the i-th (mod
// their number), tries of them in turn (a NATS client with the region's
// URLs tries each); it reports whether one admitted it.
func (m *countMesh) connect(r string, i, tries int) bool {
	bs := m.brokers[r]
	for j := range tries {
		b := bs[(i+j)%len(bs)]
		if b.q.Acquire("t", quota.Connections, m.now) == nil {
			b.conns++
			return true
		}
	}
	return false
}

// disconnect closes one connection on broker b.
func (m *countMesh) disconnect(b *meshBroker) {
	if b.conns == 0 {
		m.t.Fatalf("%s has no connection to close", b.id)
	}
	b.q.Release("t", quota.Connections)
	b.conns--
}

// conns is region r's open connections ("": the mesh's).
func (m *countMesh) conns(r string) int {
	n := 0
	for reg, bs := range m.brokers {
		if r == "" || r == reg {
			for _, b := range bs {
				n += b.conns
			}
		}
	}
	return n
}

// TestConnectionsGrowIntoRoomAnotherRegionLeaves: two regions of two
// brokers, a connections quota of 4, one connection open in each region
// (before the quota): a client of r1 trying one broker per interval, the
// brokers in turn, gets the two connections left within 2 s (the room r2
// does not use moves to r1), then is refused for as long as the mesh is
// at the limit; once one closes, the next is admitted within an
// interval or two. The mesh never holds more than 4.
func TestConnectionsGrowIntoRoomAnotherRegionLeaves(t *testing.T) {
	m := newCountMesh(t, []string{"r1", "r2"}, 2, 4, map[string]int{"r1": 1, "r2": 1})
	var admitted []int
	for i := range 40 {
		m.step()
		if m.connect("r1", i, 1) {
			admitted = append(admitted, m.steps)
		}
	}
	if len(admitted) != 2 || admitted[1] > 8 {
		t.Fatalf("r1 admitted at steps %v (of 250 ms), want 2 within the first 8 and none after", admitted)
	}
	if got := m.conns("r1"); got != 3 {
		t.Fatalf("r1 holds %d connections, want 3", got)
	}
	// One of r1's closes: its room stays in r1 (r1 uses more and was
	// refused lately), and the next client gets it.
	m.disconnect(m.brokers["r1"][0])
	for i := range 3 {
		m.step()
		if m.connect("r1", i, 1) {
			break
		}
		if i == 2 {
			t.Fatalf("no connection admitted in r1 in the 3 intervals after one closed")
		}
	}
	for i := range 8 {
		m.step()
		if m.connect("r1", i, 2) || m.connect("r2", i, 2) {
			t.Fatalf("a fifth connection admitted %d intervals after the fourth", i+1)
		}
	}
}

// TestConnectionsSingleRegionUpToLimit: one region of two brokers, a
// connections quota of 4 and one connection open before it: a client
// trying one broker per interval, in turn, gets exactly three more.
func TestConnectionsSingleRegionUpToLimit(t *testing.T) {
	m := newCountMesh(t, []string{"r1"}, 2, 4, map[string]int{"r1": 1})
	var admitted []int
	for i := range 40 {
		m.step()
		if m.connect("r1", i, 1) {
			admitted = append(admitted, m.steps)
		}
	}
	if len(admitted) != 3 || admitted[2] > 8 {
		t.Fatalf("admitted at steps %v (of 250 ms), want 3 within the first 8 and none after", admitted)
	}
}

// TestConnectionsRoomAheadOfDemand: a connections quota of 10 over two
// regions of two brokers; once the mesh has settled, a client of r1
// arrives every second and tries r1's brokers (as a NATS client tries
// its URLs): each of the ten is admitted at its first attempt, the room
// r2 does not use having moved to r1 before it was asked for; the
// eleventh is refused.
func TestConnectionsRoomAheadOfDemand(t *testing.T) {
	m := newCountMesh(t, []string{"r1", "r2"}, 2, 10, nil)
	for range 8 {
		m.step()
	}
	for i := range 11 {
		ok := m.connect("r1", i, 2)
		if i < 10 && !ok {
			t.Fatalf("client %d of r1 refused at its first attempt with %d connections open mesh-wide (limit 10)", i+1, m.conns(""))
		}
		if i == 10 && ok {
			t.Fatalf("an eleventh connection admitted")
		}
		for range 4 {
			m.step()
		}
	}
}
