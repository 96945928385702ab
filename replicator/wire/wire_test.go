package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

var topic = tenancy.Name{Tenant: "demo", Namespace: "events", Topic: "orders"}

func sampleBatch() replicator.Batch {
	s := replicator.Stream{Topic: topic, Region: "us-east", Incarnation: "0b5e2c1a-1111-4222-8333-944445555666"}
	t0 := time.Date(2026, 11, 30, 1, 2, 3, 4, time.UTC)
	b := replicator.Batch{ID: 7, Stream: s, First: 4, Last: 5}
	for i := range 2 {
		b.Msgs = append(b.Msgs, replicator.Msg{
			Origin:  replicator.Origin{Region: s.Region, Incarnation: s.Incarnation, Seq: 4 + uint64(i), Time: t0.Add(time.Duration(i) * time.Millisecond)},
			Subject: "demo.events.orders", Header: []byte("NATS/1.0\r\nK: v\r\n\r\n"), Data: []byte{byte(i), 'x'},
		})
	}
	return b
}

func TestBatchRoundTrip(t *testing.T) {
	def := []byte(`{"stream":"events:orders"}`)
	for _, b := range []replicator.Batch{sampleBatch(), {ID: 9, Stream: sampleBatch().Stream, Gap: true, First: 1, Last: 3}} {
		p := AppendBatch(nil, &b, def)
		if len(p) > BatchSize(&b, len(def)) {
			t.Errorf("%s: encoded %d bytes > BatchSize %d", &b, len(p), BatchSize(&b, len(def)))
		}
		got, gotDef, err := DecodeBatch(topic, p)
		if err != nil {
			t.Fatalf("%s: %v", &b, err)
		}
		if !bytes.Equal(gotDef, def) || got.ID != b.ID || got.Gap != b.Gap || got.First != b.First || got.Last != b.Last || got.Stream != b.Stream {
			t.Fatalf("%s: decoded %+v def %q", &b, got, gotDef)
		}
		for i := range b.Msgs {
			w, g := b.Msgs[i], got.Msgs[i]
			if g.Subject != w.Subject || !bytes.Equal(g.Header, w.Header) || !bytes.Equal(g.Data, w.Data) || g.Origin != w.Origin {
				t.Errorf("message %d: got %+v want %+v", i, g, w)
			}
		}
	}
}

