// Package link is the replication link of one broker to one remote
// region (ARCHITECTURE §4; issue 8): a nats.go connection to a live
// broker of that region, chosen from the Serf WAN pool, on which the
// broker's replicator senders publish their batches and get their
// answers.
//
// # What it owns
//
//   - The connection: made to the remote region's brokers the membership
//     callback (Config.Brokers, the WAN pool's live members tagged with
//     that region) lists at that moment; nats.go fails over between them
//     and the brokers the region advertises (INFO connect_urls). When the
//     link has been down for Config.Redial it is dropped and made again
//     from a fresh list, so a region whose brokers all changed is still
//     reached. No remote address is configured by hand.
//   - Answer routing: one subscription per connection on the link's
//     inbox; each sender life registers (Register) and gets its own reply
//     prefix, so answers meant for an earlier sender never reach a new
//     one.
//
// # What it must not do
//
// It does not decide what to send or when to retry (replicator.Sender
// does), encode batches (replicator/wire does) or touch the managed
// ledger. Publish never blocks on the network: when the link is down it
// fails at once and the sender backs off.
//
// # Concurrency
//
// A Link is safe for concurrent use. One goroutine per Link keeps the
// connection; answers are handed over on buffered channels, dropped (and
// counted) when a sender does not keep up: the sender's ack timeout then
// resends, which the remote answers as a duplicate.
package link
