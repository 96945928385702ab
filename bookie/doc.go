// Package bookie is the network face of a bookie: the bookie.v1 gRPC
// service over a storage engine (Server), a typed client of it (Client,
// AddStream), the bookie's identity (cookies) and its registration in etcd
// (Registrar), and StartBookie, which assembles them into a running
// bookie for the region wiring.
//
// # What it owns
//
//   - The protocol: proto/bookie/v1/bookie.proto, generated into bookiepb.
//     Outcomes travel as a stable Code in each response (errors.go maps
//     them 1:1 to the storage sentinels and to ErrWrongInstance,
//     ErrInvalid, ErrInternal); gRPC status errors mean a transport or
//     server failure, never a per-request refusal, so one failed entry does
//     not end an Add stream.
//   - Request validation (validate.go): malformed requests (negative ids,
//     a LAC not below the entry id, missing master key, oversize payload,
//     inverted ranges) get CODE_INVALID before reaching the engine.
//   - Identity: a cookie (bookie id, instance UUID, creation time) in the
//     data directory (CookieFile) and in etcd (CookieKey: bookie-cookies/<id>).
//     planCookie is the pure decision: nothing anywhere → new instance;
//     disk matches etcd → same instance; disk empty but etcd knows the id →
//     the disk was lost, a NEW instance replaces the old in etcd (CAS) and
//     requests naming the old one get CODE_WRONG_INSTANCE; disk of another
//     id, or disk and etcd naming different instances → refuse to start
//     (ErrCookieMismatch); disk cookie but none in etcd → restore etcd;
//     no disk cookie but storage data in the directory
//     (BookieConfig.HasStorageData) → refuse to start (ErrCookieMismatch).
//   - Registration: bookies/<id> → Registration (JSON: address, instance,
//     free and total bytes, read-only) under a lease, rewritten when the
//     read-only state flips or free space moves by FreeBytesDelta, and
//     conditioned on the cookie's etcd revision so a superseded instance
//     cannot register (Bookie.Fatal reports it).
//
// # What it must not do
//
// Know about topics, tenants or ledger metadata (bookie/ledger's), or
// reach into the engine's files: it sees storage.Storage only.
//
// # Concurrency and lifetimes
//
// Server, Client, AddStream, Registrar and Bookie are safe for concurrent
// use. Each Add stream is served by one receiver goroutine (owned by the
// Server) and the handler goroutine, the stream's single sender; the
// engine's completion callbacks only queue a result and never block. At
// most Limits.MaxAddsInFlight adds (entries) per stream are in flight;
// then the server stops reading the stream and gRPC flow control holds the
// client back. A client that stops reading responses stalls only its own
// stream. On the client, each AddStream has a sending goroutine and a
// receiving goroutine (both owned by the Client); the receiving one runs
// the done callbacks in completion order, so a slow callback delays that
// stream only.
//
// # Batching on the Add stream
//
// The per-message cost of gRPC and protobuf dwarfs that of a small entry,
// so both directions carry many adds per message, without waiting for
// them: AddStream.Send only queues the add, and the stream's sender sends
// everything queued as one AddRequest as soon as its previous send is
// done (at once on an idle stream: no Nagle-like delay). Likewise the
// server's sender puts every result completed since its previous send in
// one AddResponse (OK results as a packed list of tags, others one by
// one with their code). Batches are bounded (AddStream: 256 entries or
// 1 MiB; the server refuses requests beyond MaxAddBatch entries or
// MaxAddBatchBytes of payload with CODE_INVALID per entry, and ends the
// stream on one beyond 4 × MaxAddBatch entries), and outcomes
// stay per entry: one refused entry does not affect the others of its
// request.
//
// Shutdown: Bookie.Stop deregisters, calls Server.Shutdown (Add streams
// end with gRPC Unavailable, long polls answer CODE_CLOSED), stops gRPC
// (gracefully until its context ends), waits for every goroutine, then
// closes the storage. Client.Close breaks its AddStreams (pending adds
// fail with ErrStreamClosed) and waits for their goroutines.
//
// # Regenerating bookiepb
//
// After editing proto/bookie/v1/bookie.proto, with protoc (3.21+),
// protoc-gen-go and protoc-gen-go-grpc on PATH (go install
// google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12 and
// google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2; they land in
// $(go env GOPATH)/bin):
//
//	cd bookie && go generate .
//
// runs the protoc line in gen.go and rewrites bookiepb/*.pb.go; commit
// them with the .proto. Wire compatibility: never renumber or reuse a
// field or a Code value.
package bookie