func TestDecodeBatchMalformed(t *testing.T) {
	good := sampleBatch()
	p := AppendBatch(nil, &good, []byte("{}"))
	mut := func(f func([]byte) []byte) []byte { return f(bytes.Clone(p)) }
	cases := map[string][]byte{
		"empty":         nil,
		"version":       mut(func(b []byte) []byte { b[0] = 9; return b }),
		"kind":          mut(func(b []byte) []byte { b[1] = 3; return b }),
		"truncated":     p[:len(p)-1],
		"trailing":      append(bytes.Clone(p), 0),
		"only header":   p[:3],
		"huge count":    AppendBatch(nil, &replicator.Batch{ID: 1, Stream: good.Stream, First: 1, Last: 1 << 40}, nil),
		"zero first":    AppendBatch(nil, &replicator.Batch{ID: 1, Stream: good.Stream, Gap: true, First: 0, Last: 2}, nil),
		"inverted":      AppendBatch(nil, &replicator.Batch{ID: 1, Stream: good.Stream, Gap: true, First: 5, Last: 2}, nil),
		"empty region":  AppendBatch(nil, &replicator.Batch{ID: 1, Stream: replicator.Stream{Topic: topic, Incarnation: "x"}, Gap: true, First: 1, Last: 2}, nil),
		"long length":   {Version, kindGap, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad uvarint":   {Version, kindGap, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"fewer msgs":    mut(func(b []byte) []byte { return b[:len(b)-9] }),
		"gap with data": append(AppendBatch(nil, &replicator.Batch{ID: 1, Stream: good.Stream, Gap: true, First: 1, Last: 1}, nil), 1, 2, 3, 4),
	}
	for name, in := range cases {
		_, _, err := DecodeBatch(topic, in)
		if !errors.Is(err, replicator.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

func TestSubject(t *testing.T) {
	s := Subject(topic)
	if s != "$STRATA.REPL.demo.events.orders" {
		t.Fatalf("Subject = %q", s)
	}
	got, err := ParseSubject(s)
	if err != nil || got != topic {
		t.Fatalf("ParseSubject(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"", "$STRATA.REPL.", "$STRATA.REPL.a.b", "$STRATA.REPL.a.b.c.d", "$STRATA.REPL.a..c", "$STRATA.REPL.a.b.c*", "demo.events.orders", "$STRATA.REPL.a.b.>"} {
		if _, err := ParseSubject(bad); !errors.Is(err, replicator.ErrInvalid) {
			t.Errorf("ParseSubject(%q): err %v, want ErrInvalid", bad, err)
		}
	}
}

func TestAnswer(t *testing.T) {
	for _, a := range []Answer{
		{Answer: replicator.Answer{Batch: 3, Kind: replicator.Stored, HWM: 10}},
		{Answer: replicator.Answer{Batch: 4, Kind: replicator.Duplicate, HWM: 10}},
		{Answer: replicator.Answer{Batch: 5, Kind: replicator.GapRefused, HWM: 2}},
		{Answer: replicator.Answer{Batch: 6, Kind: replicator.Failed}, Error: "store failed"},
		{Answer: replicator.Answer{Batch: 7, Kind: replicator.Stored, HWM: 9}, Lost: 4},
	} {
		got, err := DecodeAnswer(EncodeAnswer(a))
		if err != nil || !reflect.DeepEqual(got, a) {
			t.Errorf("round trip %+v: got %+v, %v", a, got, err)
		}
	}
	for _, bad := range []string{"", "{", "[]", `{"batch":1,"kind":"ok"}`, `{"batch":-1,"kind":"stored"}`, `{"batch":1}`} {
		if _, err := DecodeAnswer([]byte(bad)); !errors.Is(err, replicator.ErrInvalid) {
			t.Errorf("DecodeAnswer(%q): err %v, want ErrInvalid", bad, err)
		}
	}
}

// FuzzDecodeBatch: any input decodes or fails with ErrInvalid, never
// panics; what decodes re-encodes to the same bytes.
func FuzzDecodeBatch(f *testing.F) {
	b := sampleBatch()
	f.Add(AppendBatch(nil, &b, []byte("{}")))
	g := replicator.Batch{ID: 2, Stream: b.Stream, Gap: true, First: 1, Last: 3}
	f.Add(AppendBatch(nil, &g, nil))
	f.Add([]byte{Version, kindMsgs})
	f.Fuzz(func(t *testing.T, p []byte) {
		got, def, err := DecodeBatch(topic, p)
		if err != nil {
			if !errors.Is(err, replicator.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if again := AppendBatch(nil, &got, def); !bytes.Equal(again, p) {
			// Varints have one shortest form; a longer one decodes too.
			if _, _, err := DecodeBatch(topic, again); err != nil {
				t.Fatalf("re-encoding does not decode: %v", err)
			}
		}
	})
}

// FuzzDecodeAnswer: any input decodes or fails with ErrInvalid.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte(`{"batch":1,"kind":"stored","hwm":3}`))
	f.Add([]byte(`{"batch":1,"kind":"failed","error":"x"}`))
	f.Add([]byte(`{"batch":1,"kind":"duplicate","hwm":3,"marks":[{"holder":"c","region":"b","incarnation":"i","hwm":9}]}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		a, err := DecodeAnswer(p)
		if err != nil {
			if !errors.Is(err, replicator.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if b, err := DecodeAnswer(EncodeAnswer(a)); err != nil || !reflect.DeepEqual(b, a) {
			t.Fatalf("round trip %+v: %+v, %v", a, b, err)
		}
	})
}

// TestAnswerMarks: marks round-trip; malformed ones are refused naming
// what is wrong.
func TestAnswerMarks(t *testing.T) {
	in := Answer{Answer: replicator.Answer{Batch: 4, Kind: replicator.Duplicate, HWM: 7},
		Marks: []Mark{{Holder: "c", Region: "b", Incarnation: "ib", HWM: 9}, {Holder: "a", Region: "b", Incarnation: "ib", HWM: 7}}}
	got, err := DecodeAnswer(EncodeAnswer(in))
	if err != nil || !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, tc := range map[string]struct{ p, want string }{
		"no holder":      {`{"batch":1,"kind":"stored","marks":[{"region":"b","incarnation":"i","hwm":1}]}`, "mark 0 has an empty holder"},
		"no incarnation": {`{"batch":1,"kind":"stored","marks":[{"holder":"c","region":"b","incarnation":"i"},{"holder":"c","region":"b"}]}`, "mark 1"},
		"not a list":     {`{"batch":1,"kind":"stored","marks":{}}`, "answer"},
		"negative hwm":   {`{"batch":1,"kind":"stored","marks":[{"holder":"c","region":"b","incarnation":"i","hwm":-1}]}`, "answer"},
		"too many":       {`{"batch":1,"kind":"stored","marks":[` + strings.Repeat(`{"holder":"c","region":"b","incarnation":"i"},`, MaxMarks) + `{"holder":"c","region":"b","incarnation":"i"}]}`, "4097 marks"},
	} {
		_, err := DecodeAnswer([]byte(tc.p))
		if !errors.Is(err, replicator.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", name, err, tc.want)
		}
	}
}

func TestSubSync(t *testing.T) {
	set := replicator.NewSubSet()
	if _, err := set.AckRange(replicator.OriginStream{Region: "us-east", Incarnation: "inc"}, 1, 10); err != nil {
		t.Fatal(err)
	}
	bin, err := set.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	in := &SubSync{Origin: "us-east", Consumer: "billing", Config: []byte(`{"durable_name":"billing"}`), Set: bin}
	got, gotSet, err := DecodeSubSync(EncodeSubSync(in))
	if err != nil || got.Consumer != "billing" || got.Origin != "us-east" || !gotSet.Equal(set) {
		t.Fatalf("round trip: %+v %v %v", got, gotSet, err)
	}
	if s, err := ParseSubSyncSubject(SubSyncSubject(topic)); err != nil || s != topic {
		t.Fatalf("subject round trip: %v %v", s, err)
	}
	for name, p := range map[string]string{
		"empty":       ``,
		"not json":    `{`,
		"no consumer": `{"origin":"a","config":{},"set":"AQ=="}`,
		"bad name":    `{"origin":"a","consumer":"a.b","config":{},"set":"AQ=="}`,
		"no config":   `{"origin":"a","consumer":"c","set":"AQ=="}`,
		"bad set":     `{"origin":"a","consumer":"c","config":{},"set":"/w=="}`,
	} {
		if _, _, err := DecodeSubSync([]byte(p)); !errors.Is(err, replicator.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
}

// FuzzDecodeSubSync: any input decodes or fails with ErrInvalid.
func FuzzDecodeSubSync(f *testing.F) {
	f.Add([]byte(`{"origin":"a","consumer":"c","config":{},"set":"AQ=="}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		if _, _, err := DecodeSubSync(p); err != nil && !errors.Is(err, replicator.ErrInvalid) {
			t.Fatalf("error %v does not wrap ErrInvalid", err)
		}
	})
}

func TestTombstone(t *testing.T) {
	in := &Tombstone{Kind: TombDelete, Origin: "r1", Streams: []string{"r1/a", "r2/b"}, At: time.Unix(5, 0).UTC()}
	got, err := DecodeTombstone(EncodeTombstone(in))
	if err != nil || got.Kind != in.Kind || got.Origin != "r1" || len(got.Streams) != 2 || !got.At.Equal(in.At) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if s, err := ParseTombstoneSubject(TombstoneSubject(topic)); err != nil || s != topic {
		t.Fatalf("subject: %v %v", s, err)
	}
	up := &Tombstone{Kind: TombUpdate, Origin: "r1", Definition: []byte(`{"stream":"S"}`)}
	if got, err := DecodeTombstone(EncodeTombstone(up)); err != nil || string(got.Definition) != `{"stream":"S"}` {
		t.Fatalf("update round trip: %+v %v", got, err)
	}
	for _, bad := range []string{``, `{`, `{"kind":"drop","origin":"r1"}`, `{"kind":"purge","origin":"a.b"}`, `{"kind":"delete","origin":"r1","streams":["x"]}`,
		`{"kind":"create","origin":"r1"}`, `{"kind":"update","origin":"r1","definition":[1]}`} {
		if _, err := DecodeTombstone([]byte(bad)); !errors.Is(err, replicator.ErrInvalid) {
			t.Errorf("DecodeTombstone(%q): %v", bad, err)
		}
	}
}

// FuzzDecodeTombstone: any input decodes or fails with ErrInvalid.
func FuzzDecodeTombstone(f *testing.F) {
	f.Add([]byte(`{"kind":"delete","origin":"r1","streams":["r1/a"]}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		if _, err := DecodeTombstone(p); err != nil && !errors.Is(err, replicator.ErrInvalid) {
			t.Fatalf("error %v does not wrap ErrInvalid", err)
		}
	})
}
