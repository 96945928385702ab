package replicator

import (
	"encoding/json"
	"errors"
	"testing"
)

func batchOf(id uint64, s Stream, first, last uint64) *Batch {
	b := &Batch{ID: id, Stream: s, First: first, Last: last}
	for seq := first; seq <= last; seq++ {
		b.Msgs = append(b.Msgs, Msg{Origin: Origin{Region: s.Region, Incarnation: s.Incarnation, Seq: seq}})
	}
	return b
}

func TestReceiverBatches(t *testing.T) {
	r, err := NewReceiver(ReceiverState{})
	if err != nil {
		t.Fatal(err)
	}
	us2 := Stream{Topic: testTopic, Region: "us", Incarnation: "us.2"}
	for _, tc := range []struct {
		b         *Batch
		kind      AnswerKind
		hwm       uint64
		stored    int
		lost      uint64
		streamHWM uint64
	}{
		{batchOf(1, usStream, 1, 3), Stored, 3, 3, 0, 3},
		{batchOf(2, usStream, 5, 6), GapRefused, 3, 0, 0, 3},
		{batchOf(3, usStream, 2, 5), Stored, 5, 2, 0, 5},
		{batchOf(4, usStream, 1, 5), Duplicate, 5, 0, 0, 5},
		{&Batch{ID: 5, Stream: usStream, Gap: true, First: 8, Last: 9}, GapRefused, 5, 0, 0, 5},
		{&Batch{ID: 6, Stream: usStream, Gap: true, First: 4, Last: 9}, Stored, 9, 0, 4, 9},
		{&Batch{ID: 7, Stream: usStream, Gap: true, First: 4, Last: 9}, Duplicate, 9, 0, 0, 9},
		{batchOf(8, us2, 1, 2), Stored, 2, 2, 0, 2}, // a new incarnation starts fresh
	} {
		res, err := r.Receive(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if res.Answer != (Answer{Batch: tc.b.ID, Kind: tc.kind, HWM: tc.hwm}) || len(res.Store) != tc.stored || res.Lost != tc.lost || r.HWM(tc.b.Stream) != tc.streamHWM {
			t.Errorf("%s: %+v, hwm %d", tc.b, res, r.HWM(tc.b.Stream))
		}
		if tc.stored > 0 && res.Store[tc.stored-1].Origin.Seq != tc.b.Last {
			t.Errorf("%s: stores %v", tc.b, res.Store)
		}
	}
	if r.Lost(usStream) != 4 || r.HWM(usStream) != 9 {
		t.Errorf("us.1: hwm %d lost %d", r.HWM(usStream), r.Lost(usStream))
	}
	b, err := json.Marshal(r.State())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"streams":[` +
		`{"topic":{"tenant":"acme","namespace":"orders","topic":"events"},"region":"us","incarnation":"us.1","hwm":9,"lost":4,"gap_records":1},` +
		`{"topic":{"tenant":"acme","namespace":"orders","topic":"events"},"region":"us","incarnation":"us.2","hwm":2}]}`
	if string(b) != want {
		t.Errorf("state\n%s\nwant\n%s", b, want)
	}
	gen := r.Gen()
	r.Forget(us2)
	if r.HWM(us2) != 0 || r.Gen() == gen {
		t.Errorf("forget: hwm %d gen %d", r.HWM(us2), r.Gen())
	}
}

func TestReceiverInvalid(t *testing.T) {
	r, _ := NewReceiver(ReceiverState{})
	bad := []*Batch{
		{ID: 1, Stream: usStream, First: 0, Last: 0},
		{ID: 2, Stream: usStream, First: 3, Last: 2},
		{ID: 3, Stream: usStream, Gap: true, First: 1, Last: 1, Msgs: []Msg{{}}},
		{ID: 4, Stream: usStream, First: 1, Last: 2, Msgs: batchOf(0, usStream, 1, 1).Msgs},
		{ID: 5, Stream: Stream{Topic: testTopic, Region: "us"}, Gap: true, First: 1, Last: 1},
	}
	b6 := batchOf(6, usStream, 1, 2)
	b6.Msgs[1].Origin.Incarnation = "us.0"
	bad = append(bad, b6)
	for _, b := range bad {
		res, err := r.Receive(b)
		if !errors.Is(err, ErrInvalid) || res.Answer.Kind != Failed || len(res.Store) != 0 {
			t.Errorf("%s: %+v, %v", b, res, err)
		}
	}
	if r.Gen() != 0 {
		t.Errorf("an invalid batch changed the receiver")
	}
	for _, st := range []ReceiverState{
		{Streams: []StreamState{{Stream: usStream, HWM: 1}, {Stream: usStream, HWM: 2}}},
		{Streams: []StreamState{{Stream: Stream{Topic: testTopic, Region: "us"}}}},
		{Streams: []StreamState{{Stream: usStream, HWM: 1, Lost: 2}}},
	} {
		if _, err := NewReceiver(st); !errors.Is(err, ErrBadState) {
			t.Errorf("%+v: err = %v", st, err)
		}
	}
}
