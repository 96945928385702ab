package broker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/natspeer"
)

// Differential protocol tests: the same raw byte scripts go to the
// reference nats-server and to a Strata broker, and what each sends back
// (after its INFO) must be the same frames, and both must close — or both
// keep — the connection. Server PINGs are dropped from the comparison;
// runs of consecutive MSG/HMSG frames are compared as sets, because two
// servers may order one publish's deliveries to several subscriptions of
// one connection differently.

// rawScript is one client session, written as is (or byte by byte).
type rawScript struct {
	name     string
	input    string
	bytewise bool // write one byte at a time (NATS protocol §1.1: chunks split anywhere)
	auth     bool // run against servers requiring user "u" / password "p"
	// strata, when set, is what Strata must answer instead of matching
	// the reference: a deliberate difference, explained in diverges.
	strata   *transcript
	diverges string
}

func rawScripts() []rawScript {
	big := strings.Repeat("x", 5000)
	return []rawScript{
		{name: "connect-ping", input: "CONNECT {\"verbose\":false}\r\nPING\r\n"},
		{name: "verbose-default-true", input: "CONNECT {}\r\nSUB a 1\r\nPUB a 2\r\nhi\r\nUNSUB 1\r\nPING\r\n"},
		{name: "unknown-connect-keys", input: "CONNECT {\"verbose\":false,\"bogus\":[1,2],\"lang\":\"zz\",\"version\":\"9\"}\r\nPING\r\n"},
		{name: "protocol-2", input: "CONNECT {\"verbose\":false,\"protocol\":2}\r\nPING\r\n"},
		{name: "no-responders-without-headers", input: "CONNECT {\"verbose\":false,\"no_responders\":true}\r\nPING\r\n"},
		{name: "framing-spaces-case", input: "connect {\"verbose\":false}\r\nsub  foo.*   q1  5 \r\nSUB\tfoo.>\t6\r\npub foo.bar  3\r\nabc\r\nPiNg\r\nUNSUB 6 \r\nPUB foo.baz 1\r\nz\r\nping\r\n"},
		{name: "split-anywhere", bytewise: true, input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB a.> 1\r\nPUB a.b r 5\r\nhello\r\nHPUB a.c 22 27\r\nNATS/1.0\r\nK: v\r\n\r\n\r\nbody!\r\nPING\r\n"},
		{name: "headers-byte-exact", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\n" +
			hpub("h", "", "NATS/1.0\r\nX-Trace: abc\r\nx-trace: lower\r\nZeta: 1\r\nAlpha: 2\r\nX-Trace: again\r\n\r\n", "payload") + "PING\r\n"},
		{name: "status-only-header", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\n" + hpub("h", "", "NATS/1.0\r\n\r\n", "") + "PING\r\n"},
		{name: "headers-off-gets-msg", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB h 1\r\nPUB h 2\r\nok\r\nPING\r\n"},
		{name: "unsub-max", input: "CONNECT {\"verbose\":false}\r\nSUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nPUB a 1\r\n3\r\nPING\r\n"},
		{name: "unsub-max-already-reached", input: "CONNECT {\"verbose\":false}\r\nSUB a 1\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nUNSUB 1 1\r\nPUB a 1\r\n3\r\nPING\r\n"},
		{name: "echo-false", input: "CONNECT {\"verbose\":false,\"echo\":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n"},
		{name: "wildcards", input: "CONNECT {\"verbose\":false}\r\nSUB a.* 1\r\nSUB a.> 2\r\nSUB > 3\r\nSUB a.*.c 4\r\nSUB a* 5\r\nSUB *.b 6\r\n" +
			"PUB a.b 1\r\n1\r\nPUB a.b.c 1\r\n2\r\nPUB a 1\r\n3\r\nPUB a* 1\r\n4\r\nPUB x.b 1\r\n5\r\nPING\r\n"},
		{name: "request-reply-and-no-responders", input: "CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\n" +
			"SUB svc 1\r\nSUB _INBOX.abc.* 2\r\nPUB svc _INBOX.abc.1 2\r\nq?\r\nPUB _INBOX.abc.1 2\r\nA!\r\nPUB nobody.home _INBOX.abc.2 1\r\nx\r\nPING\r\n"},
		{name: "empty-payload", input: "CONNECT {\"verbose\":false}\r\nSUB e 1\r\nPUB e 0\r\n\r\nPING\r\n"},
		{name: "ping-pong-order", input: "CONNECT {\"verbose\":false}\r\nPING\r\nSUB a 1\r\nPING\r\nPUB a 1\r\nx\r\nPING\r\nPONG\r\n"},
		{name: "max-payload", input: "CONNECT {\"verbose\":false}\r\nPUB a 2000000\r\n"},
		{name: "max-control-line", input: "CONNECT {\"verbose\":false}\r\nSUB " + big + " 1\r\n"},
		{name: "unknown-op", input: "CONNECT {\"verbose\":false}\r\nFOO bar\r\n"},
		{name: "hpub-hdr-over-total", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nHPUB a 10 5\r\nNATS/\r\n"},
		{name: "bad-payload-terminator", input: "CONNECT {\"verbose\":false}\r\nPUB a 2\r\nabcd\r\n"},
		{name: "wildcard-publish", input: "CONNECT {\"verbose\":false}\r\nSUB w.> 1\r\nSUB w.x 2\r\nPUB w.* 1\r\nx\r\nPUB w.> 1\r\ny\r\nPING\r\n",
			diverges: "the reference delivers and sends a non-fatal -ERR 'Invalid Publish Subject', which nats.go treats as fatal (spec §5 item 13): Strata delivers without it",
			strata:   &transcript{Frames: []string{"MSG w.* 1 1\n\"x\"", "MSG w.> 1 1\n\"y\"", "PONG"}}},
		{name: "hpub-bad-header-prefix", input: "CONNECT {\"verbose\":false,\"headers\":true}\r\nHPUB a 9 11\r\nXXXX/1.0\r\nhi\r\n"},
		{name: "client-sends-info", input: "CONNECT {\"verbose\":false}\r\nINFO {}\r\nPING\r\n"},
		{name: "pub-before-connect", input: "SUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n"},
		{name: "auth-bad-password", auth: true, input: "CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"wrong\"}\r\nPING\r\n"},
		{name: "auth-good-password", auth: true, input: "CONNECT {\"verbose\":false,\"user\":\"u\",\"pass\":\"p\"}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n"},
	}
}

func hpub(subject, reply, hdr, payload string) string {
	r := ""
	if reply != "" {
		r = reply + " "
	}
	return fmt.Sprintf("HPUB %s %s%d %d\r\n%s%s\r\n", subject, r, len(hdr), len(hdr)+len(payload), hdr, payload)
}

// transcript is what a server sent after its INFO, in frames, and whether
// it closed the connection.
type transcript struct {
	Frames []string
	Closed bool
}

func (tr transcript) String() string {
	return fmt.Sprintf("closed=%v\n%s", tr.Closed, strings.Join(tr.Frames, "\n"))
}

// runRaw plays a script against addr and records the answer. It reads
// until the server closed, or until it answered every PING of the script
// and went quiet.
func runRaw(t *testing.T, addr string, s rawScript) transcript {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	info, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(info, "INFO ") {
		t.Fatalf("%s: first line %q, %v", addr, info, err)
	}
	go func() {
		if s.bytewise {
			for i := 0; i < len(s.input); i++ {
				if _, err := c.Write([]byte{s.input[i]}); err != nil {
					return
				}
			}
			return
		}
		_, _ = c.Write([]byte(s.input))
	}()
	pings := strings.Count(strings.ToUpper(s.input), "PING\r\n")
	var tr transcript
	pongs := 0
	for {
		quiet := 3 * time.Second
		if pongs >= pings && pings > 0 {
			quiet = 150 * time.Millisecond // after the last PONG: only look for a close
		}
		_ = c.SetReadDeadline(time.Now().Add(quiet))
		f, err := readFrame(br)
		if err == io.EOF || isReset(err) {
			tr.Closed = true
			break
		}
		if err != nil {
			break // quiet
		}
		switch {
		case f == "PING":
			continue
		case strings.HasPrefix(f, "INFO "):
			continue
		case f == "PONG":
			pongs++
		}
		tr.Frames = append(tr.Frames, f)
	}
	tr.Frames = sortMsgRuns(tr.Frames)
	return tr
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

// readFrame reads one server op; MSG/HMSG include their payload.
func readFrame(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	f := strings.Fields(line)
	if len(f) == 0 || (f[0] != "MSG" && f[0] != "HMSG") {
		return line, nil
	}
	size, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		return line, nil
	}
	body := make([]byte, size+2)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", err
	}
	return line + "\n" + strconv.Quote(string(body[:size])), nil
}

// sortMsgRuns sorts each run of consecutive MSG/HMSG frames.
func sortMsgRuns(frames []string) []string {
	out := slices.Clone(frames)
	isMsg := func(s string) bool { return strings.HasPrefix(s, "MSG ") || strings.HasPrefix(s, "HMSG ") }
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && isMsg(out[j]) {
			j++
		}
		if j > i {
			slices.Sort(out[i:j])
			i = j
		} else {
			i++
		}
	}
	return out
}

func TestDifferentialRawProtocol(t *testing.T) {
	ref := natspeer.Start(t)
	refAuth := natspeer.Start(t, "authorization { user: u, password: p }")
	strata := startBroker(t, nil)
	strataAuth := startBroker(t, func(c *Config) { c.Auth = StaticAuth{Users: map[string]string{"u": "p"}} })
	for _, s := range rawScripts() {
		t.Run(s.name, func(t *testing.T) {
			refAddr, ourAddr := ref.Addr(), strata.Addr()
			if s.auth {
				refAddr, ourAddr = refAuth.Addr(), strataAuth.Addr()
			}
			want := runRaw(t, refAddr, s)
			got := runRaw(t, ourAddr, s)
			if s.strata != nil {
				t.Logf("deliberate difference: %s\nnats-server:\n%s", s.diverges, want)
				want = *s.strata
			}
			if want.String() != got.String() {
				t.Errorf("script %s:\nnats-server:\n%s\n\nstrata:\n%s", s.name, want, got)
			}
			if len(want.Frames) == 0 && !want.Closed {
				t.Errorf("script %s: the reference answered nothing: the script checks nothing", s.name)
			}
		})
	}
}

// TestInfoFields is conformance item 1: the first line is INFO with the
// fields nats.go needs (NATS protocol §1.2).
func TestInfoFields(t *testing.T) {
	s := startBroker(t, nil)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(line, []byte("INFO ")) || !bytes.HasSuffix(line, []byte("\r\n")) {
		t.Fatalf("first line %q", line)
	}
	var info map[string]any
	if err := json.Unmarshal(line[5:], &info); err != nil {
		t.Fatalf("INFO JSON: %v", err)
	}
	if info["proto"] != float64(1) || info["headers"] != true {
		t.Errorf("proto/headers: %v", info)
	}
	if mp, _ := info["max_payload"].(float64); mp <= 0 {
		t.Errorf("max_payload %v", info["max_payload"])
	}
	for _, k := range []string{"server_id", "version", "server_name", "client_id", "host", "port"} {
		if _, ok := info[k]; !ok {
			t.Errorf("INFO lacks %q: %s", k, line)
		}
	}
	if len(line) > 4096 {
		t.Errorf("INFO is %d bytes, over 4 KiB", len(line))
	}
}
