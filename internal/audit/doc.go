// Package audit is the pure core of `strata audit` (issue 26 item 3):
// it summarises the origin streams a region holds for a topic and
// compares the summaries of two regions, with no I/O.
//
// Summaries. A topic's owner reads its managed ledger once, in local
// sequence order, and feeds every message to a Summarizer as (origin,
// origin sequence, local sequence, Digest). For each origin stream
// (region, topic incarnation) the Summarizer keeps the ranges of origin
// sequences held and, for every span of Span origin sequences (a grid
// aligned to From), the count of messages held and the sum modulo 2^64
// of their digests. A Digest covers the origin sequence, the client's
// header block and the payload, never the local sequence or local time,
// so the same message has the same digest in every region. Only
// summaries cross the network: for a million messages and a span of
// 4096, a few hundred spans per origin.
//
// Comparison. Compare takes the origin region's summary of an origin
// stream (the reference: the origin holds everything it published that
// retention kept) and another region's, and a window of origin
// sequences that the other region must hold: from the lowest sequence
// both still hold (lower ones count as trimmed by retention) up to the
// bound the caller gives. The caller's bound is what the remote has
// acknowledged: the origin's replicator cursor position towards it,
// or its own high-water mark when higher (a copy relayed through a
// third region). Messages above the bound are in flight (the
// replicator's lag) and are not differences. Held ranges give missing
// messages exactly; span sums give spans whose content differs, which
// the caller narrows by asking both regions again for finer spans of
// those spans only (NextSpan) until a span is one message.
//
// Cursors. Stalled reports a replicator cursor whose position did not
// move between two readings although it had a backlog at the first,
// whatever lag it reports.
//
// Concurrency: none; values are owned by their caller.
package audit
