// Package replicator is the deterministic core of geo-replication
// (shared/design/ARCHITECTURE.md §4; issue 8): the send window, retries
// and position of a replicator cursor, and the high-water marks that make
// replication exactly-once at the remote. It is written as plain state
// machines in the style of etcd-io/raft's RawNode (CONVENTIONS.md item
// 1): a driver feeds them time, messages and answers and carries out what
// they return. Discovery (Serf), the nats.go link, the managed ledger and
// etcd live in the driver.
//
// # What it owns
//
//   - Identity: tenancy.Name (tenant, namespace, topic: what the replication
//     subject names), Origin (region, topic incarnation UUID, origin
//     sequence, origin time: what every stored entry's envelope carries)
//     and Stream (topic, origin region, incarnation: the key of a
//     high-water mark). Origin sequences are 1-based and gap-free per
//     topic, origin region and incarnation.
//   - Sender: one per (topic, remote region), the replicator cursor
//     __repl.<remote>. It reads the messages of local origin from a Source
//     by origin sequence (so nothing loops) and returns Batches to send:
//     runs of consecutive messages (at most MaxBatchMsgs and
//     MaxBatchBytes each) while fewer than MaxInFlight sequences are
//     unanswered, and an explicit gap record for every range retention
//     trimmed before the remote acknowledged it, never a silent skip. Its
//     position (SenderState) moves only on the remote's durable
//     acknowledgement, which is a high-water mark, so it is cumulative and
//     the position never passes a message the remote did not store. A gap
//     refusal rewinds to the remote's expected sequence; a failure or an
//     ack timeout rewinds to the failed batch and backs off exponentially
//     (BackoffInitial doubling to BackoffMax, optionally with seeded
//     jitter). Health is replicating, backing-off or stalled (a backlog
//     and no progress for StallAfter; it keeps retrying); Lag is in
//     messages, bytes and age, read from the Source on every call.
//   - Receiver: at the owner of the topics in the remote region, one
//     high-water mark per Stream. A message at HWM+1 is stored, one at or
//     below the HWM is a duplicate (answered as success), one above HWM+1
//     is refused as a gap with the expected sequence; a gap record moves
//     the HWM past its range and counts the sequences it skipped as lost.
//     A new incarnation (topic re-created, region rebuilt) is a new Stream
//     starting at 0, so its messages are never dropped against an old
//     incarnation's HWM. Its state (ReceiverState) is JSON the driver
//     persists; a restored receiver gives the same answers.
//   - Relay (issue 26 item 8; relay.go): what this region has learned of
//     other regions' marks (Mark: holder, stream, HWM — carried in every
//     answer) and the decision, with time passed in, to forward this
//     region's copies of another origin's stream to a region whose known
//     mark has stayed below what is held here for the relay delay
//     (Plan.Routes), or to ask for marks when this region's own stream
//     stays behind somewhere (Plan.Probe). NewRelaySender sends such
//     copies: from the remote's known mark, one message in flight until
//     its first answer, never a gap record. Sender.Learn moves a cursor
//     to a mark of its remote learned through a third region (so the
//     origin's storage is released while the direct link is down);
//     Sender.Probe resends the message at the position to get an answer
//     with marks. The receiver's rule (HWM+1 per stream, whoever sends)
//     keeps relayed copies exactly-once and loop-free.
//
// # What it must not do
//
// No goroutines, no I/O, no clock and no randomness of its own (the
// jitter generator is seeded through Config): time is passed in (now),
// messages come from the Source, and what to send comes back as values.
// It does not import net, os or the broker (internal/layering checks it).
// It does not discover remote brokers, encode the wire format, create
// remote topics, decide retention, or store messages: the driver does.
//
// # Concurrency
//
// Senders and Receivers are not safe for concurrent use. One goroutine
// owns each and serialises every call (CONVENTIONS.md item 7). Source
// calls are made synchronously from Send, Tick, Answer and Status and may
// block.
//
// # The driver's duties
//
// Sender (one per topic incarnation and remote):
//
//   - Create it with NewSender from the persisted SenderState, or the zero
//     one for a new cursor or a new incarnation.
//   - Call Send after every call and whenever the topic gets a message of
//     local origin, and publish the batches in order on the link (one
//     request each, carrying the topic's definition). Pass each reply to
//     Answer; report a transport error or no responders as a Failed
//     answer. Use a fresh reply subject per Sender: answers meant for an
//     earlier Sender must never reach a new one.
//   - Call Tick at NextDeadline (ack timeouts, end of backoff, stall).
//   - Persist State when Position changed (batching is safe: a restored
//     sender resends, and the remote answers duplicates).
//   - Export Status: health, lag, last success, counters.
//   - Pass the marks of every answer to the topic's Relay, and those of
//     the local stream to the cursor of their holder (Learn); run the
//     relays Relay.Plan lists and stop the others; on Plan.Probe, call
//     Probe on the other cursors at most once per relay delay.
//
// Receiver (one per region owner of the topics):
//
//   - Pass each arriving batch to Receive. Append Result.Store to the
//     topic (each message with its Origin in the envelope) and persist
//     State, under the owner's conditioned write, before sending
//     Result.Answer. If that fails, answer Failed and restore the Receiver
//     from the last persisted State (NewReceiver), since Receive already
//     moved the HWM.
//   - Count Result.Lost in the topic's stats and metrics.
//   - On ownership moves, restore from the last persisted State. It must
//     be persisted with the messages it accounts for: gap records are not
//     entries, so the HWMs cannot be rebuilt from the stored entries alone.
package replicator
