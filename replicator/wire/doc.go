// Package wire is the replication link's wire format (ARCHITECTURE §4;
// issue 8): the subject a replicator publishes a batch on, the batch's
// encoding, and the remote's answer. It is plain encoding: no I/O, no
// clock, no goroutines.
//
// # Subject
//
// A batch for topic (tenant, namespace, topic) is published, as a NATS
// request, on
//
//	$STRATA.REPL.<tenant>.<namespace>.<topic>
//
// which names the topic by its identity, never by a client's subject.
// The reply subject is the sender's own (one per sender life).
//
// # Batch (payload of the request)
//
//	version      byte     1
//	kind         byte     1 messages, 2 gap record
//	id           uvarint  the batch's ID (replicator.Batch.ID)
//	region       string   origin region
//	incarnation  string   origin topic incarnation
//	first, last  uvarint  origin sequences covered, 1 <= first <= last
//	definition   bytes    the topic's definition (JSON, opaque here): the
//	                      remote creates an identical topic from it
//	messages     (kind 1 only) last-first+1 times:
//	  time       varint   origin publish time, Unix nanoseconds
//	  subject    string
//	  header     bytes    NATS header block, may be empty
//	  data       bytes
//
// A string or bytes field is a uvarint length followed by that many
// bytes. Nothing may follow the last field.
//
// # Answer (payload of the reply)
//
// JSON: {"batch":N,"kind":"stored|duplicate|gap-refused|failed","hwm":N}
// plus "error" (a failure's reason, for logs) and "lost" (origin
// sequences a gap record moved the high-water mark past).
package wire
