// Package mledger is Strata's managed ledger (ARCHITECTURE §3): one
// topic as an ordered list of closed ledgers plus one open ledger,
// recorded in etcd, with a per-topic, 1-based, gap-free sequence (the
// JetStream stream sequence, nats-wire §4 "Sequences").
//
// # What it owns
//
//   - The topic's record at TopicKey(name) = "topics/<tenant>/<namespace>/<topic>"
//     under the region's Store prefix (TopicMeta, JSON, snake_case): the
//     caller's opaque Spec, the incarnation, the region its compact
//     records name (Region, below), FirstSeq, the ledger list
//     (each ledger's first sequence, entries, messages, bytes, first and
//     last publish times, last local origin sequence, state), the
//     Snapshot, and the Trash of ledgers awaiting deletion.
//   - The entry format (entry.go): one ledger entry holds a batch of one
//     or more consecutive messages: a version byte (2), the first
//     sequence and the message count (a fixed 13-byte header), then per
//     message a flags byte, the publish time, the subject, the raw NATS
//     header block, the origin when flagged, and the data. The origin is
//     full (bit 0: region, incarnation, origin sequence, origin time
//     relative to the publish time) for replicated messages, and compact
//     (bit 1: the origin sequence alone) for local ones, whose region and
//     incarnation the decoder takes from the topic's Local (TopicMeta's
//     Region and Incarnation); bit 2 omits an origin time equal to the
//     publish time. Records without an origin flag (written before
//     origins were) still decode, with no origin, and full local origins
//     (written before compact ones) too. Version 1 entries (one message
//     each, written before batching) are still read. Sequence → (ledger,
//     entry): a binary search of the list by first sequence, then of the
//     entry index (index.go: each entry's first sequence), which the ML
//     fills for the ledgers it writes and learns for older ones by reading
//     their entries in order.
//   - The batching policy (batch.go), below.
//   - Publish checks and state (JetStream semantics, nats-wire §2.4):
//     Nats-Msg-Id dedup within the duplicate window, the expected-last
//     checks, the per-subject index (last sequence and count per exact
//     subject), DiscardNew limits, and retention (MaxMsgs, MaxBytes, MaxAge;
//     TrimTo for interest and work-queue retention; Purge).
//   - A cache of recent confirmed messages (Config.CacheBytes) and a
//     read-ahead cache for older ones; readers of closed ledgers.
//   - The origins of geo-replication (origin.go), below: local origin
//     sequences, the high-water marks of the origin streams replicated
//     into the topic, gap records, reading by local origin sequence.
//
// The logic is plain state machines (core.go, trim.go, retention.go,
// restore.go, dedup.go, subjects.go; the batching policy in batch.go; the
// entry index and the reading of entries in order in index.go, which gets
// its reads as a function) that do no I/O and read no clock; the ML drives
// them and does the ledger and etcd I/O.
//
// # What it must not do
//
// Speak NATS or JetStream JSON (the caller parses headers into
// PublishOptions and maps errors to err_codes), decide ownership (it is
// given an ownership condition and obeys it), or hold state that cannot be
// rebuilt from the bookies and etcd.
//
// # Ownership and writes
//
// Every etcd write an ML makes is one Txn conditioned on Config.Cond (the
// caller's ownership key) and on the topic key's revision as this owner
// last wrote it. The ML stops at once — every pending and later Publish
// fails with ErrNotOwner, OnLost is called once, nothing is written again
// — when such a condition fails (another owner took over) or when an add
// fails because another owner fenced the ledger (ledger.ErrFenced; also
// ErrRecovering, ErrLedgerClosed, ErrMetadataConflict). Any other writer
// error (e.g. ledger.ErrNotEnoughBookies after ensemble changes failed)
// stops it too: the entries after a failed one cannot be acknowledged
// without a gap, so the next owner (possibly this process, reopening)
// recovers the ledger and decides what was stored; OnLost gets that error.
//
// Takeover (Open) recovers the open ledger (OpenForTakeover fences the
// old writer and gives its last entry), records it closed with its real
// entry count and the message count its first and last entries' batches
// give (its message bytes follow from its length, entry headers having a
// fixed size), rebuilds the state from the snapshot plus the messages
// after Snapshot.LastSeq (decoding batches; the entry holding
// Snapshot.LastSeq+1 may begin before it) — sequences, subject index,
// dedup window, the last local origin sequence and the origin streams'
// high-water marks —, creates a new ledger and writes the list. The snapshot is written with every change of the list
// (Open, each rollover, Purge, Close) and with lazy writes, so a takeover
// replays at most the last ledger.
//
// # Origins
//
// Every message may carry its origin (ARCHITECTURE §4; Message.Origin,
// the replicator core's Origin): region, topic incarnation, origin
// sequence and origin time, in its record.
//
//   - A local message's record holds only its origin sequence (the
//     compact form, entry.go): its region and incarnation are the topic's
//     Local, TopicMeta.Region and TopicMeta.Incarnation, which every
//     decoder is given (DecodeBatch, readFrom, recoverLedger) and fills
//     in, so each Message produced (Read, ReadLocal, NextLocal, a
//     takeover's replay and recovery) has its full origin. A decoder
//     without them fails (ErrNoLocalStream), never returning an empty
//     region. TopicMeta.Region is the Config.Region of the first Open that
//     had one and never changes for an incarnation: compact records mean
//     the region they were written in, even to an ML whose Config.Region
//     is another (a renamed region), which reads them with the old name
//     and writes its own local messages with full origins.
//   - The incarnation is a UUID made by Create, or by the first Open of a
//     topic created before incarnations (written with Open's conditioned
//     write). A deleted and re-created topic gets a new one, so its
//     origin streams are new ones everywhere.
//   - Local publishes, when Config.Region is set, take the next local
//     origin sequence with their topic sequence, at call time: 1-based,
//     gap-free, in topic order. The last confirmed one is rebuilt as the
//     topic sequence is (Snapshot.LastOriginSeq plus the recovered
//     tail), so it stays gap-free across rollovers, takeovers and crashes.
//     Each closed ledger records the last local origin sequence as of its
//     end (LedgerInfo.LastOrigin): ReadLocal finds origin sequence n in
//     the one ledger that can hold it, directly when that ledger holds
//     only local messages, else by reading forward within bounds the
//     counts give. A replicator sender reads with LastOriginSeq,
//     ReadLocal (its Source's Load) and NextLocal (sequentially).
//   - Replicated publishes (PublishOptions.Origin) go through the
//     receiver rule of replicator.Receiver per origin stream (topic,
//     origin region, incarnation), never take a local origin sequence,
//     and skip the Nats-Msg-Id and expected-last checks. As with
//     sequences there are two sets of high-water marks: the appended
//     one, which the rule is checked against (like the expected-last
//     checks, it counts unconfirmed messages; a duplicate is answered
//     after the publishes before it, so it is never acknowledged before
//     its original), and the confirmed one, which Origins reports and the
//     snapshot persists (Snapshot.Origins).
//   - Gap records (SkipOrigin) move a mark past a range trimmed at the
//     origin and count the loss. One is queued behind the publishes
//     before it, applied to the confirmed marks in its turn and written
//     (conditioned) before SkipOrigin returns.
//   - A new owner rebuilds the marks from the snapshot plus the recovered
//     tail's origins (per stream, the highest sequence). A gap record
//     accepted after the snapshot whose write was lost is counted again
//     when a later message of its stream jumps past it (the rule stores
//     nothing else above mark + 1); otherwise it is forgotten, and the
//     sender, refused with a gap, sends it again.
//
// # Batching
//
// A ledger add costs the same few round trips and journal writes
// whatever its size, and a ledger client does only so many adds a second
// (about 43k on two cores, each add going to Qw bookies), far fewer than
// the messages a topic must take: so, as Pulsar does, an entry holds a
// batch of messages, and the ML batches on the broker side. Publish
// assigns the sequence and runs the checks at call time, as before, and
// queues the message. At most Config.MaxInflightEntries (K) entries are
// appended and unconfirmed; whenever fewer are, everything queued goes
// out at once as one entry (within Config.MaxBatchBytes and
// MaxBatchMsgs; never spanning ledgers). At low load an entry holds the
// one message just published and goes after the linger gap (below), so
// batching adds at most that latency; under load messages gather while K
// entries are in flight, so entries grow with the load and the batch size follows the ledger's
// round trip. One timer remains, for bursts after a pause: when a
// message is queued with no entry in flight, it lingers until no further
// message came for Config.LingerGap (50 µs), at most Config.Linger (500 µs)
// or until a full entry is queued, so a client's window of async
// publishes costs one bookie round trip rather than two (the first
// message alone, then the rest); under load the K entries in flight are
// the waiting and nothing lingers. The policy is a plain state machine
// (batcher); the sender (send) is whichever goroutine finds none
// sending — a Publish, or the writer's callback for a confirmed entry —
// so entries are appended in sequence order without a lock held across
// the append. Messages waiting for the ledger are bounded by
// Config.MaxQueuedBytes: Publish blocks beyond it (back-pressure).
//
// Counts and limits are per message: RolloverEntries counts messages,
// Bytes and MaxBytes count each message's record (EncodedSize; the entry
// header is not counted), and LedgerInfo records a ledger's Entries and
// Msgs apart (records written before batching, without "msgs", load with
// Msgs = Entries).
//
// # Acknowledgement and rollover
//
// A publish is acknowledged (done called) once its entry is confirmed at
// the ack quorum, every earlier publish is answered, and a next owner is
// sure to find its ledger: one in the list, or the spare. The next ledger
// is created ahead (the spare, recorded as TopicMeta.Spare), and Publish
// switches to it the moment the open ledger reaches a rollover limit, so
// ledgers hold exactly RolloverEntries messages unless publishes outrun
// the previous rollover; messages queued for the old ledger still go to
// it. The loop then waits until every message of the old ledger is
// confirmed, closes it and records both, with a snapshot and the next
// spare, in one conditioned Txn, while acknowledgements go on. A next
// owner appends the spare to the list when its first message holds the
// sequence that follows the list's last ledger (the old owner had
// switched to it), and deletes it otherwise; a ledger after one that
// recovered short is deleted with every later one (none of their
// messages can have been acknowledged, as answers go out in order). When
// no recorded spare is ready, or for a purge, the loop switches to an
// unrecorded ledger whose messages are acknowledged only after the Txn. A
// crash between creating a ledger and recording it leaves that ledger
// unlisted, with none of its messages acknowledged; its custom property
// CustomTopic names the topic for a region-level cleanup.
//
// The open ledger's confirmed messages stay in the cache until it is
// closed (a ledger reader of an OPEN ledger lags its writer), so the open
// ledger rolls over at Config.CacheBytes/2 bytes at the latest.
//
// # What is approximate
//
//   - Bytes (State.Bytes, MaxBytes, DiscardNew MaxBytes): each message
//     counts its record's size (EncodedSize; messages of ledgers written
//     before batching are counted at their single-message entry's size, a
//     few bytes more). A ledger's Bytes come from its length, but a
//     message of a ledger written before compact origins, read back into
//     the caches, counts there at its compact size (about 50 bytes less
//     than its stored record: the caches' budget and the exact trimming
//     of cached messages see that). After a trim that leaves a ledger
//     partly live, its trimmed part is counted exactly for cached messages
//     and at the ledger's average size for the others; the count is exact
//     again once the whole ledger is below FirstSeq.
//   - MaxAge: a ledger goes when its last message is older than MaxAge;
//     within a ledger only cached messages are expired one by one, so an
//     uncached message may outlive MaxAge until its ledger's last message
//     expires (RolloverAge bounds that).
//   - Subject counts (LastForSubject, Subjects, NumSubjects) include
//     trimmed messages until the ML has subtracted them: at once for cached
//     messages and whole ledgers written in this ownership, otherwise after
//     reading the trimmed messages back (in the background, before their
//     ledger is deleted). A subject's last sequence is exact; a subject
//     whose last message is trimmed reports nothing.
//   - FirstSeq changes by retention and TrimTo are written to etcd lazily
//     (with the next write, at most every Config.MaintenanceInterval): a
//     takeover may re-expose messages trimmed in the last interval.
//   - The snapshot keeps at most Config.MaxSnapshotDedup msg ids (the
//     newest); older ids within the window are forgotten by the next owner.
//     The snapshot, subjects included, must fit in one etcd value (1.5 MiB
//     by default): topics with very many subjects need the snapshot in a
//     ledger (not done yet).
//   - The next owner learns msg ids written after the snapshot from the
//     Nats-Msg-Id header stored with each message: PublishOptions.MsgID must
//     be that header's value.
//   - A replicated duplicate's PubResult.Seq is its original's only when
//     that is its stream's last stored message, stored or replayed by this
//     owner; otherwise 0.
//
// # Concurrency
//
// An ML is safe for concurrent use. It owns two goroutines: the completer,
// the only caller of Publish's done callbacks (in call order; a slow done
// delays later answers, never the writer), and the loop, which runs
// rollovers, retention, ledger deletion, lazy metadata writes and the
// requests of Close, Purge, SetLimits and DeleteTopic one at a time (so
// metadata writes never race). Both end when the ML stops (Close, Drop,
// DeleteTopic or a loss); Done is closed after every pending publish was
// answered; OnLost then runs on the loop goroutine and may call the ML's
// methods. Publish, Read, State and the other accessors take one mutex for
// short sections, never held across I/O. Entries are appended by the
// sender of the moment (see Batching), on a Publish's goroutine or the
// ledger writer's callback goroutine; Publish blocks only for
// Config.MaxQueuedBytes. The entry index has its own leaf lock. The ML
// never closes Config.Store or Config.Ledgers.
//
// # The caller's duties
//
// Create the topic (Create) before the first Open; hold ownership (e.g. a
// meta.Leadership) and pass its Cond; Open at most one ML per topic per
// ownership; on OnLost or ErrNotOwner stop using the ML (Drop it) and
// forward to the new owner; Close (graceful hand-over) or Drop each ML.
package mledger
