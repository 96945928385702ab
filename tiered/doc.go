// Package tiered moves closed ledgers to a region's blob store and reads
// them back (ARCHITECTURE §6; Pulsar's tiered storage offload, which
// likewise writes one data object and one index object per ledger).
//
// # What it owns
//
//   - The offload format (format.go): a data object of framed entries,
//     each frame carrying its entry id, length and a CRC32C over ledger
//     id, header and payload, so any ranged read of it can be verified;
//     and an index object (magic, version, ledger id, counts, data length,
//     interval N, CRC32C) with the offset of every N-th entry. Names:
//     DataObjectName(base), IndexObjectName(base). The decoders treat
//     their input as hostile: every malformed object is ErrCorrupt with
//     detail, never a panic or an allocation beyond the input's size (or
//     MaxEntryBytes for one entry).
//   - Offload (offload.go): streams a closed ledger from an EntrySource
//     (a *ledger.Reader) into the data object, puts the index, verifies
//     both by reading back (the index, and the last entry through the
//     read path), and deletes both objects on any failure. Offloaded is
//     what the caller records.
//   - Tiered reads (reader.go): Open validates the index; Reader.Read has
//     ledger.Reader.Read's contract for a closed ledger, served by ranged
//     GETs of BlockSize-aligned blocks, with read-ahead on sequential
//     patterns.
//   - The block cache (cache.go): BlockCache, LRU by bytes, shared by a
//     region's Readers of one store.
//
// The blob store is reached only through ObjectStore, a subset of
// tiered/blob.Store that the fs, S3, GCS and memory drivers satisfy.
//
// # What it must not do
//
// Decide when to offload, when to delete the bookie copy or the objects,
// or anything about retention: those are the caller's policies (the
// managed ledger, from tenancy). It knows nothing of topics, tenants or
// namespaces: the caller chooses the base name. It never writes to
// bookies and never fences a ledger (its EntrySource reads up to the
// recorded end).
//
// # Concurrency
//
// Offload runs in the caller's goroutine plus one goroutine for the
// store's Put, which has returned before Offload does. Reader and
// BlockCache are safe for concurrent use. Each Reader owns its read-ahead
// goroutines (at most ReadAheadBlocks fetches, each of at most
// ReadAheadBlocks blocks past the block being read); Close cancels them
// and waits, is idempotent, and no read-ahead starts after it. A read
// that needs a block a read-ahead is fetching waits for that fetch
// instead of fetching again.
//
// # Caller's duties
//
// Give each offload attempt a fresh base name (a new UUID), since a
// BlockCache trusts that a name's content never changes; Close Readers;
// after Delete of objects a shared cache may hold, call BlockCache.Drop.
// Use one BlockCache per store.
package tiered
