package jsapi_test

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/broker/jsapi"
)

// natsMeta runs nats.go's own ack-subject parser (what jetstream Msg
// Metadata and Fetch use) on a reply subject.
func natsMeta(reply string) (*nats.MsgMetadata, error) {
	m := &nats.Msg{Subject: "ord.a", Reply: reply, Sub: &nats.Subscription{}}
	return m.Metadata()
}

func TestAckSubjectSpecExample(t *testing.T) {
	// spec §2.5, byte-exact delivery [seen].
	m := jsapi.AckMeta{Stream: "ORDERS", Consumer: "proc", Delivered: 1, StreamSeq: 2, ConsumerSeq: 2,
		Timestamp: 1795964982613972397, Pending: 4}
	const want = "$JS.ACK.ORDERS.proc.1.2.2.1795964982613972397.4"
	if got := jsapi.FormatAckSubject(m); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	back, err := jsapi.ParseAckSubject(want)
	if err != nil || back != m {
		t.Fatalf("parse: %+v %v", back, err)
	}
}

func TestAckSubjectNatsGo(t *testing.T) {
	for _, m := range []jsapi.AckMeta{
		{Stream: "ORDERS", Consumer: "proc", Delivered: 1, StreamSeq: 1, ConsumerSeq: 1, Timestamp: 1795964982511656326, Pending: 5},
		{Stream: "ns:topic", Consumer: "c-1", Delivered: 3, StreamSeq: math.MaxUint64, ConsumerSeq: 7, Timestamp: math.MaxInt64, Pending: 0},
		{AccountHash: "hash-123", Stream: "S", Consumer: "c", Delivered: 2, StreamSeq: 9, ConsumerSeq: 10, Timestamp: 5, Pending: 1, Token: "rnd"},
		{Domain: "hub", AccountHash: "h", Stream: "S", Consumer: "c", Delivered: 1, StreamSeq: 1, ConsumerSeq: 1},
	} {
		s := jsapi.FormatAckSubject(m)
		meta, err := natsMeta(s)
		if err != nil {
			t.Fatalf("%s: nats.go: %v", s, err)
		}
		if meta.Stream != m.Stream || meta.Consumer != m.Consumer || meta.Domain != m.Domain ||
			meta.NumDelivered != m.Delivered || meta.Sequence.Stream != m.StreamSeq ||
			meta.Sequence.Consumer != m.ConsumerSeq || meta.Timestamp.UnixNano() != m.Timestamp ||
			meta.NumPending != m.Pending {
			t.Errorf("%s: nats.go read %+v", s, meta)
		}
		back, err := jsapi.ParseAckSubject(s)
		if err != nil || back != m {
			t.Errorf("%s: round trip %+v %v", s, back, err)
		}
	}
	// Negative timestamps are written as 0, never as a '-' nats.go rejects.
	s := jsapi.FormatAckSubject(jsapi.AckMeta{Stream: "S", Consumer: "c", Timestamp: -1})
	if s != "$JS.ACK.S.c.0.0.0.0.0" {
		t.Errorf("negative ts: %s", s)
	}
}

func TestParseAckSubjectErrors(t *testing.T) {
	for _, s := range []string{
		"", "$JS.ACK", "$JS.ACK.", "$JS.API.S.c.1.1.1.1.1",
		"$JS.ACK.S.c.1.1.1.1",           // 8 tokens
		"$JS.ACK.S.c.1.1.1.1.1.x",       // 10 tokens
		"$JS.ACK.d.h.S.c.1.1.1.1.1.t.x", // 13 tokens
		"$JS.ACK.S..1.1.1.1.1",          // empty consumer
		"$JS.ACK.S.c.1.1.1.1.",          // empty pending
		"$JS.ACK.S.c.01.1.1.1.1",        // leading zero
		"$JS.ACK.S.c.-1.1.1.1.1",        // sign
		"$JS.ACK.S.c.1.1.1.1.18446744073709551616",
		"$JS.ACK.S.c.1.1.1.9223372036854775808.1", // ts overflows int64
	} {
		if m, err := jsapi.ParseAckSubject(s); !errors.Is(err, jsapi.ErrBadAckSubject) {
			t.Errorf("%q: %+v %v", s, m, err)
		}
	}
}

