// Package ledger is Strata's ledger client: BookKeeper's client side
// (ARCHITECTURE §2) as a thin driver around the deterministic core in
// bookie/ledger/core. It creates ledgers, writes them with striped quorum
// writes, changes ensembles when bookies fail, reads them up to the last
// add confirmed (tailing with long polls), and recovers them to take them
// over (fencing).
//
// # What it owns
//
//   - Ledger metadata in etcd, under the region's Store prefix:
//     LedgerKey(id) = "ledgers/<id as %020d>" holds the core.Metadata as
//     JSON (snake_case) plus "custom" (opaque properties given to
//     Create); the record's Version is the key's mod revision and every
//     change is a CAS on it. A recovery that changed the ensemble also
//     records "fenced_segment" (the writer's last segment, which later
//     recoveries fence and read; readers use "segments"). Ids come from LedgerIDKey
//     ("ledger-ids/next"), allocated and used in one transaction, from 1.
//   - Placement: Config.Placement (DefaultPlacement: random writable
//     bookies) over the registrations bookies keep in etcd, less the
//     Client's quarantine: a bookie instance that failed an add of any
//     of its writers is not placed again for Config.BookieQuarantine
//     (its registration outlives it until its lease expires), so that
//     ensemble changes never swap dead bookies for one another; a
//     writer left with only quarantined candidates waits (placement
//     retried with backoff, no metadata written) and ends with
//     ErrNotEnoughBookies after ReplaceTimeout. Ensembles
//     name bookies by id and record each one's instance (from its
//     registration); every request names the recorded instance, so a
//     bookie whose disk was wiped (a new instance at the same id and
//     address) answers WRONG_INSTANCE instead of silently accepting or
//     denying entries: a writer treats it as a failed bookie, recovery as
//     Unknown (never "absent"). Once out of the ensemble, the new
//     instance is a bookie like any other and may be placed again, under
//     its new instance.
//   - The entry frame on bookies (frame.go): an 8-byte big-endian ledger
//     length through the entry (the core's Send.Length, which recovery
//     reads back to set the closed ledger's Length), a 4-byte CRC32C over
//     ledger id, entry id, length and payload, then the payload. Readers
//     strip and check it (DigestType "crc32c" in the metadata).
//   - Connections: one per bookie instance, shared by the Client's
//     writers, readers and recoveries, found through the bookie's
//     registration and looked up again after a transport failure.
//
// # What it must not do
//
// Know about topics, tenants or anything the broker builds on ledgers:
// entries are opaque payloads, custom properties opaque strings. It
// decides nothing the core decides (quorums, LAC, when and where an
// ensemble changes, where recovery ends); it carries the core's
// decisions out.
//
// # Concurrency
//
// Client, Writer and Reader are safe for concurrent use. Each Writer has
// one owner goroutine, the only one that touches its core.Writer: appends,
// bookie answers, placement answers, etcd answers and timer ticks reach it
// through an unbounded mailbox (pushing never blocks, so a gRPC callback
// never waits for the owner). The owner never blocks on I/O: each bookie
// of the ensemble has an add session whose goroutine sends on one
// pipelined AddStream (AddStream.Send may wait for gRPC flow control when
// a bookie stalls; the owner then times the adds out, AddTimeout, and
// replaces the bookie); placement and metadata CASes run on helper
// goroutines. Completions go, in entry order, to a callback goroutine, so
// a slow append callback delays only later callbacks (which queue in
// memory), never the writer; appended but unconfirmed bytes are bounded by
// Config.MaxPendingBytes (AppendAsync blocks beyond it). OpenForTakeover
// owns its core.Recovery on the calling goroutine; its fences, reads,
// rewrites, placement requests and metadata CASes (a recovery's
// ensemble change) run on goroutines that end before it returns. Readers start
// goroutines only within a call.
//
// Every goroutine has an owner: a Writer's stop when Close (or
// Client.Close) returns, except the callback goroutine, which Client.Close
// waits for (a callback may itself call Writer.Close). Client.Close
// cancels calls in progress, stops writers without closing their ledgers
// (they stay OPEN, for the next owner's OpenForTakeover) and closes the
// connections.
//
// # The caller's duties
//
// One Writer per ledger, ever: only the process that created a ledger
// writes it; anyone else who wants to write must OpenForTakeover (which
// fences the old writer) and create a new ledger. Call Writer.Close (or
// Client.Close). A tailing Reader of an OPEN ledger sees entry n once the
// writer has sent a later entry (whose add carries the LAC) or closed the
// ledger: the bookie protocol has no LAC-only message yet.
package ledger
