package bookie

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// DialOptions configures Dial.
type DialOptions struct {
	// Instance is the bookie instance (UUID) every request names, as the
	// bookie's registration in etcd publishes it. A bookie serving another
	// instance refuses the requests with ErrWrongInstance. Empty: Dial asks
	// the bookie (Info) and pins whatever instance answers — for tools and
	// tests only, since it defeats the check.
	Instance string
	// TLS, when set, dials over TLS with this client config (the CA, and
	// the node's certificate for bookies that require one). Nil:
	// plaintext.
	TLS *tls.Config
	// GRPC are extra gRPC dial options, applied after the defaults
	// (transport credentials from TLS, MaxMessageSize in both directions).
	GRPC []grpc.DialOption
}

// Client is a typed client of one bookie instance. Safe for concurrent
// use. Every method returns the bookie's refusals as errors that match the
// storage sentinels (errors.Is(err, storage.ErrFenced), ...) or this
// package's (ErrWrongInstance, ErrInvalid, ErrInternal); other errors are
// gRPC transport errors (the bookie is unreachable or failed).
type Client struct {
	addr     string
	instance string
	conn     *grpc.ClientConn
	rpc      bookiepb.BookieClient

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // AddStream receivers
}

// Dial creates a client for the bookie at addr (host:port). It does not
// wait for a connection unless opts.Instance is empty (then it calls Info).
func Dial(ctx context.Context, addr string, opts DialOptions) (*Client, error) {
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// As the server's (see addWindowBytes).
		grpc.WithInitialWindowSize(addWindowBytes), grpc.WithInitialConnWindowSize(4 * addWindowBytes),
		grpc.WithWriteBufferSize(transportBufferBytes), grpc.WithReadBufferSize(transportBufferBytes),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize), clientCodec),
	}, opts.GRPC...)
	conn, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("bookie: dial %s: %w", addr, err)
	}
	c := &Client{addr: addr, instance: opts.Instance, conn: conn, rpc: bookiepb.NewBookieClient(conn)}
	if c.instance == "" {
		info, err := c.Info(ctx, false)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("bookie: dial %s: learn instance: %w", addr, err)
		}
		c.instance = info.Instance
	}
	return c, nil
}

// Addr is the address dialed.
func (c *Client) Addr() string { return c.addr }

// Instance is the instance the client's requests name.
func (c *Client) Instance() string { return c.instance }

// Close closes the connection; open AddStreams break (their pending adds
// fail) and Close waits for their goroutines. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.conn.Close()
	c.wg.Wait()
	return err
}

// Read reads one entry.
func (c *Client) Read(ctx context.Context, ledgerID, entryID int64) (storage.Entry, error) {
	es, _, err := c.read(ctx, &bookiepb.ReadRequest{LedgerId: ledgerID, FirstEntryId: entryID, LastEntryId: entryID})
	if err != nil {
		return storage.Entry{}, err
	}
	return es[0], nil
}

// ReadRange reads entries first..last: consecutive entries from first, at
// least one, stopping early at the first entry the bookie lacks or at
// maxBytes of payload (0: the bookie's limit). A missing first entry is
// storage.ErrNoEntry.
func (c *Client) ReadRange(ctx context.Context, ledgerID, first, last int64, maxBytes int) ([]storage.Entry, error) {
	es, _, err := c.read(ctx, &bookiepb.ReadRequest{LedgerId: ledgerID, FirstEntryId: first, LastEntryId: last, MaxBytes: int64(maxBytes)})
	return es, err
}

// RecoveryRead fences the ledger with masterKey, then reads first..last
// like ReadRange. It returns the LAC the bookie had when fenced; the LAC
// is valid with a storage.ErrNoEntry error too (the fence holds then).
func (c *Client) RecoveryRead(ctx context.Context, ledgerID, first, last int64, masterKey []byte) ([]storage.Entry, int64, error) {
	return c.read(ctx, &bookiepb.ReadRequest{LedgerId: ledgerID, FirstEntryId: first, LastEntryId: last, Fence: true, MasterKey: masterKey})
}

