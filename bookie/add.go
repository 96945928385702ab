package bookie

import (
	"io"
	"sync/atomic"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// addStream is one Add stream on the server. Two goroutines serve it:
//
//   - the receiver (owned by the Server) reads requests, takes an in-flight
//     slot for each, and hands it to Storage.Add (or answers it at once when
//     it is invalid or for another instance);
//   - the sender (the gRPC handler goroutine) is the only one that calls
//     stream.Send: it sends responses in the order they complete and frees
//     a slot per response sent.
//
// Storage.Add's callback only queues the response: the queue has one place
// per slot, so the callback never blocks. When every slot is taken the
// receiver stops reading; gRPC flow control then holds the client back.
// A client that never reads its responses thus stalls its own stream (the
// sender blocks in Send, slots stay taken, the receiver stops reading) and
// nothing else: memory stays bounded by MaxAddsInFlight.
type addStream struct {
	srv       *Server
	stream    bookiepb.Bookie_AddServer
	responses chan *bookiepb.AddResponse // capacity == cap(slots)
	slots     chan struct{}              // one element per add in flight
	recvDone  chan struct{}              // closed when the receiver stops
	recvErr   error                      // why it stopped (nil: client half-closed); read after recvDone
}

// Add implements bookiepb.BookieServer.
func (s *Server) Add(stream bookiepb.Bookie_AddServer) error {
	n := s.cfg.MaxAddsInFlight
	as := &addStream{
		srv: s, stream: stream,
		responses: make(chan *bookiepb.AddResponse, n),
		slots:     make(chan struct{}, n),
		recvDone:  make(chan struct{}),
	}
	if s.isClosed() || !s.goStream(as.receive) {
		return errUnavailable
	}
	return as.send()
}

// send is the stream's single sender. It returns nil once the client has
// half-closed and every add received has been answered.
func (as *addStream) send() error {
	ctx := as.stream.Context()
	recvDone := as.recvDone
	for {
		if recvDone == nil && len(as.slots) == 0 {
			return nil
		}
		select {
		case resp := <-as.responses:
			if err := as.stream.Send(resp); err != nil {
				return err
			}
			select {
			case <-as.slots:
			default: // a response without a slot: see complete
			}
		case <-recvDone:
			if as.recvErr != nil {
				return as.recvErr
			}
			recvDone = nil
		case <-ctx.Done():
			return ctx.Err()
		case <-as.srv.base.Done():
			return errUnavailable
		}
	}
}

// receive reads requests until the client half-closes, the stream ends, or
// the server closes.
func (as *addStream) receive() {
	defer close(as.recvDone)
	ctx := as.stream.Context()
	for {
		req, err := as.stream.Recv()
		if err != nil {
			if err != io.EOF {
				as.recvErr = err
			}
			return
		}
		select {
		case as.slots <- struct{}{}:
		case <-ctx.Done():
			as.recvErr = ctx.Err()
			return
		case <-as.srv.base.Done():
			as.recvErr = errUnavailable
			return
		}
		as.srv.add(req, as.complete)
	}
}

// complete queues a response for the sender. It never blocks: the queue
// has room for every slot, and a slot is taken per request. A second
// response for one request (an engine calling done twice) is dropped by
// add's once-guard before it gets here.
func (as *addStream) complete(resp *bookiepb.AddResponse) {
	select {
	case as.responses <- resp:
	default:
		as.srv.log.Error("add response queue full; dropping response", "ledger", resp.GetLedgerId(), "entry", resp.GetEntryId())
	}
}

// add validates one add and passes it to the engine; respond is called
// exactly once with its response.
func (s *Server) add(req *bookiepb.AddRequest, respond func(*bookiepb.AddResponse)) {
	resp := &bookiepb.AddResponse{Tag: req.GetTag(), LedgerId: req.GetLedgerId(), EntryId: req.GetEntryId()}
	if err := s.checkFor(validateAdd(req, s.cfg.MaxEntrySize), req.GetInstance()); err != nil {
		resp.Code, resp.Message = s.codeMsg("add", req.GetLedgerId(), err)
		respond(resp)
		return
	}
	var once atomic.Bool
	s.st.Add(storage.AddRequest{
		LedgerID: req.GetLedgerId(), EntryID: req.GetEntryId(), LAC: req.GetLac(),
		MasterKey: req.GetMasterKey(), Payload: req.GetPayload(), Recovery: req.GetRecovery(),
	}, func(err error) {
		if !once.CompareAndSwap(false, true) {
			s.log.Error("storage completed an add twice", "ledger", resp.LedgerId, "entry", resp.EntryId, "err", err)
			return
		}
		resp.Code, resp.Message = s.codeMsg("add", resp.LedgerId, err)
		respond(resp)
	})
}
