package bookie

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// Server is the bookie.v1 gRPC service over a storage.Storage. Create it
// with NewServer, attach it with Register, end it with Shutdown and Close.
type Server struct {
	bookiepb.UnimplementedBookieServer

	cfg ServerConfig
	st  storage.Storage
	log *slog.Logger

	// base is canceled by Shutdown: it ends long polls, fences in
	// progress and Add streams.
	base   context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // Add stream receivers

	addStats addStats
}

// addStats counts the Add streams' traffic, for tests (and, one day,
// metrics): with entries far above requests and responses, batching works.
type addStats struct {
	requests  atomic.Int64 // AddRequests received
	entries   atomic.Int64 // entries in them
	responses atomic.Int64 // AddResponses sent
}

// NewServer returns a Server for cfg. cfg must pass Validate: NewServer
// panics otherwise (a wiring mistake, not a runtime condition).
func NewServer(cfg ServerConfig) *Server {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	base, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg: cfg, st: cfg.Storage,
		log:  cfg.Logger.With("bookie", cfg.BookieID, "instance", cfg.Instance),
		base: base, cancel: cancel,
	}
}

// Register attaches the service to g (a *grpc.Server). g should be
// created with ServerOptions so that messages up to MaxMessageSize pass.
func (s *Server) Register(g grpc.ServiceRegistrar) { bookiepb.RegisterBookieServer(g, s) }

// HTTP/2 flow-control window per stream (the connection's is four
// times it) and transport read/write buffer sizes, for both ends of the
// bookie.v1 service (ServerOptions, Dial).
const (
	addWindowBytes       = 4 << 20
	transportBufferBytes = 256 << 10
)

// ServerOptions are the gRPC server options the bookie protocol needs
// (message size limits, flow control, keepalive policy) and its codec
// (see codec).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
		serverCodec, // see codec
		// Flow-control windows and socket buffers sized for a stream of
		// 64 KiB Add requests (see the client's sendBatchBytes): gRPC's
		// defaults (64 KiB windows grown by its BDP estimate, 32 KiB
		// buffers) held a pipelined stream back, ~12% fewer adds/s
		// (docs/perf.md, issue 3). Memory per Add stream stays bounded by
		// MaxAddsInFlight plus one window.
		grpc.InitialWindowSize(addWindowBytes), grpc.InitialConnWindowSize(4 * addWindowBytes),
		grpc.WriteBufferSize(transportBufferBytes), grpc.ReadBufferSize(transportBufferBytes),
		// Ledger clients ping every 10 s to notice a frozen bookie; gRPC's
		// default policy would refuse pings more often than every 5 min
		// and cut the connection.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
}

// Shutdown begins ending the service and returns at once: open Add
// streams end with gRPC status Unavailable (adds still in flight on them
// get no response; the client fails them), long polls and fences in
// progress answer CODE_CLOSED, and later requests get CODE_CLOSED (Add:
// Unavailable). Call it before grpc.Server.GracefulStop, which otherwise
// waits for every open Add stream. Idempotent.
func (s *Server) Shutdown() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
}

// Close is Shutdown, then waits for the goroutines the Server started.
// A stream whose client stopped reading can hold its handler in a gRPC
// send, and its receiver in a read, until the gRPC server stops the
// stream: call Close after grpc.Server.Stop or GracefulStop has returned.
// Idempotent.
func (s *Server) Close() {
	s.Shutdown()
	s.wg.Wait()
}

