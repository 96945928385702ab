package jetstream

import (
	"fmt"
	"strings"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// Backlog quotas (ARCHITECTURE §5; Pulsar's backlog quota, per
// subscription): when a topic's namespace has a BacklogQuota, the owner
// measures every subscription of the topic (each durable or ephemeral
// consumer) alone against it, every BacklogConfig.Check:
//
//   - size: the estimated bytes of the messages from the subscription's
//     first counted sequence to the last (mledger.ML.BytesFrom: ledger
//     totals, the partial ledger by its average size), the
//     individually acknowledged ones above it included, as Pulsar
//     estimates a subscription's backlog from its mark-delete;
//   - age: how old (publish time here) the message at that sequence is.
//
// The first counted sequence is the first one the subscription has not
// acknowledged above max(mark-delete, replay point). The replay point is
// the rewind rule: a subscription created on existing data (deliver
// policy all, by_start_sequence, by_start_time, and an admin reset,
// which creates the subscription again) replays history that producers
// did not cause, so only the messages published after its creation
// count toward its backlog. Replaying never holds or refuses producers
// and is never evicted; once its mark-delete passes the replay point
// it counts fully again, like any subscription. The replay point is the
// last message published before the consumer's creation time (its
// persisted Created, so every owner of the topic agrees, up to the
// clock skew between the brokers that published and created).
//
// Replicator cursors (repl_send.go) are not subscriptions: they are
// never measured, never hold or refuse producers and are never evicted,
// so a remote region's outage never blocks local producers. There are
// no other internal cursors (the retention floor of interest and
// workqueue topics is computed from the subscriptions, not a cursor).
// Replicated copies arriving from other regions are not held or refused
// either (their publish was admitted at their origin); they count toward
// this region's subscriptions' backlogs like any message.
//
// Past a bound, the namespace's policy applies to the whole topic while
// any one of its subscriptions is over:
//
//   - producer_exception: publishes are refused at once with JetStream
//     error 10429 (jsapi.ErrQuotaExceeded) naming the tenant, namespace,
//     topic, subscription, the bound, its limit and current value
//     (backlogExceeded);
//   - producer_request_hold: publishes are held in arrival order (never
//     blocking the client's connection) and stored once every
//     subscription is within the quota again, or refused with the same
//     error after BacklogConfig.Hold; a publish arriving while others are
//     held waits behind them, so the topic keeps its publish order;
//   - consumer_backlog_eviction: the subscription's oldest counted
//     messages are acknowledged for it (consumer.AckRange) until it is
//     within the quota; producers are not affected.
//
// A tenant's storage quota refusing a publish (tenancy/quota) is held
// the same way when the namespace's policy is producer_request_hold
// (storageHold), and refused otherwise. Publishing never measures
// anything: it reads the topic's last verdict (one atomic load while
// nothing is over or held).

// Defaults of BacklogConfig.
const (
	DefaultBacklogCheck   = 250 * time.Millisecond
	DefaultBacklogHold    = 3 * time.Second
	DefaultBacklogHoldMax = 10000
)

// BacklogConfig tunes the enforcement of the namespaces' backlog quotas
// (backlog.go).
type BacklogConfig struct {
	// Check is how often the owner of a topic whose namespace has a
	// backlog quota measures its subscriptions (and evicts). It bounds
	// how late a quota's breach, or its end, is seen, hence how late held
	// publishes are released. Default 250 ms.
	Check time.Duration
	// Hold bounds how long a publish is held (producer_request_hold)
	// before it is refused. Default 3 s: inside nats.go's default 5 s
	// publish timeout, so a client gets the refusal rather than a timeout,
	// and a held message is never stored after its client gave up on it
	// (and perhaps published it again).
	Hold time.Duration
	// HoldMax bounds the publishes held per topic; one more is refused at
	// once. Default 10000.
	HoldMax int
}

func (c BacklogConfig) withDefaults() BacklogConfig {
	if c.Check <= 0 {
		c.Check = DefaultBacklogCheck
	}
	if c.Hold <= 0 {
		c.Hold = DefaultBacklogHold
	}
	if c.HoldMax <= 0 {
		c.HoldMax = DefaultBacklogHoldMax
	}
	return c
}

// subBacklog is one subscription's measured backlog.
type subBacklog struct {
	name string
	// from is the first counted sequence; above last when nothing
	// counts.
	from, last uint64
	// bytes is the estimated size of messages from..last.
	bytes uint64
	// oldest is the publish time of message from (zero when nothing
	// counts, or the quota has no age bound).
	oldest time.Time
}

// Bounds of a backlog quota, as refusals name them.
const (
	boundSize = "size"
	boundAge  = "age"
)

// backlogExceeded says which subscription of a topic is over its
// namespace's backlog quota, by how much, and what the policy does: a
// refused publish's error (10429).
type backlogExceeded struct {
	topic        tenancy.Name
	subscription string
	policy       string
	bound        string // boundSize or boundAge
	sizeLimit    int64  // bytes
	size         uint64
	ageLimit     time.Duration
	age          time.Duration
	// held is set on a publish refused at the end of its hold; full on
	// one refused because as many publishes as allowed are held.
	held time.Duration
	full int
}

// Error is the refusal as one line, e.g. `tenant "acme" namespace
// "orders" topic "eu": subscription "billing" is over its backlog_quota
// size limit: limit 1048576 bytes, backlog 1050000 bytes (policy
// producer_exception)`.
func (e *backlogExceeded) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tenant %q namespace %q topic %q: subscription %q is over its backlog_quota %s limit: ",
		e.topic.Tenant, e.topic.Namespace, e.topic.Topic, e.subscription, e.bound)
	if e.bound == boundSize {
		fmt.Fprintf(&b, "limit %d bytes, backlog %d bytes", e.sizeLimit, e.size)
	} else {
		fmt.Fprintf(&b, "limit %s, oldest unacknowledged message %s old", e.ageLimit, e.age.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, " (policy %s", e.policy)
	switch {
	case e.held > 0:
		fmt.Fprintf(&b, ": held %s, then refused", e.held)
	case e.full > 0:
		fmt.Fprintf(&b, ": %d publishes held already", e.full)
	}
	b.WriteString(")")
	return b.String()
}

