package natsproto

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// roundTripper is a recorder that also re-encodes every Msg (AppendPub or
// AppendRMsg) and requires a fresh Parser to decode it to the same Msg.
type roundTripper struct {
	recorder
	t    *testing.T
	kind Kind
	max  int
}

func (r *roundTripper) Msg(m *Msg) error {
	var wire []byte
	if r.kind == KindRoute {
		wire = AppendRMsg(nil, m.Subject, m.Reply, m.Header, m.Payload, m.Queues)
	} else {
		wire = AppendPub(nil, m.Subject, m.Reply, m.Header, m.Payload)
	}
	calls, err := feed(Config{Kind: r.kind, Headers: true, MaxPayload: r.max}, wire)
	if want := fmtMsg(m); err != nil || len(calls) != 1 || calls[0] != want {
		r.t.Fatalf("re-encoded %q: calls %q err %v, want %q", wire, calls, err, want)
	}
	return r.recorder.Msg(m)
}

// FuzzParse feeds arbitrary input to both kinds of Parser, whole, in
// random chunks chosen by seed, and byte by byte, under limits chosen by
// flags. Parse must not panic, must report the same calls and the same
// error sentinel however the input is split, must agree with naiveParse,
// must return only *ProtoErrors, and every decoded Msg must survive
// encoding and parsing.
//
//	go test ./broker/natsproto -run '^$' -fuzz '^FuzzParse$' -fuzztime 2m
func FuzzParse(f *testing.F) {
	for _, s := range [][]byte{
		mixedClientStream(),
		mixedRouteStream(),
		[]byte("SUB orders.*  1\r\nSUB orders.> workers 2\r\nPUB orders.new 5\r\nhello\r\n"),
		[]byte("HPUB orders.hdr 26 37\r\nNATS/1.0\r\nX-Trace: abc\r\n\r\nwith-header\r\n"),
		[]byte(`CONNECT {"verbose":false,"pedantic":false,"tls_required":false,"name":"","lang":"go","version":"1.53.1","protocol":1,"echo":true,"headers":true,"no_responders":true}` + "\r\nPING\r\n"),
		[]byte("PUB nobody.home _INBOX.tSvuZrujoHluWFQ6fNOuy4.ZcuMFOSe 1\r\nx\r\n"),
		[]byte("HPUB ord.a _INBOX.I0EDs2Qg 31 34\r\nNATS/1.0\r\nNats-Msg-Id: id-2\r\n\r\ntwo\r\n"),
		[]byte("UNSUB 1 \r\nunsub 2 10\r\n-ERR 'Stale Connection'\r\n+OK\r\n"),
		[]byte("RMSG a +_INBOX.abc.1 26 27 q1 q2\r\nNATS/1.0\r\nX-Trace: abc\r\n\r\nx\r\nRS+ a q\r\nRS- a\r\n"),
		[]byte("INFO {\"server_id\":\"s\"}\r\nRMSG a - 0 0\r\n\r\n"),
		[]byte("PUB a 5\r\nhelloXX"),
		[]byte("HPUB a 13 12\r\n"),
		[]byte("PUB a 99999999999999999999\r\n"),
		[]byte("PIN\r\r\rG\r\n"),
		[]byte("\r\n"),
	} {
		for _, flags := range []uint8{0, 1, 7, 0x53} {
			f.Add(s, uint64(len(s)), flags)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, flags uint8) {
		for _, kind := range []Kind{KindClient, KindRoute} {
			cfg := Config{Kind: kind, Headers: flags&1 != 0}
			if flags&2 != 0 {
				cfg.MaxControlLine = 4 + int(flags>>4) // 4..19: lengths and op names compete
			}
			if flags&4 != 0 {
				cfg.MaxPayload = 1 + int(flags>>3)
			}
			fuzzOne(t, cfg, data, seed)
		}
	})
}

func fuzzOne(t *testing.T, cfg Config, data []byte, seed uint64) {
	p := NewParser(cfg)
	whole := &roundTripper{recorder: recorder{p: p}, t: t, kind: cfg.Kind, max: cfg.MaxPayload}
	err := p.Parse(data, whole)
	var pe *ProtoError
	if err != nil && (!errors.As(err, &pe) || sentinel(err) != sentinel(pe.Err) || pe.Error() == "") {
		t.Fatalf("error %#v is not a *ProtoError wrapping a sentinel", err)
	}
	if err != nil && p.Parse([]byte("PING\r\n"), whole) != err {
		t.Fatal("error not sticky")
	}
	checkNaive(t, cfg, data, whole.calls, err)

	rng := rand.New(rand.NewPCG(seed, uint64(len(data))))
	maxChunk := 1 + int(seed%97)
	var chunks [][]byte
	for rest := data; len(rest) > 0; {
		n := min(len(rest), rng.IntN(maxChunk+1)) // empty chunks too
		chunks = append(chunks, rest[:n])
		rest = rest[n:]
	}
	calls, err2 := feed(cfg, chunks...)
	if sentinel(err2) != sentinel(err) || !slices.Equal(calls, whole.calls) {
		t.Fatalf("chunked: calls %q err %v\nwhole:   calls %q err %v", calls, err2, whole.calls, err)
	}
	if len(data) <= 2048 {
		var bytewise [][]byte
		for i := range data {
			bytewise = append(bytewise, data[i:i+1])
		}
		calls, err2 = feed(cfg, bytewise...)
		if sentinel(err2) != sentinel(err) || !slices.Equal(calls, whole.calls) {
			t.Fatalf("byte by byte: calls %q err %v\nwhole:   calls %q err %v", calls, err2, whole.calls, err)
		}
	}
}

// TestFuzzCostLinear: large inputs of the worst shapes take time linear in
// their size (the fuzzer cannot tell a hang from a slow input).
func TestFuzzCostLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	random := make([]byte, 1<<16)
	for i := range random {
		const alphabet = "PUB HSRMGNIOK+-\r\n 0123456789"
		random[i] = alphabet[rng.IntN(len(alphabet))]
	}
	pubs := []byte(strings.Repeat("PUB a 1\r\nx\r\n", 1<<12))
	for _, in := range [][]byte{random, pubs, []byte("SUB " + strings.Repeat("a", 1<<16))} {
		for _, flags := range []uint64{0, 0x53} {
			fuzzOne(t, Config{MaxControlLine: int(flags)}, in, flags)
		}
	}
}