// goStream runs f as a goroutine the Server owns, unless it is closed.
func (s *Server) goStream(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

func (s *Server) isClosed() bool { return s.base.Err() != nil }

// errClosing is what requests meet once Shutdown has begun
// (CODE_CLOSED).
var errClosing = fmt.Errorf("%w: server shutting down", storage.ErrClosed)

// codeMsg is the code and message of err for a response, logging errors
// that are the bookie's fault.
func (s *Server) codeMsg(op string, ledger int64, err error) (bookiepb.Code, string) {
	if err == nil {
		return bookiepb.Code_CODE_OK, ""
	}
	c := CodeOf(err)
	if c == bookiepb.Code_CODE_INTERNAL {
		s.log.Warn("request failed", "op", op, "ledger", ledger, "err", err)
	}
	return c, err.Error()
}

// checkFor returns the request's validation error, else ErrWrongInstance
// for another instance, else errClosing after Shutdown.
func (s *Server) checkFor(valid error, instance string) error {
	switch {
	case valid != nil:
		return valid
	case instance != "" && instance != s.cfg.Instance:
		return wrongInstance(instance, s.cfg.Instance)
	case s.isClosed():
		return errClosing
	}
	return nil
}

func wrongInstance(asked, serving string) error {
	return &instanceError{asked: asked, serving: serving}
}

type instanceError struct{ asked, serving string }

func (e *instanceError) Error() string {
	return "bookie: wrong instance: request for " + e.asked + ", this bookie is " + e.serving
}
func (e *instanceError) Unwrap() error { return ErrWrongInstance }

// withBase derives a context from ctx (with timeout, if > 0) that
// Shutdown also cancels.
func (s *Server) withBase(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// Fence implements bookiepb.BookieServer.
func (s *Server) Fence(ctx context.Context, req *bookiepb.FenceRequest) (*bookiepb.FenceResponse, error) {
	resp := &bookiepb.FenceResponse{Lac: storage.NoEntry}
	if err := s.checkFor(validateFence(req), req.GetInstance()); err != nil {
		resp.Code, resp.Message = s.codeMsg("fence", req.GetLedgerId(), err)
		return resp, nil
	}
	lac, err := s.fence(ctx, req.GetLedgerId(), req.GetMasterKey())
	if e := s.ctxEnded(ctx, err); e != nil {
		return nil, e
	}
	resp.Code, resp.Message = s.codeMsg("fence", req.GetLedgerId(), err)
	if err == nil {
		resp.Lac = lac
	}
	return resp, nil
}

// fence fences the ledger for a request with context ctx; Shutdown
// interrupts it with errClosing.
func (s *Server) fence(ctx context.Context, ledger int64, key []byte) (int64, error) {
	fctx, done := s.withBase(ctx, 0)
	defer done()
	lac, err := s.st.Fence(fctx, ledger, key)
	if err != nil && isCtxErr(err) && ctx.Err() == nil && s.isClosed() {
		err = errClosing
	}
	return lac, err
}

// ReadLAC implements bookiepb.BookieServer.
func (s *Server) ReadLAC(ctx context.Context, req *bookiepb.ReadLACRequest) (*bookiepb.ReadLACResponse, error) {
	resp := &bookiepb.ReadLACResponse{Lac: storage.NoEntry}
	if err := s.checkFor(validateReadLAC(req), req.GetInstance()); err != nil {
		resp.Code, resp.Message = s.codeMsg("read_lac", req.GetLedgerId(), err)
		return resp, nil
	}
	var lac int64
	var err error
	if req.GetTimeoutMs() == 0 {
		lac, err = s.st.LAC(req.GetLedgerId())
	} else {
		timeout := min(time.Duration(req.GetTimeoutMs())*time.Millisecond, s.cfg.MaxLongPoll)
		wctx, done := s.withBase(ctx, timeout)
		lac, err = s.st.WaitLAC(wctx, req.GetLedgerId(), req.GetWaitAfter())
		done()
		if err != nil && isCtxErr(err) {
			if e := s.ctxEnded(ctx, err); e != nil {
				return nil, e
			}
			if s.isClosed() {
				err = errClosing
			} else {
				err = nil // timed out: answer with the current LAC
			}
		}
	}
	resp.Code, resp.Message = s.codeMsg("read_lac", req.GetLedgerId(), err)
	if err == nil {
		resp.Lac = lac
	}
	return resp, nil
}

// ctxEnded returns a gRPC status error when err comes from the caller's
// own context having ended (the caller is gone or gave up): there is
// nobody to answer.
func (s *Server) ctxEnded(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && isCtxErr(err) {
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Info implements bookiepb.BookieServer.
func (s *Server) Info(_ context.Context, req *bookiepb.InfoRequest) (*bookiepb.InfoResponse, error) {
	if err := s.checkFor(validateInfo(req), req.GetInstance()); err != nil {
		code, msg := s.codeMsg("info", -1, err)
		return &bookiepb.InfoResponse{Code: code, Message: msg}, nil
	}
	info := s.LocalInfo(req.GetListLedgers())
	more := false
	if req.GetListLedgers() {
		info.Ledgers, more = ledgerPage(info.Ledgers, req.GetLedgersFrom())
	}
	resp := info.proto()
	resp.MoreLedgers = more
	return resp, nil
}

// infoPageLedgers is the most ledgers one Info answer lists: a LedgerInfo
// takes at most ~64 bytes on the wire, so a page stays well inside
// MaxMessageSize (8 MiB).
const infoPageLedgers = 65536

// ledgerPage returns the ledgers of ls (sorted by id) with id >= from, at
// most infoPageLedgers of them, and whether more follow.
func ledgerPage(ls []storage.LedgerInfo, from int64) ([]storage.LedgerInfo, bool) {
	i, _ := slices.BinarySearchFunc(ls, from, func(l storage.LedgerInfo, id int64) int {
		return cmp.Compare(l.LedgerID, id)
	})
	ls = ls[i:]
	if len(ls) > infoPageLedgers {
		return ls[:infoPageLedgers], true
	}
	return ls, false
}

// LocalInfo is what Info answers, without the network.
func (s *Server) LocalInfo(withLedgers bool) Info {
	u := s.st.Usage()
	ls := s.st.Ledgers()
	info := Info{
		BookieID: s.cfg.BookieID, Instance: s.cfg.Instance, Address: s.cfg.Address,
		ReadOnly:  u.ReadOnly,
		UsedBytes: u.UsedBytes, FreeBytes: u.FreeBytes, TotalBytes: u.TotalBytes,
		JournalDir: u.JournalDir, JournalFreeBytes: u.JournalFreeBytes, JournalTotalBytes: u.JournalTotalBytes,
		NumLedgers: len(ls),
	}
	if withLedgers {
		info.Ledgers = ls
	}
	return info
}

// Info describes a bookie (the Info RPC, or Bookie.Info locally).
type Info struct {
	BookieID   string
	Instance   string
	Address    string
	ReadOnly   bool
	UsedBytes  int64
	FreeBytes  int64
	TotalBytes int64
	// The configured journal directory and its file system's free and
	// total bytes (storage.Usage). Local only: LocalInfo sets them, the
	// Info RPC does not carry them.
	JournalDir        string
	JournalFreeBytes  int64
	JournalTotalBytes int64
	NumLedgers        int
	// Ledgers is set only when asked for, sorted by id.
	Ledgers []storage.LedgerInfo
}

func (i Info) proto() *bookiepb.InfoResponse {
	r := &bookiepb.InfoResponse{
		Code:     bookiepb.Code_CODE_OK,
		BookieId: i.BookieID, Instance: i.Instance, Address: i.Address,
		ReadOnly:      i.ReadOnly,
		DiskUsedBytes: i.UsedBytes, DiskFreeBytes: i.FreeBytes, DiskTotalBytes: i.TotalBytes,
		NumLedgers: int64(i.NumLedgers),
	}
	for _, l := range i.Ledgers {
		r.Ledgers = append(r.Ledgers, &bookiepb.LedgerInfo{
			LedgerId: l.LedgerID, Lac: l.LAC, LastEntryId: l.LastEntry,
			Entries: l.Entries, Bytes: l.Bytes, Fenced: l.Fenced,
		})
	}
	return r
}

func infoFromProto(r *bookiepb.InfoResponse) Info {
	i := Info{
		BookieID: r.GetBookieId(), Instance: r.GetInstance(), Address: r.GetAddress(),
		ReadOnly:  r.GetReadOnly(),
		UsedBytes: r.GetDiskUsedBytes(), FreeBytes: r.GetDiskFreeBytes(), TotalBytes: r.GetDiskTotalBytes(),
		NumLedgers: int(r.GetNumLedgers()),
	}
	for _, l := range r.GetLedgers() {
		i.Ledgers = append(i.Ledgers, storage.LedgerInfo{
			LedgerID: l.GetLedgerId(), LAC: l.GetLac(), LastEntry: l.GetLastEntryId(),
			Entries: l.GetEntries(), Bytes: l.GetBytes(), Fenced: l.GetFenced(),
		})
	}
	return i
}

// errUnavailable ends Add streams when the server closes.
var errUnavailable = status.Error(codes.Unavailable, "bookie: server closed")