func (c *Client) read(ctx context.Context, req *bookiepb.ReadRequest) ([]storage.Entry, int64, error) {
	req.Instance = c.instance
	resp, err := c.rpc.Read(ctx, req)
	if err != nil {
		return nil, storage.NoEntry, err
	}
	if err := ErrorOf(resp.GetCode(), resp.GetMessage()); err != nil {
		return nil, resp.GetLac(), err
	}
	if len(resp.GetEntries()) == 0 {
		return nil, resp.GetLac(), fmt.Errorf("%w: read of ledger %d from %s answered OK with no entry", ErrInternal, req.LedgerId, c.addr)
	}
	es := make([]storage.Entry, len(resp.GetEntries()))
	for i, e := range resp.GetEntries() {
		es[i] = storage.Entry{LedgerID: e.GetLedgerId(), EntryID: e.GetEntryId(), LAC: e.GetLac(), Payload: e.GetPayload()}
	}
	return es, resp.GetLac(), nil
}

// ReadLAC returns the ledger's LAC on this bookie. With timeout > 0 it is
// a long poll: the bookie answers once its LAC is greater than waitAfter,
// or when timeout passes (then the LAC returned is ≤ waitAfter). The
// bookie caps timeout (ServerConfig.MaxLongPoll); ctx bounds the call as
// usual.
func (c *Client) ReadLAC(ctx context.Context, ledgerID, waitAfter int64, timeout time.Duration) (int64, error) {
	req := &bookiepb.ReadLACRequest{Instance: c.instance, LedgerId: ledgerID, WaitAfter: waitAfter}
	if timeout > 0 {
		ms := (timeout + time.Millisecond - 1) / time.Millisecond
		req.TimeoutMs = uint32(min(int64(ms), math.MaxUint32))
	}
	resp, err := c.rpc.ReadLAC(ctx, req)
	if err != nil {
		return storage.NoEntry, err
	}
	return resp.GetLac(), ErrorOf(resp.GetCode(), resp.GetMessage())
}

// Fence fences the ledger on this bookie and returns its LAC.
func (c *Client) Fence(ctx context.Context, ledgerID int64, masterKey []byte) (int64, error) {
	resp, err := c.rpc.Fence(ctx, &bookiepb.FenceRequest{Instance: c.instance, LedgerId: ledgerID, MasterKey: masterKey})
	if err != nil {
		return storage.NoEntry, err
	}
	return resp.GetLac(), ErrorOf(resp.GetCode(), resp.GetMessage())
}

// Info describes the bookie, with its ledger list when withLedgers (asked
// for in pages, InfoRequest.ledgers_from, until the list is complete; the
// other fields are the first page's). Errors: the bookie's (ErrorOf), or
// the RPC's.
func (c *Client) Info(ctx context.Context, withLedgers bool) (Info, error) {
	req := &bookiepb.InfoRequest{Instance: c.instance, ListLedgers: withLedgers}
	var info Info
	for page := 0; ; page++ {
		resp, err := c.rpc.Info(ctx, req)
		if err != nil {
			return Info{}, err
		}
		if err := ErrorOf(resp.GetCode(), resp.GetMessage()); err != nil {
			return Info{}, err
		}
		got := infoFromProto(resp)
		if page == 0 {
			info = got
		} else {
			info.Ledgers = append(info.Ledgers, got.Ledgers...)
		}
		if !resp.GetMoreLedgers() || len(got.Ledgers) == 0 {
			return info, nil
		}
		req.LedgersFrom = got.Ledgers[len(got.Ledgers)-1].LedgerID + 1
	}
}

// errClientClosed is returned by NewAddStream after Close.
var errClientClosed = errors.New("bookie: client closed")
