package region

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/replicator/failback"
	"github.com/stratamesh/strata/topology"
)

// Client failover's driver (docs/architecture.md "Client failover"): a
// broker binds one failover listener per other region, polls what it sees
// of each (Serf WAN members, its replication link, the replication lag
// toward it: its own cursors and, through the LAN tag TagBehind, its
// peers'), feeds failback.Tracker and, when a region switches back,
// closes that region's guests; while a region is home its guests are
// refused at the door.

// TagBehind is a broker's Serf LAN tag naming, comma-separated and
// sorted, the remote regions its replicator cursors are behind toward
// (lag over the region's caught_up_lag, or stalled); absent when none.
const TagBehind = "behind"

// failoverTick is how often the driver looks.
const failoverTick = 250 * time.Millisecond

type failover struct {
	n    *Node
	cfg  failback.Config
	lns  []broker.GuestListener // bound before the broker starts
	tick time.Duration

	mu    sync.Mutex
	tr    *failback.Tracker
	state map[string]admin.RegionState // last look, by region
	// behind hands TagBehind's value to the goroutine that sets it (Serf's
	// SetTags waits for its broadcast, up to seconds when members are
	// frozen: the look must not wait). Capacity 1, latest value wins.
	behind chan string
}

// newFailover binds the failover listeners (on the ports remembered from
// the last run, else fresh ones) and makes the tracker from the region's
// topology settings.
func (n *Node) newFailover() (*failover, error) {
	cfg := failback.Config{
		SwitchBackDelay: time.Duration(n.region.Failover.SwitchBackDelay),
		CaughtUpLag:     time.Duration(n.region.Failover.CaughtUpLag),
	}
	tr, err := failback.New(cfg)
	if err != nil {
		return nil, err
	}
	f := &failover{n: n, cfg: tr.Config(), tr: tr, tick: failoverTick, state: map[string]admin.RegionState{}, behind: make(chan string, 1)}
	for _, r := range n.cfg.Mesh.Regions {
		if r.Name == n.cfg.Region {
			continue
		}
		ln, err := listenRemembered(n.host(), n.ports.Failover[r.Name])
		if err != nil {
			f.closeListeners()
			return nil, fmt.Errorf("failover listener for guests of %s: %w", r.Name, err)
		}
		f.lns = append(f.lns, broker.GuestListener{Home: r.Name, Addr: ln.Addr().String(), Listener: ln})
	}
	return f, nil
}

