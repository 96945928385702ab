package core

import (
	"errors"
	"slices"
	"testing"
)

func newTestWriter(t *testing.T) *Writer {
	t.Helper()
	md := validMetadata()
	md.Segments = md.Segments[:1]
	w, err := NewWriter(md)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func drain(w *Writer) Ready {
	rd := w.Ready()
	w.Advance(rd)
	return rd
}

// TestWriterInstances: sends name the instance recorded for the bookie,
// and a replacement's instance goes into the new segment.
func TestWriterInstances(t *testing.T) {
	w := newTestWriter(t)
	if _, err := w.Add(3); err != nil {
		t.Fatal(err)
	}
	rd := drain(w)
	if len(rd.Sends) != 2 || rd.Sends[0].Instance != "u1" || rd.Sends[1].Instance != "u2" {
		t.Fatalf("sends %+v", rd.Sends)
	}
	w.Failed(rd.Sends[1], FailWrongInstance)
	if rd := drain(w); !slices.Equal(rd.Replace, []BookieID{"k2"}) {
		t.Fatalf("Replace %v", rd.Replace)
	}
	if err := w.Replace("k2", "k9", "u9"); err != nil {
		t.Fatal(err)
	}
	rd = drain(w)
	if u := rd.MetadataUpdate; u == nil || !slices.Equal(u.Segments[0].Instances, []string{"u1", "u9", "u3"}) ||
		!slices.Equal(u.Segments[0].Ensemble, []BookieID{"k1", "k9", "k3"}) {
		t.Fatalf("update %+v", rd.MetadataUpdate)
	}
	if err := w.MetadataCommitted(13); err != nil {
		t.Fatal(err)
	}
	rd = drain(w)
	if len(rd.Sends) != 2 || rd.Sends[1].Bookie != "k9" || rd.Sends[1].Instance != "u9" || rd.Sends[1].Epoch != 1 {
		t.Fatalf("re-sends %+v", rd.Sends)
	}
	if md := w.Metadata(); md.Version != 13 || len(md.Segments) != 1 {
		t.Fatalf("metadata %+v", md)
	}
}

func TestWriterMisuseAndEnds(t *testing.T) {
	w := newTestWriter(t)
	if _, err := w.Add(-1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Add(-1): %v", err)
	}
	if err := w.MetadataCommitted(2); !errors.Is(err, ErrNoProposal) {
		t.Errorf("MetadataCommitted without update: %v", err)
	}
	if err := w.MetadataConflict(validMetadata()); !errors.Is(err, ErrNoProposal) {
		t.Errorf("MetadataConflict without update: %v", err)
	}
	if err := w.Replace("k1", "k9", ""); !errors.Is(err, ErrBadReplacement) {
		t.Errorf("Replace without change: %v", err)
	}
	if w.HasReady() {
		t.Errorf("HasReady on an idle writer")
	}

	for _, c := range []struct {
		name string
		end  func(w *Writer)
		want error
	}{
		{"unauthorized", func(w *Writer) { w.Failed(Send{Bookie: "k1"}, FailUnauthorized) }, ErrUnauthorized},
		{"invalid", func(w *Writer) { w.Failed(Send{Bookie: "k1"}, FailInvalid) }, ErrBookieRefused},
		{"stale fenced", func(w *Writer) { w.Failed(Send{Bookie: "k7", Epoch: -5}, FailFenced) }, ErrFenced},
		{"closed by someone", func(w *Writer) { w.proposeAndConflict(t, StateClosed, false) }, ErrLedgerClosed},
		{"changed by someone", func(w *Writer) { w.proposeAndConflict(t, StateOpen, true) }, ErrMetadataConflict},
	} {
		w := newTestWriter(t)
		c.end(w)
		rd := drain(w)
		if !errors.Is(rd.Err, c.want) || !errors.Is(w.Err(), c.want) {
			t.Errorf("%s: Ready.Err %v, Err %v; want %v", c.name, rd.Err, w.Err(), c.want)
		}
		if rd := drain(w); rd.Err != nil || w.HasReady() {
			t.Errorf("%s: error reported twice", c.name)
		}
		if _, err := w.Add(1); !errors.Is(err, c.want) {
			t.Errorf("%s: Add after the end: %v", c.name, err)
		}
		if _, err := w.Close(); !errors.Is(err, c.want) {
			t.Errorf("%s: Close after the end: %v", c.name, err)
		}
	}
}

// proposeAndConflict makes an ensemble change and answers its CAS with a
// conflict: the record in state, changed (another segment list) or not.
func (w *Writer) proposeAndConflict(t *testing.T, state State, changed bool) {
	w.Failed(Send{Bookie: "k3"}, FailTimeout)
	if err := w.Replace("k3", "k4", ""); err != nil {
		t.Fatal(err)
	}
	drain(w)
	cur := w.Metadata()
	cur.State, cur.Version = state, cur.Version+1
	if changed {
		cur.Segments[0].Ensemble[0] = "k8"
	}
	if err := w.MetadataConflict(cur); err != nil {
		t.Fatal(err)
	}
}

// TestWriterReadyIdempotent: Ready changes nothing; Advance takes only
// what the Ready held.
func TestWriterReadyIdempotent(t *testing.T) {
	w := newTestWriter(t)
	w.Add(1)
	rd1, rd2 := w.Ready(), w.Ready()
	if len(rd1.Sends) != 2 || len(rd2.Sends) != 2 {
		t.Fatalf("Ready twice: %d, %d sends", len(rd1.Sends), len(rd2.Sends))
	}
	w.Add(1)
	w.Advance(rd1)
	if rd := drain(w); len(rd.Sends) != 2 || rd.Sends[0].Entry != 1 {
		t.Fatalf("after Advance: %+v", rd.Sends)
	}
}
