// Package consumer is a JetStream durable pull consumer over a Strata
// topic's cursor (shared/specs/nats-wire.md §2.5, §2.6 and §4 "Consumer ⇄
// cursor"), written as a deterministic state machine in the style of
// etcd-io/raft's RawNode (CONVENTIONS.md item 1). A driver feeds it pull
// requests, acks and the time, carries out the Outs it returns, and
// persists its Snapshots.
//
// # What it owns
//
//   - The cursor: the acked set (internal/ackset: mark-delete, i.e.
//     ack_floor.stream_seq, plus individually acked ranges), the read
//     position (Delivered), and the pending deliveries: every sequence
//     <= Delivered is either acked or pending, never both. Messages that
//     do not match filter_subject(s), and trimmed ones (ErrGone), are
//     skipped and count as acked, so the floor moves past them.
//   - Delivery sequences (dseq): +1 on every delivery, redeliveries
//     included, and never repeated, even across a restart: dispatch hands
//     out only dseqs under a persisted reservation (State.DSeqReserved),
//     raised a block ahead (DSeqBlock, default 1000) when dispatch gets
//     within half a block of it, and a restored cursor continues above it.
//   - Per-delivery timers: ack_wait (or backoff[delivery-1], the last one
//     repeating), +WPI, NAK delays, max_deliver (then the message counts
//     as acked and an Advisory Out is returned).
//   - The FIFO of waiting pull requests (max_waiting) with their batch,
//     max_bytes, expiry, no_wait and idle heartbeats; each message goes to
//     the oldest waiting request, redeliveries (lowest stream sequence
//     first) before new messages, and new messages only while
//     num_ack_pending < max_ack_pending.
//   - AckSync replies: released by Persisted once the acks they confirm
//     are in a persisted Snapshot.
//   - Pulsar's subscription types (spec §4 "Subscription types"): Shared
//     is the default (many pullers, each message to one request).
//     Exclusive/Failover is a priority group with priority_policy
//     "pinned_client" (pin.go, as nats-server ≥ 2.11): one group; the
//     first request served gets a pin id, its messages carry it
//     (Out.PinID, header Nats-Pin-Id), pulls with another id get 423,
//     pulls without one wait; the pin moves to a waiting request after
//     priority_timeout without a pull from the pinned client, or on
//     Unpin. Key_Shared is selected by metadata (keyshared.go):
//     "strata.subscription": "key_shared" and "strata.key": "subject"
//     (the default: the subject's tokens after TopicSubject, or the whole
//     subject) or "header:<Name>" (that header's value, "" without it).
//     A puller is a request's reply subject; a key with a delivery in
//     flight is bound to its puller, and its messages go only there, first
//     deliveries in stream order; others' messages of a bound key are held
//     (at most max_ack_pending of them, or 1000) and go before new ones.
//
// # What it must not do
//
// No goroutines, no I/O of its own, no clock and no randomness: time is
// passed in (now), messages come from the Source, and everything to send
// comes back as Outs, in order; the driver formats them (status headers,
// the $JS.ACK subject via jsapi.FormatAckSubject, the Nats-Pin-Id
// header) and publishes the advisories. Pin ids come from the driver
// (PinIDs). It does not decide retention, deletion of ephemerals
// (inactive_threshold: see LastActivity), or leadership. It serves pull
// consumers only: push consumers, ack_policy flow_control,
// deliver_policy last_per_subject, replay_policy original, priority
// policies overflow and prioritized, more than one priority group,
// headers_only and rate limits are ErrUnsupported; key_shared needs
// ack_policy explicit and no priority groups, and invalid strata.*
// metadata is ErrInvalidConfig naming the key.
//
// # Concurrency
//
// A Consumer is not safe for concurrent use. The driver serialises every
// call (one goroutine owns it). Source calls are made synchronously from
// within those calls and may block.
//
// # The driver's duties
//
//   - Pass StreamName to New, and a config with a name (ephemerals are
//     named by the driver); PinIDs for pinned_client consumers (ids unique
//     across restarts: random); TopicSubject when the stream captures its
//     own topic's subjects (key_shared by subject).
//   - Call Snapshot after each call; when dirty, persist the State (JSON)
//     and then call Persisted(gen), sending what it returns. Nothing is
//     delivered before the first Persisted: a fresh or restored consumer
//     must persist its reservation first.
//   - Call Tick at NextDeadline (and after it changes: every call may move
//     it earlier). Only Tick fires timers (ack waits, NAK delays, request
//     expiries, heartbeats), so a late Tick delays redeliveries. Call
//     Dispatch when the topic gets new messages, after UpdateConfig, and
//     to retry after a LoadErr.
//   - Pass the ack subject's sseq and dseq to Ack with the parsed body
//     (jsapi.ParseAck) and, for AckSync or +NXT, the PUB's reply.
//   - Stop with "Leadership Change" or "Consumer Deleted" when the topic
//     moves or the consumer goes; restore elsewhere from the last
//     persisted State (acks since then are lost and those messages are
//     redelivered with a higher delivery count, spec §4). The pin is not
//     persisted (nor is it by the reference): the old pin's pulls get the
//     423 "Nats-Wrong-Pin-Id" and its client pulls again without an id.
//   - Add the Nats-Pin-Id header (Out.PinID) to a Deliver, after the
//     stored headers; publish the Pinned and Unpinned advisories.
//
// # Approximations
//
//   - num_pending (and the ack subject's pending) is exact without filters
//     (LastSeq - max(Delivered, FirstSeq-1)). With filters it is an upper
//     bound: that count, capped by the last message of the filters when
//     every filter is a literal subject (Source.LastForSubject), so a
//     caught-up consumer reports 0.
//   - deliver_policy last with a wildcard filter scans back at most 10000
//     messages for the last match; if none is found it starts at the last
//     literal-filter match, if any, or at the end of the stream.
//   - ack_floor.consumer_seq is one below the lowest dseq still pending (the
//     last dseq when nothing is): every delivery at or below it is resolved.
//     The reference pairs it with the stream floor's message instead.
//   - After a restore, pending messages are redelivered at once (their
//     ack_wait is not carried over), except those that already reached
//     max_deliver, which get one more ack_wait to be acked. Their dseq
//     is unknown until redelivered, so acks, NAKs and WPIs for them match
//     by stream sequence alone.
//   - max_bytes counts subject + V1 ack subject + header + data, as
//     nats.go counts a message; a V2 ack subject would be a few bytes
//     longer than counted.
//   - Requests are served strictly oldest first (spec §2.5); the reference
//     cycles a request to the back of the queue after each message.
//   - A no_wait request is answered within the call (what there is, then
//     404) — except while the dseq reservation awaits Persisted, and, as in
//     the reference, a no_wait request with expires (legacy Fetch) waits
//     for its first message or its expiry.
//   - pinned_client: a pull without a group gets "400 Bad Request -
//     Priority Group missing" whatever its body; the reference serves an
//     empty or numeric body without giving it a pin. max_bytes counts a
//     message without its Nats-Pin-Id header, as the reference does.
//   - key_shared: a Fetch (new inbox per call) is a new puller each time,
//     so the keys of its unacked messages stay bound to the old inbox
//     until acked or their ack_wait ends. A message of a restored consumer
//     that was in flight at its last max_deliver has an unknown key and
//     binds nothing. An ack of a held message (delivered before a restore
//     that did not persist the delivery) counts.
package consumer