// overQuota judges one subscription's backlog against q at now: nil
// when within it, else which bound it passes (size first).
func overQuota(q *BacklogQuota, n tenancy.Name, sb subBacklog, now time.Time) *backlogExceeded {
	if q == nil || sb.from > sb.last {
		return nil
	}
	ex := &backlogExceeded{topic: n, subscription: sb.name, policy: q.Policy,
		sizeLimit: q.Size, size: sb.bytes, ageLimit: q.Age}
	if !sb.oldest.IsZero() {
		ex.age = max(now.Sub(sb.oldest), 0)
	}
	switch {
	case q.Size > 0 && sb.bytes > uint64(q.Size):
		ex.bound = boundSize
	case q.Age > 0 && ex.age > q.Age:
		ex.bound = boundAge
	default:
		return nil
	}
	return ex
}

// blocksProducers reports whether a policy acts on producers (hold or
// refuse) rather than on the subscription (eviction).
func blocksProducers(policy string) bool {
	return policy == tenancy.BacklogHold || policy == tenancy.BacklogReject
}

// evictThrough is the last sequence to acknowledge for subscription sb,
// over q, so that what it still counts is within q: for size, the least
// t >= from-1 with bytesFrom(t+1) <= q.Size (bytesFrom is
// non-increasing); for age, t = newer-1 where newer is the first
// sequence published at or after now - q.Age. At most sb.last; below
// sb.from when nothing needs acknowledging.
func evictThrough(q *BacklogQuota, sb subBacklog, bytesFrom func(uint64) uint64, newer uint64) uint64 {
	t := sb.from - 1
	if q.Size > 0 && sb.bytes > uint64(q.Size) {
		lo, hi := sb.from, sb.last+1 // bytesFrom(last+1) = 0
		for lo < hi {
			mid := lo + (hi-lo)/2
			if bytesFrom(mid) <= uint64(q.Size) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		t = max(t, lo-1)
	}
	if q.Age > 0 && newer > 0 {
		t = max(t, newer-1)
	}
	return min(t, sb.last)
}
