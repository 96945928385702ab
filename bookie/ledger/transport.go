package ledger

import (
	"context"
	"crypto/tls"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
)

// Target names one bookie instance to connect to.
type Target struct {
	ID       string // bookie id, as ensembles name it
	Address  string // host:port from its registration
	Instance string // the instance every request names (from the segment)
}

// Transport opens connections to bookies. Conns are cached by the Client
// (one per bookie id and instance) and shared by its writers, readers and
// recoveries; the Client closes them.
type Transport interface {
	// Dial returns a connection to t. It should not wait for the network:
	// requests report unreachable bookies.
	Dial(ctx context.Context, t Target) (Conn, error)
}

// Conn is a connection to one bookie instance: the subset of
// *bookie.Client the ledger client uses, with the same contract (errors
// match storage's and bookie's sentinels through errors.Is; other errors
// are transport failures). Safe for concurrent use.
type Conn interface {
	NewAddStream(ctx context.Context) (AddStream, error)
	ReadRange(ctx context.Context, ledgerID, first, last int64, maxBytes int) ([]storage.Entry, error)
	RecoveryRead(ctx context.Context, ledgerID, first, last int64, masterKey []byte) ([]storage.Entry, int64, error)
	ReadLAC(ctx context.Context, ledgerID, waitAfter int64, timeout time.Duration) (int64, error)
	Fence(ctx context.Context, ledgerID int64, masterKey []byte) (int64, error)
	Close() error
}

// AddStream is a pipelined add stream (*bookie.AddStream's contract: if
// Send returns nil, done is called exactly once, possibly before Send
// returns; Send may block on flow control).
type AddStream interface {
	Send(req storage.AddRequest, done func(error)) error
	// TrySend is Send if it can be done without waiting (true, or
	// Send's error); false, with done not called, if Send would wait.
	TrySend(req storage.AddRequest, done func(error)) (bool, error)
	Close(ctx context.Context) error
}

// Defaults of GRPCTransport.
const (
	// DefaultKeepaliveTime is gRPC's minimum for clients. Note the
	// bookie's gRPC server keeps gRPC's default enforcement (pings at
	// most every 5 minutes while it sends nothing): a stream idle for
	// three pings (~30 s) would be ended, so writers close add streams
	// idle for idleStreamClose and long polls answer within 10 s.
	DefaultKeepaliveTime    = 10 * time.Second
	DefaultKeepaliveTimeout = 5 * time.Second
	DefaultMaxReconnect     = time.Second
)

// GRPCTransport dials bookies with bookie.Dial. The zero value uses the
// defaults.
type GRPCTransport struct {
	// KeepaliveTime: with a stream open and nothing received for this
	// long, the connection is pinged; KeepaliveTimeout later without an
	// answer it is closed, failing its requests (so a frozen bookie is
	// noticed even with nothing in flight). Defaults 10 s and 5 s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxReconnect caps gRPC's reconnect backoff (default 1 s), so that a
	// restarted bookie is reachable again quickly.
	MaxReconnect time.Duration
	// TLS, when set, is the client config bookies are dialled with
	// (bookie.DialOptions.TLS). Nil: plaintext.
	TLS *tls.Config
}

// Dial implements Transport.
func (g GRPCTransport) Dial(ctx context.Context, t Target) (Conn, error) {
	kt, kto, mr := g.KeepaliveTime, g.KeepaliveTimeout, g.MaxReconnect
	if kt <= 0 {
		kt = DefaultKeepaliveTime
	}
	if kto <= 0 {
		kto = DefaultKeepaliveTimeout
	}
	if mr <= 0 {
		mr = DefaultMaxReconnect
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay, bo.MaxDelay = min(100*time.Millisecond, mr), mr
	c, err := bookie.Dial(ctx, t.Address, bookie.DialOptions{Instance: t.Instance, TLS: g.TLS, GRPC: []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: kt, Timeout: kto}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 5 * time.Second}),
	}})
	if err != nil {
		return nil, err
	}
	return grpcConn{c}, nil
}

type grpcConn struct{ *bookie.Client }

func (g grpcConn) NewAddStream(ctx context.Context) (AddStream, error) {
	// Entry frames never change once sealed (writerLoop.send), and
	// recovery re-adds what it read: the stream need not copy them.
	s, err := g.Client.NewAddStreamWith(ctx, bookie.AddStreamOptions{BorrowPayloads: true})
	if err != nil {
		return nil, err
	}
	return s, nil
}
