package natsproto

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseOps(t *testing.T) {
	const specHdr = "NATS/1.0\r\nX-Trace: abc\r\n\r\n"
	tests := []struct {
		name string
		kind Kind
		in   string
		want []string
	}{
		{"pub", KindClient, "PUB foo 5\r\nhello\r\n",
			[]string{`MSG "foo" reply=nil hdr=nil payload="hello" queues=nil`}},
		{"pub reply", KindClient, "PUB foo _INBOX.x.1 5\r\nhello\r\n",
			[]string{`MSG "foo" reply="_INBOX.x.1" hdr=nil payload="hello" queues=nil`}},
		{"pub empty payload, lower case", KindClient, "pub foo 0\r\n\r\n",
			[]string{`MSG "foo" reply=nil hdr=nil payload="" queues=nil`}},
		{"pub tabs and trailing space", KindClient, "PUB\tfoo \t bar\t5 \t\r\nhello\r\n",
			[]string{`MSG "foo" reply="bar" hdr=nil payload="hello" queues=nil`}},
		{"pub lone LF", KindClient, "PUB foo 5\nhello\r\n",
			[]string{`MSG "foo" reply=nil hdr=nil payload="hello" queues=nil`}},
		{"pub payload with CRLF inside", KindClient, "Pub foo 4\r\n\r\n\r\n\r\n",
			[]string{`MSG "foo" reply=nil hdr=nil payload="\r\n\r\n" queues=nil`}},
		{"pub leading zeros", KindClient, "PUB foo 005\r\nhello\r\n",
			[]string{`MSG "foo" reply=nil hdr=nil payload="hello" queues=nil`}},
		{"hpub spec example", KindClient, "HPUB orders.hdr 26 37\r\n" + specHdr + "with-header\r\n",
			[]string{`MSG "orders.hdr" reply=nil hdr="NATS/1.0\r\nX-Trace: abc\r\n\r\n" payload="with-header" queues=nil`}},
		{"hpub reply, lower case", KindClient, "hpub a r 26 26\r\n" + specHdr + "\r\n",
			[]string{`MSG "a" reply="r" hdr="NATS/1.0\r\nX-Trace: abc\r\n\r\n" payload="" queues=nil`}},
		{"hpub hdr 0", KindClient, "HPUB a 0 2\r\nhi\r\n",
			[]string{`MSG "a" reply=nil hdr=nil payload="hi" queues=nil`}},
		{"hpub minimal header", KindClient, "HPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n",
			[]string{`MSG "a" reply=nil hdr="NATS/1.0\r\n\r\n" payload="" queues=nil`}},
		{"spec example stream", KindClient, "SUB orders.*  1\r\nSUB orders.> workers 2\r\nPUB orders.new 5\r\nhello\r\n",
			[]string{`SUB "orders.*" nil "1"`, `SUB "orders.>" "workers" "2"`,
				`MSG "orders.new" reply=nil hdr=nil payload="hello" queues=nil`}},
		{"sub", KindClient, "sub\tfoo\t42\n", []string{`SUB "foo" nil "42"`}},
		{"unsub", KindClient, "UNSUB 1 \r\nunsub 2 10\r\nUNSUB 3 0\r\n",
			[]string{`UNSUB "1" -1`, `UNSUB "2" 10`, `UNSUB "3" 0`}},
		{"unsub max int64", KindClient, "UNSUB 1 9223372036854775807\r\n",
			[]string{`UNSUB "1" 9223372036854775807`}},
		{"ping pong ok", KindClient, "PING\r\nping\npong \r\nPoNg\r\n+OK\r\n+ok\r\n",
			[]string{"PING", "PING", "PONG", "PONG", "+OK", "+OK"}},
		{"connect", KindClient, `CONNECT {"verbose":false, "headers":true}` + "\r\n",
			[]string{`CONNECT "{\"verbose\":false, \"headers\":true}"`}},
		{"connect padded", KindClient, "connect \t {} \t\r\n", []string{`CONNECT "{}"`}},
		{"err", KindClient, "-ERR 'Stale Connection'\r\n-err plain text \r\n-ERR\r\n-ERR ''\r\n-ERR '\r\n",
			[]string{`-ERR "Stale Connection"`, `-ERR "plain text"`, `-ERR ""`, `-ERR ""`, `-ERR "'"`}},
		{"rmsg", KindRoute, "RMSG foo - 0 5\r\nhello\r\n",
			[]string{`MSG "foo" reply=nil hdr=nil payload="hello" queues=nil`}},
		{"rmsg reply queues", KindRoute, "rmsg foo +_INBOX.abc.1 0 5 q1 q2\r\nhello\r\n",
			[]string{`MSG "foo" reply="_INBOX.abc.1" hdr=nil payload="hello" queues=["q1" "q2"]`}},
		{"rmsg header", KindRoute, "RMSG foo - 26 28 q\r\n" + specHdr + "hi\r\n",
			[]string{`MSG "foo" reply=nil hdr="NATS/1.0\r\nX-Trace: abc\r\n\r\n" payload="hi" queues=["q"]`}},
		{"route interest", KindRoute, "RS+ foo.*\r\nRS+ foo q\r\nrs- foo\r\nRS- foo  q \r\n",
			[]string{`RS+ "foo.*" nil`, `RS+ "foo" "q"`, `RS- "foo" nil`, `RS- "foo" "q"`}},
		{"route control", KindRoute, "INFO {\"server_id\":\"a\"}\r\nCONNECT {}\r\nPING\r\nPONG\r\n-ERR 'x'\r\n",
			[]string{`INFO "{\"server_id\":\"a\"}"`, `CONNECT "{}"`, "PING", "PONG", `-ERR "x"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := feed(Config{Kind: tt.kind, Headers: true}, []byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("calls:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const (
		unknown = "Unknown Protocol Operation"
		ctlLine = "maximum control line exceeded"
		maxPay  = "Maximum Payload Violation"
	)
	long := "PUB " + strings.Repeat("a", 30) + " 1\r\nx\r\n" // 36-byte line
	tests := []struct {
		name  string
		kind  Kind
		cfg   Config
		in    string
		want  error
		text  string
		calls int // calls made before the error
	}{
		{"empty line", KindClient, Config{}, "\r\n", ErrUnknownOp, unknown, 0},
		{"empty line LF", KindClient, Config{}, "PING\r\n\n", ErrUnknownOp, unknown, 1},
		{"leading space", KindClient, Config{}, " PING\r\n", ErrUnknownOp, unknown, 0},
		{"unknown op", KindClient, Config{}, "FOO bar\r\n", ErrUnknownOp, unknown, 0},
		{"unknown op no LF yet", KindClient, Config{}, "GET / HTT", ErrUnknownOp, unknown, 0},
		{"op prefix", KindClient, Config{}, "PU foo 1\r\n", ErrUnknownOp, unknown, 0},
		{"op too long", KindClient, Config{}, "PUBX foo 1\r\n", ErrUnknownOp, unknown, 0},
		{"op glued", KindClient, Config{}, "PINGPONG\r\n", ErrUnknownOp, unknown, 0},
		{"op then CR", KindClient, Config{}, "PING\rPONG\r\n", ErrUnknownOp, unknown, 0},
		{"MSG from client", KindClient, Config{}, "MSG foo 1 5\r\nhello\r\n", ErrUnknownOp, unknown, 0},
		{"RMSG from client", KindClient, Config{}, "RMSG foo - 0 1\r\nx\r\n", ErrUnknownOp, unknown, 0},
		{"RS+ from client", KindClient, Config{}, "RS+ foo\r\n", ErrUnknownOp, unknown, 0},
		{"PUB on route", KindRoute, Config{}, "PUB foo 1\r\nx\r\n", ErrUnknownOp, unknown, 0},
		{"SUB on route", KindRoute, Config{}, "SUB foo 1\r\n", ErrUnknownOp, unknown, 0},
		{"+OK on route", KindRoute, Config{}, "+OK\r\n", ErrUnknownOp, unknown, 0},
		{"pub no args", KindClient, Config{}, "PUB\r\n", ErrUnknownOp, unknown, 0},
		{"pub only spaces", KindClient, Config{}, "PUB   \r\n", ErrUnknownOp, unknown, 0},
		{"pub missing size", KindClient, Config{}, "PUB foo\r\n", ErrUnknownOp, unknown, 0},
		{"pub extra arg", KindClient, Config{}, "PUB foo bar baz 5\r\nhello\r\n", ErrUnknownOp, unknown, 0},
		{"pub size not digits", KindClient, Config{}, "PUB foo 5x\r\nhello\r\n", ErrUnknownOp, unknown, 0},
		{"pub size negative", KindClient, Config{}, "PUB foo -1\r\n", ErrUnknownOp, unknown, 0},
		{"pub size plus", KindClient, Config{}, "PUB foo +5\r\nhello\r\n", ErrUnknownOp, unknown, 0},
		{"pub size with CR", KindClient, Config{}, "PUB foo 5\r\r\nhello\r\n", ErrUnknownOp, unknown, 0},
		{"pub payload too long", KindClient, Config{}, "PUB foo 4\r\nhello\r\n", ErrUnknownOp, unknown, 0},
		{"pub payload too short", KindClient, Config{}, "PUB foo 6\r\nhello\r\nPING\r\n", ErrUnknownOp, unknown, 0},
		{"pub payload then LF only", KindClient, Config{}, "PUB foo 5\r\nhello\nPING\r\n", ErrUnknownOp, unknown, 0},
		{"pub payload then CR CR", KindClient, Config{}, "PUB foo 5\r\nhello\r\r", ErrUnknownOp, unknown, 0},
		{"pub over max payload", KindClient, Config{MaxPayload: 4}, "PUB foo 5\r\n", ErrMaxPayload, maxPay, 0},
		{"pub over default max payload", KindClient, Config{}, "PUB foo 1048577\r\n", ErrMaxPayload, maxPay, 0},
		{"pub at max payload", KindClient, Config{MaxPayload: 5}, "PUB foo 5\r\nhello\r\nPUB foo 6\r\n", ErrMaxPayload, maxPay, 1},
		{"pub huge size", KindClient, Config{}, "PUB foo 99999999999999999999999999\r\n", ErrMaxPayload, maxPay, 0},
		{"hpub headers off", KindClient, Config{}, "HPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n", ErrHeadersOff, "", 0},
		{"hpub headers off malformed", KindClient, Config{}, "HPUB\r\n", ErrHeadersOff, "", 0},
		{"hpub hdr over total", KindClient, Config{Headers: true}, "HPUB foo 13 12\r\n", ErrBadHeaders, "", 0},
		{"hpub missing total", KindClient, Config{Headers: true}, "HPUB foo 12\r\n", ErrUnknownOp, unknown, 0},
		{"hpub extra arg", KindClient, Config{Headers: true}, "HPUB a b c 12 12\r\n", ErrUnknownOp, unknown, 0},
		{"hpub bad hdr size", KindClient, Config{Headers: true}, "HPUB foo x 12\r\n", ErrUnknownOp, unknown, 0},
		{"hpub total over max", KindClient, Config{Headers: true, MaxPayload: 20}, "HPUB foo 12 21\r\n", ErrMaxPayload, maxPay, 0},
		{"ping arg", KindClient, Config{}, "PING x\r\n", ErrUnknownOp, unknown, 0},
		{"pong arg", KindClient, Config{}, "PONG 1\r\n", ErrUnknownOp, unknown, 0},
		{"ok arg", KindClient, Config{}, "+OK x\r\n", ErrUnknownOp, unknown, 0},
		{"connect no arg", KindClient, Config{}, "CONNECT\r\n", ErrUnknownOp, unknown, 0},
		{"connect blank arg", KindClient, Config{}, "CONNECT \t \r\n", ErrUnknownOp, unknown, 0},
		{"info no arg", KindRoute, Config{}, "INFO\r\n", ErrUnknownOp, unknown, 0},
		{"sub missing sid", KindClient, Config{}, "SUB foo\r\n", ErrUnknownOp, unknown, 0},
		{"sub no args", KindClient, Config{}, "SUB\r\n", ErrUnknownOp, unknown, 0},
		{"sub extra arg", KindClient, Config{}, "SUB a q 1 2\r\n", ErrUnknownOp, unknown, 0},
		{"sub sid not digits", KindClient, Config{}, "SUB foo abc\r\n", ErrUnknownOp, unknown, 0},
		{"sub sid negative", KindClient, Config{}, "SUB foo q -1\r\n", ErrUnknownOp, unknown, 0},
		{"unsub no args", KindClient, Config{}, "UNSUB\r\n", ErrUnknownOp, unknown, 0},
		{"unsub extra arg", KindClient, Config{}, "UNSUB 1 2 3\r\n", ErrUnknownOp, unknown, 0},
		{"unsub sid not digits", KindClient, Config{}, "UNSUB x1\r\n", ErrUnknownOp, unknown, 0},
		{"unsub max not digits", KindClient, Config{}, "UNSUB 1 ten\r\n", ErrUnknownOp, unknown, 0},
		{"unsub max negative", KindClient, Config{}, "UNSUB 1 -1\r\n", ErrUnknownOp, unknown, 0},
		{"unsub max overflow", KindClient, Config{}, "UNSUB 1 9223372036854775808\r\n", ErrUnknownOp, unknown, 0},
		{"line too long", KindClient, Config{MaxControlLine: 35}, long, ErrControlLine, ctlLine, 0},
		{"line too long no LF", KindClient, Config{MaxControlLine: 16}, "SUB " + strings.Repeat("x", 40), ErrControlLine, ctlLine, 0},
		{"line too long default", KindClient, Config{}, "SUB " + strings.Repeat("x", 5000) + " 1\r\n", ErrControlLine, ctlLine, 0},
		{"connect too long", KindClient, Config{}, "CONNECT {" + strings.Repeat(" ", 4100) + "}\r\n", ErrControlLine, ctlLine, 0},
		{"rmsg missing args", KindRoute, Config{}, "RMSG foo - 0\r\n", ErrUnknownOp, unknown, 0},
		{"rmsg bad marker", KindRoute, Config{}, "RMSG foo x 0 1\r\nx\r\n", ErrUnknownOp, unknown, 0},
		{"rmsg bare plus", KindRoute, Config{}, "RMSG foo + 0 1\r\nx\r\n", ErrUnknownOp, unknown, 0},
		{"rmsg dash reply", KindRoute, Config{}, "RMSG foo -r 0 1\r\nx\r\n", ErrUnknownOp, unknown, 0},
		{"rmsg bad size", KindRoute, Config{}, "RMSG foo - 0 x\r\n", ErrUnknownOp, unknown, 0},
		{"rmsg hdr over total", KindRoute, Config{}, "RMSG foo - 20 12\r\n", ErrBadHeaders, "", 0},
		{"rmsg over max", KindRoute, Config{MaxPayload: 10}, "RMSG foo - 0 11\r\n", ErrMaxPayload, maxPay, 0},
		{"rmsg bad terminator", KindRoute, Config{}, "RMSG foo - 0 1\r\nxy\r\n", ErrUnknownOp, unknown, 0},
		{"rs+ no args", KindRoute, Config{}, "RS+\r\n", ErrUnknownOp, unknown, 0},
		{"rs- extra", KindRoute, Config{}, "RS- a q x\r\n", ErrUnknownOp, unknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Kind = tt.kind
			calls, err := feed(cfg, []byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var pe *ProtoError
			if !errors.As(err, &pe) || pe.Err != tt.want || pe.Error() == "" {
				t.Fatalf("err = %#v, want a *ProtoError wrapping %v", err, tt.want)
			}
			if got := ErrText(err); got != tt.text {
				t.Fatalf("ErrText = %q, want %q", got, tt.text)
			}
			if len(calls) != tt.calls {
				t.Fatalf("calls before the error = %q, want %d", calls, tt.calls)
			}
			// Byte by byte: same calls, same error.
			var chunks [][]byte
			for i := range len(tt.in) {
				chunks = append(chunks, []byte(tt.in[i:i+1]))
			}
			calls1, err1 := feed(cfg, chunks...)
			if sentinel(err1) != sentinel(err) || !slices.Equal(calls1, calls) {
				t.Fatalf("byte by byte: %q, %v; whole: %q, %v", calls1, err1, calls, err)
			}
		})
	}
}

// TestControlLineBoundary checks the limit counts the line without its
// ending, whether that is CRLF or LF, and that a CR inside counts.
func TestControlLineBoundary(t *testing.T) {
	const max = 16
	line := func(n int) string { return "SUB " + strings.Repeat("x", n-6) + " 1" } // n bytes
	tests := []struct {
		in   string
		want error
	}{
		{line(16) + "\r\n", nil},
		{line(16) + "\n", nil},
		{line(17) + "\r\n", ErrControlLine},
		{line(17) + "\n", ErrControlLine},
		{line(15) + "\r\r\n", ErrUnknownOp}, // 16 bytes, CR inside: sid "1\r"
		{line(16) + "\r\r\n", ErrControlLine},
		{"PING" + strings.Repeat(" ", 12) + "\r\n", nil},
		{"PING" + strings.Repeat(" ", 13) + "\r\n", ErrControlLine},
	}
	for _, tt := range tests {
		for cut := 0; cut <= len(tt.in); cut++ {
			_, err := feed(Config{MaxControlLine: max}, splitAt([]byte(tt.in), cut)...)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("%q cut at %d: err = %v, want %v", tt.in, cut, err, tt.want)
			}
		}
	}
}

func TestParseEarlyErrors(t *testing.T) {
	// Errors are found before the line ends.
	p := NewParser(Config{})
	if err := p.Parse([]byte("XY"), &recorder{}); !errors.Is(err, ErrUnknownOp) {
		t.Fatalf("unknown op prefix: %v", err)
	}
	p = NewParser(Config{MaxControlLine: 10})
	r := &recorder{}
	if err := p.Parse([]byte("SUB abcdef"), r); err != nil {
		t.Fatal(err)
	}
	if err := p.Parse([]byte("g"), r); !errors.Is(err, ErrControlLine) {
		t.Fatalf("long line: %v", err)
	}
}

func TestParseStickyError(t *testing.T) {
	p := NewParser(Config{})
	r := &recorder{}
	err := p.Parse([]byte("PING\r\nBAD\r\nPING\r\n"), r)
	if !errors.Is(err, ErrUnknownOp) || len(r.calls) != 1 {
		t.Fatalf("err %v calls %q", err, r.calls)
	}
	if err2 := p.Parse([]byte("PING\r\n"), r); err2 != err || len(r.calls) != 1 {
		t.Fatalf("after error: %v, calls %q", err2, r.calls)
	}
}

func TestParseHandlerError(t *testing.T) {
	for _, op := range []string{"PING", "MSG", "SUB", "CONNECT"} {
		p := NewParser(Config{})
		r := &recorder{failOn: op}
		in := "CONNECT {}\r\nPING\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPONG\r\n"
		err := p.Parse([]byte(in), r)
		if err != errStop {
			t.Fatalf("%s: err = %v, want errStop unchanged", op, err)
		}
		if ErrText(err) != "" {
			t.Fatalf("ErrText(handler error) = %q", ErrText(err))
		}
		if last := r.calls[len(r.calls)-1]; !strings.HasPrefix(last, op) {
			t.Fatalf("%s: stopped after %q", op, last)
		}
		if p.Parse([]byte("PING\r\n"), r) != errStop {
			t.Fatal("error not sticky")
		}
	}
}

// TestParseHandlerErrorStraddling: a Handler error on an op completed
// from the scratch buffer is returned too.
func TestParseHandlerErrorStraddling(t *testing.T) {
	p := NewParser(Config{})
	r := &recorder{failOn: "MSG"}
	if err := p.Parse([]byte("PUB a 5\r\nhel"), r); err != nil {
		t.Fatal(err)
	}
	if err := p.Parse([]byte("lo\r\nPING\r\n"), r); err != errStop || len(r.calls) != 1 {
		t.Fatalf("err %v calls %q", err, r.calls)
	}
}

func TestSetHeadersFromConnect(t *testing.T) {
	in := `CONNECT {"headers":true}` + "\r\nHPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" +
		`CONNECT {"headers":false}` + "\r\nHPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n"
	calls, err := feed(Config{}, []byte(in))
	if !errors.Is(err, ErrHeadersOff) || len(calls) != 3 {
		t.Fatalf("calls %q err %v", calls, err)
	}
}

// TestSettingsChangeMidOp: an op whose control line was accepted completes
// even if the settings change before its payload arrives.
func TestSettingsChangeMidOp(t *testing.T) {
	p := NewParser(Config{Headers: true})
	r := &recorder{}
	if err := p.Parse([]byte("HPUB a 12 14\r\nNATS"), r); err != nil {
		t.Fatal(err)
	}
	p.SetHeaders(false)
	p.SetMaxPayload(1)
	if err := p.Parse([]byte("/1.0\r\n\r\nhi\r\n"), r); err != nil || len(r.calls) != 1 {
		t.Fatalf("err %v calls %q", err, r.calls)
	}
	if err := p.Parse([]byte("PUB a 2\r\n"), r); !errors.Is(err, ErrMaxPayload) {
		t.Fatalf("new limit not applied: %v", err)
	}
}

func TestParseIncompleteKept(t *testing.T) {
	p := NewParser(Config{})
	r := &recorder{}
	for _, c := range []string{"P", "U", "B foo", " 5\r", "\nhe", "llo", "\r", "\n", "PI", "NG\r\n"} {
		if err := p.Parse([]byte(c), r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{`MSG "foo" reply=nil hdr=nil payload="hello" queues=nil`, "PING"}
	if !slices.Equal(r.calls, want) {
		t.Fatalf("calls %q", r.calls)
	}
	if err := p.Parse(nil, r); err != nil {
		t.Fatal(err)
	}
}

// TestParseScratchReuse: a straddling op does not allocate once the
// scratch buffer has grown, and a large one's buffer is dropped after.
func TestParseScratchReuse(t *testing.T) {
	p := NewParser(Config{})
	var h nopHandler
	op := AppendPub(nil, []byte("a.b"), nil, nil, make([]byte, 1000))
	feedSplit := func() {
		if err := p.Parse(op[:500], h); err != nil {
			t.Fatal(err)
		}
		if err := p.Parse(op[500:], h); err != nil {
			t.Fatal(err)
		}
	}
	feedSplit()
	if n := testing.AllocsPerRun(100, feedSplit); n != 0 {
		t.Fatalf("straddling PUB: %v allocs", n)
	}
	big := AppendPub(nil, []byte("a"), nil, nil, make([]byte, 100<<10))
	if err := p.Parse(big[:10], h); err != nil {
		t.Fatal(err)
	}
	if err := p.Parse(big[10:], h); err != nil {
		t.Fatal(err)
	}
	if cap(p.pend) != 0 {
		t.Fatalf("scratch of %d bytes kept after a large op", cap(p.pend))
	}
}

func TestParseNoAllocs(t *testing.T) {
	hdr := AppendStatusHeader(nil, 0, "", "K", "v")
	var buf []byte
	buf = AppendPub(buf, []byte("a.b"), []byte("r"), nil, make([]byte, 128))
	buf = AppendPub(buf, []byte("a.b"), nil, hdr, make([]byte, 128))
	buf = append(buf, "SUB a.* q 1\r\nUNSUB 1 5\r\nPING\r\nPONG\r\n"...)
	p := NewParser(Config{Headers: true})
	var h nopHandler
	if n := testing.AllocsPerRun(100, func() {
		if err := p.Parse(buf, h); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocs per Parse", n)
	}
	rbuf := AppendRMsg(nil, []byte("a"), []byte("r"), hdr, []byte("x"), [][]byte{[]byte("q1"), []byte("q2")})
	rp := NewParser(Config{Kind: KindRoute})
	if n := testing.AllocsPerRun(100, func() {
		if err := rp.Parse(rbuf, h); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocs per RMSG Parse", n)
	}
}

func TestNewParserBadKind(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	NewParser(Config{Kind: 7})
}

func TestErrText(t *testing.T) {
	if ErrText(nil) != "" || ErrText(errors.New("x")) != "" {
		t.Fatal("non-protocol errors have no text")
	}
	wrapped := &ProtoError{Err: ErrMaxPayload, Op: "PUB", Detail: "d"}
	if ErrText(wrapped) != "Maximum Payload Violation" || ErrText(ErrUnknownOp) != "Unknown Protocol Operation" {
		t.Fatal("wrong text")
	}
	if got := wrapped.Error(); got != "natsproto: maximum payload violation: PUB: d" {
		t.Fatalf("Error() = %q", got)
	}
}

// nopHandler accepts everything, for allocation tests and benchmarks.
type nopHandler struct{}

func (nopHandler) Connect([]byte) error         { return nil }
func (nopHandler) Info([]byte) error            { return nil }
func (nopHandler) Msg(*Msg) error               { return nil }
func (nopHandler) Sub(_, _, _ []byte) error     { return nil }
func (nopHandler) Unsub([]byte, int64) error    { return nil }
func (nopHandler) RouteSub(_, _ []byte) error   { return nil }
func (nopHandler) RouteUnsub(_, _ []byte) error { return nil }
func (nopHandler) Ping() error                  { return nil }
func (nopHandler) Pong() error                  { return nil }
func (nopHandler) Err([]byte) error             { return nil }
func (nopHandler) OK() error                    { return nil }
