package natsproto

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

func TestAppendExact(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nX-Trace: abc\r\n\r\n")
	b := func(s string) []byte { return []byte(s) }
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"msg (spec §1.5)", AppendMsg(nil, b("orders.new"), b("1"), nil, nil, b("hello")),
			"MSG orders.new 1 5\r\nhello\r\n"},
		{"hmsg (spec §1.5)", AppendMsg(nil, b("orders.hdr"), b("2"), nil, hdr, b("with-header")),
			"HMSG orders.hdr 2 26 37\r\nNATS/1.0\r\nX-Trace: abc\r\n\r\nwith-header\r\n"},
		{"msg reply (spec §2.4)", AppendMsg(nil, b("_INBOX.x"), b("3"), nil, nil, b(`{"stream":"ORDERS","seq":1}`)),
			"MSG _INBOX.x 3 27\r\n{\"stream\":\"ORDERS\",\"seq\":1}\r\n"},
		{"msg with reply", AppendMsg(nil, b("a"), b("9"), b("r.1"), nil, nil), "MSG a 9 r.1 0\r\n\r\n"},
		{"no responders (spec §1.8)", AppendMsg(nil, b("_INBOX.tSvuZrujoHluWFQ6fNOuy4.ZcuMFOSe"), b("3"), nil,
			AppendStatusHeader(nil, 503, "", "Nats-Subject", "nobody.home"), []byte{}),
			"HMSG _INBOX.tSvuZrujoHluWFQ6fNOuy4.ZcuMFOSe 3 43 43\r\nNATS/1.0 503\r\nNats-Subject: nobody.home\r\n\r\n\r\n"},
		{"pub", AppendPub(nil, b("a"), nil, nil, b("x")), "PUB a 1\r\nx\r\n"},
		{"pub reply", AppendPub(nil, b("a"), b("r"), nil, nil), "PUB a r 0\r\n\r\n"},
		{"hpub", AppendPub(nil, b("ord.a"), b("_INBOX.I0EDs2Qg"), b("NATS/1.0\r\nNats-Msg-Id: id-2\r\n\r\n"), b("two")),
			"HPUB ord.a _INBOX.I0EDs2Qg 31 34\r\nNATS/1.0\r\nNats-Msg-Id: id-2\r\n\r\ntwo\r\n"},
		{"rmsg", AppendRMsg(nil, b("a.b"), nil, nil, b("hello"), nil), "RMSG a.b - 0 5\r\nhello\r\n"},
		{"rmsg reply queues", AppendRMsg(nil, b("a"), b("_INBOX.abc.1"), hdr, b("x"), [][]byte{b("q1"), b("q2")}),
			"RMSG a +_INBOX.abc.1 26 27 q1 q2\r\nNATS/1.0\r\nX-Trace: abc\r\n\r\nx\r\n"},
		{"rs+", AppendRouteSub(nil, b("a.*"), nil), "RS+ a.*\r\n"},
		{"rs+ queue", AppendRouteSub(nil, b("a.>"), b("workers")), "RS+ a.> workers\r\n"},
		{"rs-", AppendRouteUnsub(nil, b("a"), b("q")), "RS- a q\r\n"},
		{"err", AppendErr(nil, "Maximum Payload Violation"), "-ERR 'Maximum Payload Violation'\r\n"},
		{"appends", AppendErr([]byte("PONG\r\n"), "x"), "PONG\r\n-ERR 'x'\r\n"},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestRoundTripPub(t *testing.T) {
	hdr := AppendStatusHeader(nil, 0, "", "Nats-Msg-Id", "1", "nats-msg-id", "2")
	for _, reply := range [][]byte{nil, []byte("_INBOX.abc.1")} {
		for _, header := range [][]byte{nil, hdr} {
			for _, payload := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("\r\n"), 100)} {
				wire := AppendPub(nil, []byte("orders.new"), reply, header, payload)
				got, err := feed(Config{Headers: true}, wire)
				want := fmtMsg(&Msg{Subject: []byte("orders.new"), Reply: reply, Header: header, Payload: payload})
				if err != nil || len(got) != 1 || got[0] != want {
					t.Fatalf("%q: %q %v, want %q", wire, got, err, want)
				}
			}
		}
	}
}

func TestRoundTripRMsg(t *testing.T) {
	hdr := AppendStatusHeader(nil, 408, "Request Timeout", "Nats-Pending-Messages", "1")
	for _, reply := range [][]byte{nil, []byte("_INBOX.abc.1")} {
		for _, header := range [][]byte{nil, hdr} {
			for _, queues := range [][][]byte{nil, {[]byte("q1")}, {[]byte("q1"), []byte("q.2")}} {
				payload := []byte(fmt.Sprintf("p%d", len(queues)))
				wire := AppendRMsg(nil, []byte("a.b.c"), reply, header, payload, queues)
				got, err := feed(Config{Kind: KindRoute}, wire)
				want := fmtMsg(&Msg{Subject: []byte("a.b.c"), Reply: reply, Header: header, Payload: payload, Queues: queues})
				if err != nil || len(got) != 1 || got[0] != want {
					t.Fatalf("%q: %q %v, want %q", wire, got, err, want)
				}
			}
		}
	}
}

func TestRoundTripRouteInterest(t *testing.T) {
	var wire []byte
	wire = AppendRouteSub(wire, []byte("a.*"), nil)
	wire = AppendRouteSub(wire, []byte("a.>"), []byte("q"))
	wire = AppendRouteUnsub(wire, []byte("a.*"), nil)
	wire = AppendRouteUnsub(wire, []byte("a.>"), []byte("q"))
	wire = AppendErr(wire, "Stale Connection")
	got, err := feed(Config{Kind: KindRoute}, wire)
	want := []string{`RS+ "a.*" nil`, `RS+ "a.>" "q"`, `RS- "a.*" nil`, `RS- "a.>" "q"`, `-ERR "Stale Connection"`}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%q %v", got, err)
	}
}

func TestAppendNoAllocs(t *testing.T) {
	dst := make([]byte, 0, 4096)
	s, r, h, p := []byte("orders.new"), []byte("_INBOX.x"), []byte("NATS/1.0\r\n\r\n"), make([]byte, 128)
	qs := [][]byte{[]byte("q1")}
	n := testing.AllocsPerRun(100, func() {
		d := AppendMsg(dst[:0], s, []byte("1"), r, h, p)
		d = AppendPub(d, s, r, h, p)
		d = AppendRMsg(d, s, r, h, p, qs)
		d = AppendRouteSub(d, s, qs[0])
		d = AppendRouteUnsub(d, s, nil)
		d = AppendErr(d, "x")
		_ = AppendStatusHeader(d, 503, "", "Nats-Subject", "x")
	})
	if n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
