// Package jetstream is the serving half of Strata's Pulsar design behind
// the JetStream API (ARCHITECTURE §3, shared/specs/nats-wire.md §2 and §4):
// a stream is a topic, a topic is a managed ledger (broker/mledger) owned
// by exactly one broker of the region, and a durable consumer is a cursor
// (broker/consumer) that the owner runs.
//
// What it owns:
//   - The stream registry: every topic's metadata (topics/… in the
//     region's etcd), watched by every broker, giving stream name →
//     topic and subject → capturing stream. Streams created through the
//     JetStream API live in the connection's tenant (with auth off, the
//     topology's defaults.jetstream tenant) and namespace (the default, or
//     config.metadata["strata.namespace"]); a stream "ns:topic" names
//     topic ns/topic. A publish on "tenant.namespace.topic[.…]" of a known
//     namespace auto-creates topic tenant/namespace/topic (stream
//     "namespace:topic", subjects "t.ns.topic" and "t.ns.topic.>") unless
//     the namespace forbids it. Any other subject is plain NATS.
//   - Ownership, by namespace bundles (broker/bundle decides placement):
//     a broker owns a bundle while its owner key
//     ("bundles/owners/<t>/<ns>/<range>", created under the broker's lease)
//     exists at the revision it created it at, and serves every topic of
//     the bundle: it opens the managed ledger (its takeover recovery fences
//     the previous owner) with that key's condition on every etcd write; a
//     fenced add or a failed condition drops the topic, a lost lease or
//     owner key the bundle. Placement (placement.go, ownership.go): brokers
//     register under their lease, mirror "bundles/" from a watch, acquire
//     unowned bundles they should own, shed one when over the load
//     threshold, answer admin unloads, hand every bundle over when stopping
//     (Close), and revoke the lease of a broker the Serf pool declares
//     failed (Config.MemberDown).
//   - Forwarding: a broker that does not own a topic forwards the client's
//     publish, API request, pull or ack, as it came, to the owner over the
//     region's internal link (subject $SR.FWD.<owner>); the owner answers
//     reply subjects directly (they are routed back like any reply) and
//     sends pull-consumer deliveries to the requester's broker
//     ($SR.DLV.<broker>), which delivers them locally with the message's
//     original subject.
//   - Backlog quotas (backlog.go): the owner measures each subscription
//     of a topic against its namespace's backlog quota and refuses, holds
//     (in order, never blocking a connection) or evicts; replicator
//     cursors are exempt; a subscription created on existing data counts
//     only what is published after its creation until it catches up.
//   - The JetStream API handlers, PubAcks (sent only after the ledger add
//     completed at the ack quorum), and the consumer drivers: one
//     goroutine per consumer that feeds the deterministic core and
//     persists its cursor (batched; AckSync answered after persistence).
//   - The driver's part of the subscription types (pin.go; the rules are
//     broker/consumer's): random 22-character pin ids for pinned_client
//     consumers, the Nats-Pin-Id header added after a message's stored
//     headers, the CONSUMER.PINNED/UNPINNED advisories, CONSUMER.UNPIN;
//     for key_shared consumers (metadata "strata.subscription":
//     "key_shared", "strata.key": "subject" or "header:<Name>") the
//     topic subject "tenant.namespace.topic" when the stream captures
//     its own topic's subjects, so the key is the tokens after it (the
//     whole subject otherwise). A puller is a pull's reply inbox, with the
//     broker the client is on: nats.go's Consume and Messages keep one
//     inbox, each Fetch uses a new one.
//
// Where it answers differently from the reference nats-server on purpose
// (the differential suite, diff_cases_test.go, declares each): STREAM.PURGE
// removes every message only (filter, seq or keep: 10052); a publish with
// a Strata-* header (reserved for replicated copies' origin) is refused
// with 10003 naming the header; push consumers
// (deliver_subject) are refused; stream "bytes" count Strata's ledger
// entries; api.level is Strata's own (jsapi.APILevel); and what
// broker/consumer does not support (e.g. priority policies overflow and
// prioritized, more than one priority group) is refused at
// CONSUMER.CREATE. Everything else — reply shapes, error codes and texts,
// statuses and their headers, AckSync answers — follows the reference.
// A pull has no interest check: a stopped client's waiting pull still
// takes messages until it expires or fills (they come back after
// ack_wait), where the reference skips a request whose inbox has no
// subscriber.
//
// Tenant quotas (Config.Quotas; quota_gate.go, quota_use.go): a client
// publish is charged at its topic's owner before it is stored, never a
// replicated copy; creating a topic or a consumer is checked against the
// tenant's count; each broker reports its tenants' topics, consumers and
// stored bytes every 250 ms. A refusal is JetStream error 10429 naming
// the tenant, the quota, its limit and its use.
//
// What it must not do: keep data that cannot be rebuilt from bookies and
// etcd; write to etcd without its ownership condition (except creating a
// topic that does not exist yet); parse the NATS protocol (broker does).
//
// Concurrency: the broker calls ClientPublish on client reader goroutines
// and internal handlers on client and route reader goroutines; both only
// parse, look up and hand work over (to a managed ledger's Publish, a
// consumer's mailbox, or a goroutine for API requests). Each owned topic's
// consumers run on their own goroutines; the registry and ownership maps
// are guarded by mutexes.
package jetstream
