package bookie

import (
	"context"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// entryEnvelope is what a range read counts for each entry on top of its
// payload: the Entry message's framing (up to 3 bytes), ledger and entry
// ids and LAC (up to 10 bytes each as varints; a LAC of -1 takes 10), the
// payload's tag and length (up to 4) and a margin. Counting less let a
// range of entries with large ids overflow MaxMessageSize.
const entryEnvelope = 48

// Read implements bookiepb.BookieServer.
func (s *Server) Read(ctx context.Context, req *bookiepb.ReadRequest) (*bookiepb.ReadResponse, error) {
	resp := &bookiepb.ReadResponse{Lac: storage.NoEntry}
	ledger := req.GetLedgerId()
	if err := s.checkFor(validateRead(req), req.GetInstance()); err != nil {
		resp.Code, resp.Message = s.codeMsg("read", ledger, err)
		return resp, nil
	}
	fenceLAC := storage.NoEntry
	if req.GetFence() {
		lac, err := s.fence(ctx, ledger, req.GetMasterKey())
		if e := s.ctxEnded(ctx, err); e != nil {
			return nil, e
		}
		if err != nil {
			resp.Code, resp.Message = s.codeMsg("fence_read", ledger, err)
			return resp, nil
		}
		fenceLAC = lac
	}
	entries, err := s.readEntries(req)
	resp.Code, resp.Message = s.codeMsg("read", ledger, err)
	if err == nil {
		resp.Entries = make([]*bookiepb.Entry, len(entries))
		for i, e := range entries {
			resp.Entries[i] = &bookiepb.Entry{LedgerId: e.LedgerID, EntryId: e.EntryID, Lac: e.LAC, Payload: e.Payload}
		}
	}
	switch {
	case req.GetFence():
		resp.Lac = fenceLAC
	case err == nil || resp.Code == bookiepb.Code_CODE_NO_ENTRY:
		if lac, lerr := s.st.LAC(ledger); lerr == nil {
			resp.Lac = lac
		}
	}
	return resp, nil
}

// readEntries reads the request's entries: at least the first one, or an
// error (a missing first entry is storage.ErrNoEntry).
func (s *Server) readEntries(req *bookiepb.ReadRequest) ([]storage.Entry, error) {
	ledger, first, last := req.GetLedgerId(), req.GetFirstEntryId(), req.GetLastEntryId()
	if first == last {
		e, err := s.st.Read(ledger, first)
		if err != nil {
			return nil, err
		}
		return []storage.Entry{e}, nil
	}
	limit := int64(s.cfg.MaxReadBytes)
	if m := req.GetMaxBytes(); m > 0 && m < limit {
		limit = m
	}
	// No more than limit/entryEnvelope entries can fit.
	if n := limit / entryEnvelope; last-first > n {
		last = first + n
	}
	es, err := s.st.ReadRange(ledger, first, last, int(limit))
	if err != nil && len(es) == 0 {
		return nil, err
	}
	// An error past the first entry (a damaged later entry, an I/O
	// error) ends the range there: the entries before it are answered,
	// and a read starting at the failed one reports it.
	es = trimRange(es, ledger, first, limit)
	if len(es) == 0 {
		// The first entry is missing, or alone larger than the limit:
		// Read tells which, and a read always returns its first entry.
		e, err := s.st.Read(ledger, first)
		if err != nil {
			return nil, err
		}
		es = []storage.Entry{e}
	}
	return es, nil
}

// trimRange keeps the leading run of es that is exactly ledger's entries
// first, first+1, ... and fits in limit bytes (payload plus envelope), so
// that what goes on the wire is well-formed whatever the engine returned.
func trimRange(es []storage.Entry, ledger, first int64, limit int64) []storage.Entry {
	var size int64
	for i, e := range es {
		size += int64(len(e.Payload)) + entryEnvelope
		if e.LedgerID != ledger || e.EntryID != first+int64(i) || size > limit {
			return es[:i]
		}
	}
	return es
}
