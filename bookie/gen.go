package bookie

// Regenerate bookiepb after editing proto/bookie/v1/bookie.proto (needs
// protoc, protoc-gen-go and protoc-gen-go-grpc on PATH; see doc.go).
//go:generate protoc -I proto --go_out=. --go_opt=module=github.com/stratamesh/strata/bookie --go-grpc_out=. --go-grpc_opt=module=github.com/stratamesh/strata/bookie proto/bookie/v1/bookie.proto