func TestParseAck(t *testing.T) {
	for _, tc := range []struct {
		body string
		want jsapi.Ack
	}{
		{"", jsapi.Ack{Kind: jsapi.AckAck}},
		{"+ACK", jsapi.Ack{Kind: jsapi.AckAck}},
		{"+OK", jsapi.Ack{Kind: jsapi.AckAck}},
		{"-NAK", jsapi.Ack{Kind: jsapi.AckNak}},
		// nats.go NakWithDelay sends `-NAK {"delay": <ns>}`.
		{`-NAK {"delay": 5000000000}`, jsapi.Ack{Kind: jsapi.AckNak, Delay: 5 * time.Second}},
		{"-NAK 1.5s", jsapi.Ack{Kind: jsapi.AckNak, Delay: 1500 * time.Millisecond}},
		{"-NAK bogus", jsapi.Ack{Kind: jsapi.AckNak}},
		{`-NAK {"delay":-5}`, jsapi.Ack{Kind: jsapi.AckNak}},
		{"+WPI", jsapi.Ack{Kind: jsapi.AckProgress}},
		{"+WPI x", jsapi.Ack{Kind: jsapi.AckUnknown}},
		{"+TERM", jsapi.Ack{Kind: jsapi.AckTerm}},
		{"+TERM  poison message ", jsapi.Ack{Kind: jsapi.AckTerm, Reason: "poison message"}},
		{"+NXT", jsapi.Ack{Kind: jsapi.AckNext, Next: []byte{}}},
		{`+NXT {"batch":10}`, jsapi.Ack{Kind: jsapi.AckNext, Next: []byte(`{"batch":10}`)}},
		{"+ACKx", jsapi.Ack{Kind: jsapi.AckUnknown}},
		{"hello", jsapi.Ack{Kind: jsapi.AckUnknown}},
	} {
		got := jsapi.ParseAck([]byte(tc.body))
		if got.Kind != tc.want.Kind || got.Delay != tc.want.Delay || got.Reason != tc.want.Reason ||
			!bytes.Equal(got.Next, tc.want.Next) {
			t.Errorf("%q: got %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

func TestAckBodyRoundTrip(t *testing.T) {
	for _, a := range []jsapi.Ack{
		{Kind: jsapi.AckAck}, {Kind: jsapi.AckNak}, {Kind: jsapi.AckNak, Delay: time.Minute},
		{Kind: jsapi.AckProgress}, {Kind: jsapi.AckTerm}, {Kind: jsapi.AckTerm, Reason: "bad"},
		{Kind: jsapi.AckNext, Next: []byte("5")},
	} {
		b := jsapi.AppendAckBody(nil, a)
		got := jsapi.ParseAck(b)
		if got.Kind != a.Kind || got.Delay != a.Delay || got.Reason != a.Reason || !bytes.Equal(got.Next, a.Next) {
			t.Errorf("%+v → %q → %+v", a, b, got)
		}
	}
}

// FuzzParseAckSubject: never panics; whatever it accepts formats back to
// the same subject and reads the same through nats.go's parser.
func FuzzParseAckSubject(f *testing.F) {
	for _, s := range []string{
		"$JS.ACK.ORDERS.proc.1.1.1.1795964982511656326.5",
		"$JS.ACK.domain.hash-123.stream.cons.100.200.150.123456789.100.token",
		"$JS.ACK._.hash-123.stream.cons.100.200.150.123456789.100",
		"$JS.ACK.stream.cons.100", "$JS.ACK.S.c.0.0.0.0.0", "$JS.ACK.S.c.01.0.0.0.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := jsapi.ParseAckSubject(s)
		if err != nil {
			if !errors.Is(err, jsapi.ErrBadAckSubject) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if got := jsapi.FormatAckSubject(m); got != s {
			t.Fatalf("%q: formats back as %q", s, got)
		}
		meta, err := natsMeta(s)
		if err != nil {
			t.Fatalf("%q: nats.go rejects what we accept: %v", s, err)
		}
		if meta.Stream != m.Stream || meta.Consumer != m.Consumer || meta.Domain != m.Domain ||
			meta.NumDelivered != m.Delivered || meta.Sequence.Stream != m.StreamSeq ||
			meta.Sequence.Consumer != m.ConsumerSeq || meta.Timestamp.UnixNano() != m.Timestamp ||
			meta.NumPending != m.Pending {
			t.Fatalf("%q: we read %+v, nats.go %+v", s, m, meta)
		}
	})
}

// FuzzParseAck: never panics; a recognised body re-encodes to one that
// parses the same.
func FuzzParseAck(f *testing.F) {
	for _, s := range []string{"", "+ACK", "-NAK", `-NAK {"delay": 5}`, "-NAK 1s", "+WPI", "+TERM why", "+NXT 5", "+NXT {\"batch\":2}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		a := jsapi.ParseAck(body)
		if a.Kind == jsapi.AckUnknown {
			return
		}
		if a.Delay < 0 {
			t.Fatalf("%q: negative delay", body)
		}
		b := jsapi.AppendAckBody(nil, a)
		got := jsapi.ParseAck(b)
		if got.Kind != a.Kind || got.Delay != a.Delay || got.Reason != a.Reason || !bytes.Equal(got.Next, a.Next) {
			t.Fatalf("%q → %+v → %q → %+v", body, a, b, got)
		}
	})
}
