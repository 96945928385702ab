// Package quota is the allowance core of mesh-wide tenant quotas
// (ARCHITECTURE §5, issue 25): how each tenant's one mesh-wide limit is
// split between regions and brokers by demand, and how the split stays
// within the limit when links fail, clocks disagree and coordinators
// change.
//
// # What it owns
//
//   - Split: the limit divided by demand, with static shares, floors and
//     per-region caps (a pure function).
//   - Broker: one broker's token buckets (internal/tokenbucket) admitting
//     publishes at its allowance, its counts (connections, topics,
//     consumers, storage) with the caps set for them, and the leases it
//     gives to and holds from its region's coordinator.
//   - Coordinator: one region's coordinator: it sums its brokers' use,
//     exchanges demand and use with the other regions' coordinators,
//     splits the limits, and moves allowance with leases and caps.
//   - Msg: what the parties send each other every interval (JSON), and
//     DecodeMsg, which checks what arrives.
//
// It does no I/O and reads no clock: every call takes the caller's time.
// Drivers (the region's broker wiring, the coordinator elected through
// etcd, the WAN link) call Report/Tick every interval, send each message
// to its To (and ToTerm), and feed what arrives to Receive. A Broker is
// safe for concurrent use; a Coordinator belongs to one goroutine.
//
// # Static shares, leases and the echo rule (rates)
//
// A rate quota (publish_rate, publish_bytes) has a static share per
// region, limit ÷ regions (at most the region's cap), and per broker,
// the region's ÷ its brokers. The static shares sum to at most the limit,
// and a broker that hears from nobody admits at its static share: that
// is the state every party falls back to.
//
// Anything above a static share is a lease: an amount lent by a party
// that stops using it, valid for a time. A broker lends its coordinator
// what its target leaves of its static share (Entry.Want asks); the
// coordinator grants brokers and other regions' coordinators leases out
// of what it holds, never more than it holds for as long as each grant
// lasts (grant), per lender counting the largest of its leases still
// valid and per borrower the largest of its grants still valid. A
// party's allowance is its static share, less what it has lent, plus
// what it holds. Summed over the mesh, every lease held is matched by
// the same amount lent, so the brokers' allowances sum to at most the
// limit at every moment — if the lender stops using a lease before the
// borrower starts and the borrower stops before the lender starts again.
//
// The first is the order of events (a lease is reserved before the
// message carrying it is sent). The second is the echo rule: a message
// carries, as Echo, the Sent time (the receiver's own clock) of the
// newest message the sender had from the receiver, and a lease in it is
// valid at the receiver until Echo + LendFor on the receiver's clock. The
// receiver sent that message before the lender reserved the lease, so
// the lease ends, in real time, before the lender's reservation (made
// from then, for LendFor, on the lender's clock) does. Clocks are only
// ever compared with themselves: an offset between two clocks, however
// large, changes nothing (clock drift, a rate difference, lets a lease
// outlive its reservation by drift × LeaseTTL: 3 µs at 1 ppm). A broker
// reserves what it lends until LeaseTTL after the coordinator's message
// it echoes arrived, which is after the coordinator's Sent of it.
//
// A lease cannot be revoked, only let expire, with one exception: a
// coordinator that asks a broker for less (Want) releases the rest of
// that broker's leases at once when no grant still valid needs them (it
// counts them at most Want from then on; the broker lowers them when it
// receives the message), so a broker whose demand returns gets its share
// back within one exchange. A coordinator's grants last at most
// LeaseTTL/2, and never longer than the leases that back them.
//
// So a region cut off from the others keeps what it holds until its
// leases expire, then its static share; the others see it unreachable
// (Stale, and not before) and split the rest among themselves, with no
// grant to it; when it comes back, its demand is acted on only after two
// intervals of hearing from it (a region that rejoins relearns demand
// before granting). A new coordinator (a new term: each incarnation
// needs its own) is a new party: it holds nothing until brokers lend to
// it, brokers keep lending to and borrowing from the old one until its
// leases lapse, and nobody's leases to one incarnation are counted for
// another (ToTerm).
//
// # The bound for rates, and ε
//
// Over any window of one second, the mesh admits at most
//
//	limit × (1 + ε),  ε = Depth/1s + B × u / limit
//
// where Depth is the token buckets' depth (BrokerConfig.Depth, default
// DefaultDepth = 50 ms), B the number of brokers admitting the tenant
// mesh-wide, and u the largest single publish in the quota's unit (1 for
// publish_rate; the largest message for publish_bytes). The allowances
// sum to at most the limit at every moment (above, to within a relative
// 1e-9 of float rounding); each bucket admits over a window at most its
// rate integrated over the window, plus what it held when the window
// began (at most Depth at its rate then: the rates sum to at most the
// limit), plus one publish that takes it into debt. A bucket's rate is
// brought up to date at every lease expiry since its last publish
// (Broker.sync), so an expired lease is never spent at the old rate.
// Epsilon computes ε. The same holds per region against its cap, with
// the region's brokers as B.
//
// Outside the bound: a broker process that restarts forgets what it had
// lent. Restarted within LeaseTTL of its last report, it admits its
// static share while its coordinator's grants backed by the old
// process's leases still run (at most LeaseTTL/2); a driver that waits
// LeaseTTL before admitting on a restarted broker, or keeps its quota
// state across the restart, avoids it. Limits lowered at run time apply
// as leases are renewed (within LeaseTTL/2 for grants, LeaseTTL for
// what brokers lend).
//
// The tests in this package check it over every one-second window of
// simulated meshes (quotasim) with demand shifts, partitions, rejoins,
// coordinator failovers, clock skew of ±5 s, loss and jitter.
//
// # Counts
//
// A count quota (connections, topics, consumers) cannot lend: what is in
// use stays in use when a lease would expire. A broker admits up to the
// cap its coordinator set (before any, its static share, rounded down).
// A broker's reservation is the larger of its use, the cap it reported
// holding and every cap sent to it since the newest message it has
// echoed. A region holds an allotment, never less than its brokers'
// reservations, and reports it with its use, its pending proposal and
// how many of its brokers were refused lately (Entry.Use, Cap, Want,
// Demand). Its target is its use plus its part of the free room (the
// limit less every region's use; a region unreachable or just back
// counts as at least its static share and what it last reported
// holding): the whole units in proportion to the static shares of the
// regions it hears, the odd ones to a region refused lately, then to the
// one using more, then by name. Below its target, a region proposes the
// rest, reports it as pending, and adds it to its allotment only when
// every other region has echoed that report, checking it against the
// limit less every region's allotment and the pending proposals of the
// regions before it in name order (what does not fit stays proposed).
// Above its target, it lowers its brokers' caps, and its allotment
// follows as they echo them. Every interval each broker's cap is its
// use plus an even part of the allotment's spare (the odd units to the
// brokers refused lately), raised only as far as the allotment leaves
// room with every broker counted at its reservation. So free room waits
// at the brokers before clients ask for it, and follows them: within a
// region in an interval or two, between regions in a few intervals plus
// two WAN trips.
//
// The mesh-wide count stays within the limit when partitions cut whole
// regions: a region may hand out without a peer's echo only up to its
// static share, and only 2 × Stale after proposing, by which time that
// peer counts it at least at its static share. Known slop (beyond the
// limit, until it resolves): a message delayed by more than Stale; a
// coordinator that takes over while one of its region's brokers, cut off
// from it, holds more than its static share (the new coordinator counts
// that broker at its static share until it hears from it); a broker
// that restarts with connections still counted elsewhere. Storage has no
// caps: each broker refuses once the mesh-wide use its coordinator last
// reported reaches the limit; that figure is the brokers' use reports
// (every interval) summed by the coordinators (every interval, then the
// WAN), so the bytes every region writes in up to about four intervals
// plus the WAN delay may pass the limit.
//
// # Defaults and what they trade
//
//   - DefaultInterval (250 ms): reports and ticks. Shorter reacts faster
//     (convergence is a few intervals plus the WAN round trip) for more
//     messages: each broker sends one message per interval per
//     coordinator, each coordinator one per broker and per region.
//   - DefaultLeaseTTL (3 s): a broker's leases to its coordinator;
//     grants last at most half. Longer rides out more lost messages;
//     shorter gives a cut-off region its static share back sooner (about
//     LeaseTTL/2 after its last grant).
//   - Stale (2 × Interval + LeaseTTL/4 = 1.25 s): how long a peer may be
//     silent before it counts as unreachable. Shorter reacts to a cut
//     sooner, and misreads a slow link as a cut more often.
//   - DefaultDepth (50 ms): the buckets' burst, and most of ε.
//   - DefaultMinShare (5%): every reachable party keeps this much of its
//     static share whatever the demand, so new demand is admitted before
//     its first report is acted on, at that much less for the busy ones.
//   - DefaultForget (1 min): how long a coordinator keeps counting a
//     silent broker's counts before it counts it at its static share.
package quota
