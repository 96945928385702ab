// Package core is the deterministic heart of the ledger client: the
// decisions of BookKeeper's ledger writer and ledger recovery
// (ARCHITECTURE §2), as state machines in the style of etcd-io/raft's
// RawNode. The driver (bookie/ledger) feeds them what happened and carries
// out what their Ready asks for; they do no I/O.
//
// # What it owns
//
//   - Metadata: the ledger record as stored in etcd (JSON, snake_case),
//     its validation, and striping: entry e goes to ensemble indexes
//     (e+k) mod E, k < Qw (WriteSet; BookKeeper's round-robin distribution
//     schedule), within the segment that holds e (SegmentFor).
//   - Writer (BookKeeper's LedgerHandle/PendingAddOp write path): entry ids,
//     sends to write sets, acks, the LastAddConfirmed, completions in
//     order, ensemble changes and the end of the writer.
//   - Recovery (BookKeeper's LedgerRecoveryOp with its fencing
//     ReadLastConfirmedOp): fencing, the forward reads, the rewrites,
//     the ensemble changes they need and where the ledger ends.
//     BeginRecovery is its first step.
//
// # What it must not do
//
// No I/O, no goroutines, no clocks, no randomness: it imports neither os,
// net, time, sync, gRPC nor etcd (internal/layering enforces it;
// and its TestCoresArePure that it starts no goroutine). Timeouts are the
// driver's: a request that times out is reported as failed.
// Writer and Recovery are not safe for concurrent use: one driver
// goroutine owns each.
//
// # The driver's duties
//
// Loop: feed inputs; rd := x.Ready(); x.Advance(rd) before feeding
// anything else; carry rd out. Then:
//
// Writer.
//   - Send every Send (bookie.v1 Add, naming Send.Instance, with Send.LAC
//     and the ledger's master key) and answer each exactly once with
//     Acked(s) or Failed(s, reason), passing s back unchanged: its Epoch
//     lets the core ignore stale answers. Map codes: FENCED → FailFenced,
//     BAD_MASTER_KEY → FailUnauthorized, INVALID → FailInvalid,
//     WRONG_INSTANCE → FailWrongInstance, READ_ONLY → FailReadOnly,
//     a broken stream or CLOSED/INTERNAL → FailUnavailable, no answer in
//     time → FailTimeout.
//   - Store Send.Length (the ledger length through the entry) with the
//     entry, in its frame, and report it back in recovery reads: it is
//     how recovery learns the length (BookKeeper keeps it in the digest
//     header of every entry).
//   - Keep each entry's payload until it appears in Ready.Completed:
//     an ensemble change re-sends it. Acknowledge the caller of Add for
//     each completed entry; when Ready.Err is set, fail every entry not
//     completed with it.
//   - For each bookie in Ready.Replace ask placement for a writable bookie
//     outside the ensemble and call Replace (NeedReplacement lists those
//     still waiting, for retries).
//   - CAS Ready.MetadataUpdate requiring the stored version to equal its
//     Version, then call MetadataCommitted(newVersion) or
//     MetadataConflict(stored).
//   - To close: Close fails with ErrPending while adds are unconfirmed
//     (wait for them, or give up and leave the ledger OPEN for the next
//     owner to recover); otherwise CAS the metadata it returns.
//
// Recovery.
//   - CAS the metadata BeginRecovery returns (OPEN → IN_RECOVERY), then
//     NewRecovery with the stored metadata.
//   - Fence (bookie.v1 Fence): Fenced(b, lac) or FenceFailed(b).
//   - Read with the fence flag (bookie.v1 Read, fence=true): the entry →
//     Found(payload, length); NO_ENTRY or NO_LEDGER → Absent; anything
//     else, including WRONG_INSTANCE, CORRUPT and timeouts → Unknown.
//   - Rewrite as recovery adds (AddEntry.recovery = true), naming
//     RewriteRequest.Instance: RewriteAcked or RewriteFailed.
//   - For each bookie in Ready.Replace ask placement for a writable
//     bookie not in Recovery.Exclude (nor one that failed) and call
//     Replace; none: ReplacementUnavailable
//     (NeedReplacement lists those still waiting).
//   - CAS Ready.MetadataUpdate requiring IN_RECOVERY at its Version,
//     then MetadataCommitted(newVersion) or MetadataConflict(stored);
//     a conflict ends the Recovery (ErrRetry; also ErrLedgerClosed when
//     another recoverer closed the ledger: return that record).
//   - Ready.Close: CAS it (IN_RECOVERY → CLOSED); if the CAS fails
//     another recoverer closed the ledger: read the metadata again.
//     Ready.Err (ErrRetry): leave the ledger IN_RECOVERY and start a new
//     Recovery from fresh metadata after a back-off.
//
// # Invariants
//
// Writer:
//   - An entry completes when Qa distinct bookies of its write set in the
//     current ensemble acked a send of the current epoch and every earlier
//     entry completed; LAC is the highest completed entry, it only grows,
//     and Completed lists 0..LAC once each, in order. Every Send carries
//     the LAC at the time it is handed out, which is below its entry.
//   - The first bookie failure begins an ensemble change and fixes its
//     new segment's first entry at LAC+1. Until the change commits, no ack
//     counts (pending entries lose their acks, even from bookies that
//     stay, since they will be re-sent), nothing is sent and the LAC does
//     not move, so no entry of the new segment is confirmed before the
//     segment is in etcd. Failures meanwhile are folded in; a replacement
//     is never a bookie of the ensemble. On commit the epoch moves on and
//     every entry from the first one is re-sent to its write set in the
//     new ensemble. A segment that starts where the last one does
//     replaces it (nothing of it was ever confirmed), as BookKeeper's
//     first-entry-keyed ensembles map does.
//   - A fenced reply ends the writer (ErrFenced); it is never a bookie
//     failure. An update CAS finding IN_RECOVERY or CLOSED ends it too.
//   - Close: LastEntryID = LAC, Length = bytes of entries 0..LAC.
//
// Recovery (only the fenced segment decides: the writer's last segment,
// Metadata.FencedSegment once a recovery changed the ensemble):
//   - Fencing suffices when every write set of the segment has at least
//     Qw−Qa+1 fenced bookies: then no Qa bookies of any write set accept
//     the old writer's adds, so it can complete no further entry. This is
//     BookKeeper's coverage rule; it needs at most E−Qa+1 fences, fewer
//     when Qw < E (E=5 Qw=2 Qa=2: every other bookie). Reading starts
//     once fence answers reach it; if every fence answered without
//     reaching it: ErrRetry. Reads carry the fence flag, so a lost fence
//     request leaves no bookie open.
//   - Entries up to base = max(highest LAC the fences reported, the
//     segment's first entry − 1) are known complete. Entry base is read
//     only for its stored length; reading goes forward from base+1
//     (ReadAhead entries at a time), deciding entries in order.
//   - An entry found on any bookie is recovered and rewritten to its whole
//     write set where readers look for it (the fenced segment, or a
//     segment recovery put after it); it counts once Qa bookies of that
//     write set stored the rewrite (the same durability as an
//     acknowledged add). The first entry that, with every bookie of its
//     fenced write set answered, is found nowhere and absent from at
//     least Qw−Qa+1 of them was never acknowledged: the ledger ends
//     before it. Waiting for every answer makes the result depend on
//     the answers, not on their order. Otherwise (too many Unknown) →
//     ErrRetry, never a short close. A wiped bookie answers
//     wrong-instance and a damaged copy corrupt: Unknown, never Absent,
//     so lost copies cannot pass for proof that an entry was not
//     acknowledged.
//   - The closed ledger's Length is the stored length of its last entry
//     (of entry base when nothing past it is found; 0 when empty).
//   - Ensemble change of recovery (BookKeeper's recovery adds go through
//     the add path, which changes the ensemble while IN_RECOVERY): when
//     more than Qw−Qa bookies of a recovered entry's write set fail its
//     rewrite, they are replaced (Ready.Replace). Further failures fold
//     in until the update is handed out. The new segment starts at
//     confirmed+1, the first entry not yet rewritten at quorum (entries
//     below never move; it replaces the last segment if that starts
//     there), and the update records the fenced segment. Until its CAS
//     (IN_RECOVERY at Version) answers, confirmed does not enter the new
//     segment and newly found entries' rewrites wait. On commit every
//     entry being rewritten takes its write set in the new metadata:
//     acks and failures of bookies still in it count, the new bookies
//     get the rewrite; failures that arrived meanwhile start the next
//     change. A resumed recovery may confirm less than the one before
//     it, so confirmed+1 may lie before the last segment: the failed
//     bookies are then replaced in every segment from there on
//     (segments before the fenced one's first entry never change). A
//     replacement is never in those segments nor a bookie this recovery
//     replaced (Exclude). The new bookies are never read for the
//     decision: their emptiness never counts as absent.
//   - Rewrites carry base as LAC, never confirmed: until this recovery's
//     close wins, a concurrent recoverer (or a later one, should this one
//     never close) decides on the fenced segment with its own faults and
//     may close lower, so no tailing reader may see entries past base
//     before the close. Metadata.ConfirmedFloor, a reader's floor, stops
//     likewise before the first segment a recovery made.
//   - No replacement (ReplacementUnavailable) or a refused CAS →
//     ErrRetry: the driver retries from fresh metadata, never closing
//     short.
package core
