package natsproto

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// mixedClientStream is a stream of every client op in several spellings,
// with payloads and header blocks that contain CR, LF and op names.
func mixedClientStream() []byte {
	hdr := AppendStatusHeader(nil, 0, "", "Nats-Msg-Id", "id-1", "X", "PUB a 1")
	var b []byte
	b = append(b, `CONNECT {"verbose":false,"headers":true,"name":"a b"}`+"\r\n"...)
	b = append(b, "PING\r\nsub orders.*  1\r\nSUB orders.> workers 2\r\n"...)
	b = AppendPub(b, []byte("orders.new"), nil, nil, []byte("hello"))
	b = AppendPub(b, []byte("orders.new"), []byte("_INBOX.abc.1"), nil, []byte("PUB x 1\r\nPING\r\n"))
	b = AppendPub(b, []byte("orders.hdr"), nil, hdr, []byte("with-header"))
	b = AppendPub(b, []byte("orders.hdr"), []byte("r"), hdr, nil)
	b = AppendPub(b, []byte("e"), nil, nil, nil)
	b = append(b, "pub\tlower  2 \nhi\r\nUNSUB 1 \r\nunsub 2 10\r\n+OK\r\n-ERR 'Stale Connection'\r\npong\r\n"...)
	b = append(b, "HPUB h 12 15\r\nNATS/1.0\r\n\r\n\r\n\r\r\n"...)
	b = AppendPub(b, []byte("big"), nil, nil, []byte(strings.Repeat("0123456789", 30)))
	return append(b, "PING\r\n"...)
}

func mixedRouteStream() []byte {
	hdr := AppendStatusHeader(nil, 503, "", "Nats-Subject", "x")
	var b []byte
	b = append(b, "INFO {\"server_id\":\"s1\", \"x\":1}\r\nCONNECT {}\r\nPING\r\n"...)
	b = AppendRouteSub(b, []byte("orders.*"), nil)
	b = AppendRouteSub(b, []byte("orders.>"), []byte("workers"))
	b = AppendRMsg(b, []byte("orders.new"), nil, nil, []byte("hello"), nil)
	b = AppendRMsg(b, []byte("orders.new"), []byte("_INBOX.x.1"), hdr, []byte("RMSG\r\n"), [][]byte{[]byte("q1"), []byte("q2")})
	b = AppendRMsg(b, []byte("s"), nil, hdr, nil, [][]byte{[]byte("q")})
	b = AppendRouteUnsub(b, []byte("orders.>"), []byte("workers"))
	b = append(b, "rs- orders.*\r\npong\r\n-ERR 'x'\r\n"...)
	return b
}

// checkSplits feeds in whole, at every single cut, at every pair of cuts
// (for short inputs), byte by byte, and in random chunks, and requires the
// same calls and the same error every time.
func checkSplits(t *testing.T, cfg Config, in []byte, rng *rand.Rand) {
	t.Helper()
	want, wantErr := feed(cfg, in)
	check := func(how string, chunks [][]byte) {
		t.Helper()
		got, err := feed(cfg, chunks...)
		if sentinel(err) != sentinel(wantErr) || !slices.Equal(got, want) {
			t.Fatalf("%s: calls %q err %v\nwhole: calls %q err %v", how, got, err, want, wantErr)
		}
	}
	for i := 0; i <= len(in); i++ {
		check("one cut", splitAt(in, i))
	}
	if len(in) <= 200 {
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j++ {
				check("two cuts", splitAt(in, i, j))
			}
		}
	}
	var bytewise [][]byte
	for i := range in {
		bytewise = append(bytewise, in[i:i+1])
	}
	check("byte by byte", bytewise)
	for range 200 {
		var cuts []int
		for c := 0; ; {
			c += 1 + rng.IntN(64)
			if c >= len(in) {
				break
			}
			cuts = append(cuts, c)
		}
		check("random chunks", splitAt(in, cuts...))
	}
}

func TestSplitAnywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	client := mixedClientStream()
	calls, err := feed(Config{}, client)
	if err != nil || len(calls) != 18 {
		t.Fatalf("client stream: %d calls, err %v: %q", len(calls), err, calls)
	}
	checkSplits(t, Config{}, client, rng)
	route := mixedRouteStream()
	calls, err = feed(Config{Kind: KindRoute}, route)
	if err != nil || len(calls) != 12 {
		t.Fatalf("route stream: %d calls, err %v: %q", len(calls), err, calls)
	}
	checkSplits(t, Config{Kind: KindRoute}, route, rng)
}

// TestSplitAnywhereErrors: streams ending in each kind of error give the
// same calls and the same error however they are split, with a small
// control-line limit so that length and op errors compete.
func TestSplitAnywhereErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	prefix := "PING\r\nPUB a 2\r\nhi\r\n"
	tails := []string{
		"XPUB a 1\r\n", "PU\r\n", "PUB a\r\n", "PUB a 3\r\nabcXY", "PUB a 99\r\n",
		"HPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n", "SUB a b c d\r\n", "UNSUB x\r\n",
		"SUB " + strings.Repeat("x", 40) + " 1\r\n", "SUBX" + strings.Repeat("x", 40),
		"PING\r" + strings.Repeat("x", 40), strings.Repeat(" ", 40), "\r\n",
		"PIN" + strings.Repeat("\r", 30), "SUB a 1\r\r\r\n", "PUB a 1\r\nx\r",
	}
	for _, tail := range tails {
		in := []byte(prefix + tail)
		for _, maxLine := range []int{0, 16, 17, 18} {
			checkSplits(t, Config{MaxControlLine: maxLine, MaxPayload: 64}, in, rng)
		}
	}
}
