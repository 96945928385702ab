// Package meta is Strata's typed access to etcd: keys and values,
// compare-and-swap, conditioned transactions, leases, watches and leader
// election, plus a single-node etcd embedded in the process.
//
// # What it owns
//
//   - Embedded: one etcd member run in-process (StartEmbedded), on fixed
//     ports or on ports picked by the kernel and read back from the
//     listeners (ClientURL, PeerURL). A region without external etcd
//     endpoints runs one.
//   - Store: a connection to etcd (embedded or external endpoints) under a
//     key prefix. Every key a caller names is relative to Config.Prefix;
//     Stores with different prefixes never see each other's keys, watch
//     events or elections.
//   - Leases the Store keeps alive, watches it feeds, and election
//     candidacies built on etcd's concurrency package.
//
// # What it must not do
//
// It knows nothing about topics, ledgers, cursors or tenants: keys and
// values are opaque to it. Key layout and value schemas belong to the
// packages that own those concepts (bookie/ledger, broker, tenancy).
//
// # Writing safely as an owner
//
// Every revision this package returns is an etcd store revision; a key's
// ModRevision changes on every write to it. An owner makes each write a Txn
// conditioned on its ownership key:
//
//	rev, err := s.Txn(ctx, []meta.Cond{lead.Cond()}, meta.OpPut("ledgers/t", v))
//
// which applies only while that key is still at the revision the owner won
// it at, and otherwise writes nothing and returns a *ConflictError
// (errors.Is(err, ErrConflict)). CAS and DeleteIf are the one-key forms;
// expected revision 0 means "the key must be absent".
//
// # Leases
//
// GrantLease returns a Lease that the Store keeps alive in the background
// until Revoke (which deletes its keys now), Orphan (stop renewing: the
// lease expires after its TTL, as if the holder had crashed) or
// Store.Close (which does not revoke: leases expire after their TTL; revoke
// first to hand work over at once). Done closes when the lease is lost.
// Done is advisory — it may close up to about a second after etcd expired
// the lease — so correctness must come from conditioned writes, never from
// watching Done.
//
// TTLs are whole seconds (rounded up) and at least MinLeaseTTL (2 s): the
// etcd client renews from a loop that wakes every 500 ms, so a 1 s lease
// dies whenever a renewal round trip exceeds ~170 ms. etcd raises a TTL
// below its own floor, ceil(1.5 × election timeout): 1 s with
// EmbeddedConfig.Fast, 2 s with etcd's defaults. Lease.TTL reports what was
// granted. When etcd elects a new leader (or an Embedded restarts), every
// lease's countdown restarts from its full TTL.
//
// # Watches
//
// Watch delivers the changes under a prefix in revision order, with no gaps
// or repeats, from now (fromRev 0: anything written after Watch returns) or
// from a revision. ListWithRev followed by Watch(rev+1) gives a snapshot
// and every change after it. The channel is bounded (Config.WatchBuffer).
// A slow reader never blocks etcd, the etcd client or other watchers: when
// its channel is full the Store cancels its etcd watch, waits for the
// reader, and resumes from the first undelivered revision. The only loss
// possible is to compaction (EmbeddedConfig.CompactionRetention, 1 h by
// default): a watch that needs compacted history receives one
// EventCompacted and is closed; re-list and watch again. Lost connections
// and lost etcd leaders are retried with backoff, transparently.
//
// # Elections
//
// Campaign(ctx, election, value, lease) blocks until the caller leads, ctx
// ends, or lease is lost (ErrLeaseLost). Candidates are keys under
// election+"/" bound to their lease and win in the order they joined;
// leadership ends with Resign or with the lease (revoked or expired), and
// the next candidate wins. Leadership.Cond is the write condition "I still
// lead". Leader reports the current leader's value. Do not store other keys
// under an election's prefix.
//
// # Concurrency and lifetimes
//
// Store, Lease, Leadership and Embedded are safe for concurrent use. Every
// blocking method takes a context first. Every goroutine has one owner:
// the Store owns lease keep-alives, election sessions and watch feeders,
// and Close cancels them and waits for all of them before closing the etcd
// connection; nothing starts once Close has begun, and calls after Close
// fail fast with ErrClosed. Embedded.Close stops etcd and waits for it;
// both Close methods are idempotent and safe to call concurrently (etcd's
// own Close panics if called twice).
//
// # Embedded etcd notes
//
// With ClientPort or PeerPort 0 etcd advertises port 0 in its member list;
// use ClientURL, never endpoint discovery (Stores do not auto-sync
// endpoints for this reason). The gRPC gateway is off (we speak gRPC only).
// etcd's logs go to EmbeddedConfig.Logger at warn level and above.
// Periodic auto-compaction is on by default, since etcd keeps all history
// otherwise and stops accepting writes at its 2 GiB quota.
package meta