// listenRemembered listens on host:port, or on a fresh port when port is
// 0 or cannot be bound any more.
func listenRemembered(host string, port int) (net.Listener, error) {
	if port != 0 {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}

func (f *failover) closeListeners() {
	for _, g := range f.lns {
		g.Listener.Close()
	}
}

// admits is the broker's Config.AdmitGuest.
func (f *failover) admits(home string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tr.AdmitsGuests(home)
}

// run looks every tick until the node stops.
func (f *failover) run(stop <-chan struct{}) {
	tagDone := make(chan struct{})
	go func() { // the tag setter, owned by run: it ends before run returns
		defer close(tagDone)
		for {
			select {
			case <-stop:
				return
			case v := <-f.behind:
				if lan := f.n.lanRef.Load(); lan != nil {
					if err := lan.SetTag(TagBehind, v); err != nil {
						f.n.logger.Debug("set LAN tag", "tag", TagBehind, "err", err)
					}
				}
			}
		}
	}()
	defer func() { <-tagDone }()
	t := time.NewTicker(f.tick)
	defer t.Stop()
	for {
		f.look(time.Now())
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// look observes every other region once and acts on the tracker's answer.
func (f *failover) look(now time.Time) {
	n := f.n
	wan, lan := n.wanRef.Load(), n.lanRef.Load()
	if wan == nil || lan == nil || n.broker == nil {
		return
	}
	members := wan.Members()
	links := map[string]bool{} // remote → connected
	for _, l := range n.js.LinkStatus() {
		links[l.Remote] = l.Connected
	}
	type lag struct {
		msgs    uint64
		secs    float64
		stalled bool
	}
	lags := map[string]*lag{}
	for _, c := range n.js.Replication() {
		l := lags[c.Remote]
		if l == nil {
			l = &lag{}
			lags[c.Remote] = l
		}
		l.msgs += c.LagMsgs
		l.secs = max(l.secs, c.LagSeconds)
		l.stalled = l.stalled || c.State == replicator.Stalled.String()
	}
	behindPeers := peersBehind(lan.Members(), n.name)
	guests := n.broker.Guests()
	urls := n.broker.GuestURLs()
	var behind []string
	var sendHome []string
	f.mu.Lock()
	for _, r := range n.cfg.Mesh.Regions {
		if r.Name == n.cfg.Region {
			continue
		}
		st := admin.RegionState{Region: r.Name, Link: "none", Guests: guests[r.Name], FailoverURL: urls[r.Name]}
		for _, m := range members {
			if m.Tags["region"] == r.Name && m.Tags["role"] == topology.RoleBroker && m.Tags["mesh"] == n.cfg.Mesh.Name && m.State == gossip.StateAlive {
				st.WANBrokers++
			}
		}
		connected, hasLink := links[r.Name]
		if hasLink {
			st.Link = "down"
			if connected {
				st.Link = "connected"
			}
		}
		st.Reachable = st.WANBrokers > 0 && (!hasLink || connected)
		own := lags[r.Name]
		if own == nil {
			own = &lag{}
		}
		st.LagMsgs, st.LagSeconds = own.msgs, own.secs
		ownBehind := own.stalled || own.secs > f.cfg.CaughtUpLag.Seconds()
		if ownBehind {
			behind = append(behind, r.Name)
		}
		st.BehindOn = behindPeers[r.Name]
		if ownBehind {
			st.BehindOn = append([]string{n.name}, st.BehindOn...)
		}
		switch {
		case !st.Reachable:
			st.CatchUp = admin.CatchUpUnreachable
		case own.stalled:
			st.CatchUp = admin.CatchUpStalled
		case len(st.BehindOn) > 0:
			st.CatchUp = admin.CatchUpCatchingUp
		default:
			st.CatchUp = admin.CatchUpCaughtUp
		}
		obs := failback.Observation{Reachable: st.Reachable, LagSeconds: own.secs, Stalled: own.stalled,
			PeersBehind: len(behindPeers[r.Name]) > 0}
		ts, switched := f.tr.Observe(now, r.Name, obs)
		st.SwitchBack, st.Since, st.SwitchBackAt, st.Rounds = ts.Phase.String(), ts.Since, ts.SwitchBackAt, ts.Rounds
		if switched || (ts.Phase == failback.Home && st.Guests > 0) {
			sendHome = append(sendHome, r.Name)
		}
		f.state[r.Name] = st
	}
	f.mu.Unlock()
	for _, home := range sendHome {
		if k := n.broker.CloseGuests(home); k > 0 {
			n.logger.Info("client failover: region is back and caught up; sent its guests home", "home", home, "guests", k)
		}
	}
	f.setBehind(strings.Join(behind, ","))
}

// setBehind queues v for the tag setter, replacing a value not yet taken.
func (f *failover) setBehind(v string) {
	for {
		select {
		case f.behind <- v:
			return
		default:
		}
		select {
		case <-f.behind:
		default:
		}
	}
}

// peersBehind reads the other live brokers' TagBehind: by remote region,
// the names of the brokers behind toward it.
func peersBehind(members []gossip.Member, self string) map[string][]string {
	out := map[string][]string{}
	for _, m := range members {
		if m.Name == self || m.Tags["role"] != topology.RoleBroker || m.State != gossip.StateAlive || m.Tags[TagBehind] == "" {
			continue
		}
		for _, r := range strings.Split(m.Tags[TagBehind], ",") {
			out[r] = append(out[r], m.Name)
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// Regions is the admin backend of GET /admin/v1/regions.
func (f *failover) Regions() admin.RegionsView {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := admin.RegionsView{Broker: f.n.name, SwitchBackDelay: f.cfg.SwitchBackDelay.Seconds(), CaughtUpLag: f.cfg.CaughtUpLag.Seconds()}
	guests := f.n.broker.Guests() // now, not at the last look
	for _, r := range f.n.cfg.Mesh.Regions {
		if st, ok := f.state[r.Name]; ok {
			st.Guests = guests[r.Name]
			v.Regions = append(v.Regions, st)
		}
	}
	return v
}
