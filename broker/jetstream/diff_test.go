package jetstream_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The JetStream differential suite: raw protocol scripts (API requests,
// publishes with headers, pull requests and acks, written as PUB/HPUB on
// a plain TCP connection) go to every target, and what comes back is
// recorded as a transcript after normalising what legitimately differs
// between two servers or two runs (times, server names, cluster info, API
// counters and level, the ack subject's timestamp token, nats-server's own
// "_nats.*" metadata). Transcripts are compared with the reference's:
//
//   - the reference's transcript must equal the recorded one in
//     testdata/jsdiff/<case>.txt (so the suite checks something even when
//     only the reference runs); -jsdiff.update rewrites those files from
//     the reference;
//   - Strata's transcript must equal the reference's of the same run, or
//     the recorded one when the reference does not run, unless the case
//     documents a deliberate difference (diverges), in which case it must
//     equal testdata/jsdiff/<case>.strata.txt.
//
// Each step waits for the number of frames it is declared to cause, with
// a deadline; steps that cause none are followed by PING/PONG (the PONG
// comes only after earlier ops took effect, spec §1.9), and every script
// ends with a quiet period in which any further frame is recorded too.

var (
	updateDiff = flag.Bool("jsdiff.update", false, "rewrite testdata/jsdiff/*.txt from the reference nats-server")
	dumpDiff   = flag.String("jsdiff.dump", "", "write every target's transcript to `dir`/<case>.<target>.txt (to diff them whole)")
)

const (
	diffStepTimeout = 5 * time.Second        // for a step's frames to arrive
	diffQuiet       = 300 * time.Millisecond // after the script: nothing more may come
	diffInbox       = "_INBOX.d"             // step k's reply subject is _INBOX.d.k
)

// normalisation

var (
	inboxNUID = regexp.MustCompile(`_INBOX\.[A-Za-z0-9]{22}`)
	// Keys whose string values are times or server-local identities.
	volatileKeys = map[string]string{
		"created": "<time>", "ts": "<time>", "first_ts": "<time>", "last_ts": "<time>",
		"last_active": "<time>", "time": "<time>", "pin_ts": "<time>", "pinned_ts": "<time>",
		"pinned_client_id": "<pin>",
		"server_id":        "<server>", "server_name": "<server>", "server": "<server>",
		"active": "<duration>",
	}
	// Header values that are random per delivery.
	volatileHeaders = []string{"Nats-Pin-Id: "}
	zeroTime        = "0001-01-01T00:00:00Z"
)

// normaliseJSON rewrites a JSON document into sorted-key compact form with
// volatile values replaced. It returns ok=false for non-JSON bodies.
func normaliseJSON(b []byte) (string, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", false
	}
	if _, ok := v.(map[string]any); !ok {
		return "", false
	}
	if d.More() {
		return "", false
	}
	v = normaliseValue("", v)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", false
	}
	return strings.TrimSuffix(out.String(), "\n"), true
}

func normaliseValue(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "cluster") // leader/replica names: server identities
		for k, sub := range x {
			if k == "metadata" {
				if m, ok := sub.(map[string]any); ok {
					for mk := range m {
						if strings.HasPrefix(mk, "_nats.") {
							delete(m, mk) // the reference's version stamps
						}
					}
					if len(m) == 0 {
						delete(x, k)
						continue
					}
				}
			}
			x[k] = normaliseValue(k, sub)
		}
		if key == "api" {
			for _, k := range []string{"total", "errors"} {
				if _, ok := x[k]; ok {
					x[k] = "<count>"
				}
			}
			// The API level each server advertises: Strata's is its own
			// (jsapi.APILevel), not the reference's.
			if _, ok := x["level"]; ok {
				x["level"] = "<level>"
			}
		}
		return x
	case []any:
		for i := range x {
			x[i] = normaliseValue(key, x[i])
		}
		return x
	case string:
		if repl, ok := volatileKeys[key]; ok && x != zeroTime {
			return repl
		}
		return inboxNUID.ReplaceAllString(x, "_INBOX.<nuid>")
	case json.Number:
		if key == "active" {
			return volatileKeys[key]
		}
		return x
	}
	return v
}

// normaliseReply hides the ack subject's timestamp token (V1: 9 tokens).
func normaliseReply(r string) string {
	if strings.HasPrefix(r, "$JS.ACK.") {
		tok := strings.Split(r, ".")
		switch {
		case len(tok) == 9:
			tok[7] = "<ts>"
		case len(tok) >= 11:
			tok[len(tok)-3] = "<ts>" // V2: …<ts>.<pending>.<rand>
			tok[len(tok)-1] = "<rand>"
		}
		return strings.Join(tok, ".")
	}
	return inboxNUID.ReplaceAllString(r, "_INBOX.<nuid>")
}

// frame is one server op, with its payload for MSG/HMSG.
type frame struct {
	op, subject, sid, reply string
	hdr, body               []byte
	line                    string
}

func (f frame) isMsg() bool { return f.op == "MSG" || f.op == "HMSG" }

// String renders the frame for a transcript, normalised.
func (f frame) String() string {
	if !f.isMsg() {
		return f.line
	}
	var b strings.Builder
	b.WriteString(f.op + " " + f.subject + " " + f.sid)
	if f.reply != "" {
		b.WriteString(" " + normaliseReply(f.reply))
	}
	body, isJSON := normaliseJSON(f.body)
	switch {
	case isJSON && f.op == "MSG":
		b.WriteString(" <n>")
	case isJSON:
		fmt.Fprintf(&b, " %d <n>", len(f.hdr))
	case f.op == "MSG":
		fmt.Fprintf(&b, " %d", len(f.body))
	default:
		fmt.Fprintf(&b, " %d %d", len(f.hdr), len(f.hdr)+len(f.body))
	}
	if f.op == "HMSG" {
		for _, h := range strings.Split(strings.TrimSuffix(string(f.hdr), "\r\n\r\n"), "\r\n") {
			for _, v := range volatileHeaders {
				if strings.HasPrefix(h, v) {
					h = v + "<random>"
				}
			}
			b.WriteString("\n    | " + h)
		}
	}
	if !isJSON {
		body = strconv.Quote(string(f.body))
	}
	if len(f.body) > 0 || f.op == "MSG" {
		b.WriteString("\n    " + body)
	}
	return b.String()
}

// rawSession is a plain TCP NATS client.
type rawSession struct {
	t       *testing.T
	c       net.Conn
	br      *bufio.Reader
	gotInfo bool
}

func dialRaw(t *testing.T, addr string) *rawSession {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawSession{t: t, c: c, br: bufio.NewReader(c)}
	f, err := r.next(diffStepTimeout)
	if err != nil || !strings.HasPrefix(f.line, "INFO ") {
		t.Fatalf("first frame %q: %v", f.line, err)
	}
	r.write(`CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,"name":"jsdiff"}` + "\r\nSUB " + diffInbox + ".> 1\r\n")
	r.sync()
	return r
}

func (r *rawSession) write(s string) {
	r.t.Helper()
	_ = r.c.SetWriteDeadline(time.Now().Add(diffStepTimeout))
	if _, err := io.WriteString(r.c, s); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// sync sends PING and waits for the PONG: every earlier op has then
// taken effect. Frames before the PONG are returned.
func (r *rawSession) sync() []frame {
	r.t.Helper()
	r.write("PING\r\n")
	var got []frame
	for {
		f, err := r.next(diffStepTimeout)
		if err != nil {
			r.t.Fatalf("waiting for PONG: %v", err)
		}
		if f.line == "PONG" {
			return got
		}
		got = append(got, f)
	}
}

// next reads one frame, answering and skipping server PINGs and INFOs.
func (r *rawSession) next(d time.Duration) (frame, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return frame{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return frame{line: line}, nil
		}
		f := frame{op: strings.ToUpper(fields[0]), line: line}
		switch f.op {
		case "PING":
			_, _ = io.WriteString(r.c, "PONG\r\n")
			continue
		case "INFO":
			if r.gotInfo {
				continue // a later INFO (e.g. a cluster update): not part of the answer
			}
			r.gotInfo = true
		case "MSG", "HMSG":
			return r.readMsg(f, fields)
		}
		return f, nil
	}
}

func (r *rawSession) readMsg(f frame, fields []string) (frame, error) {
	hdrLen, total := 0, 0
	var err error
	switch {
	case f.op == "MSG" && (len(fields) == 4 || len(fields) == 5):
		f.subject, f.sid = fields[1], fields[2]
		if len(fields) == 5 {
			f.reply = fields[3]
		}
		total, err = strconv.Atoi(fields[len(fields)-1])
	case f.op == "HMSG" && (len(fields) == 5 || len(fields) == 6):
		f.subject, f.sid = fields[1], fields[2]
		if len(fields) == 6 {
			f.reply = fields[3]
		}
		hdrLen, err = strconv.Atoi(fields[len(fields)-2])
		if err == nil {
			total, err = strconv.Atoi(fields[len(fields)-1])
		}
	default:
		return f, fmt.Errorf("malformed %s line %q", f.op, f.line)
	}
	if err != nil || hdrLen > total {
		return f, fmt.Errorf("malformed %s line %q", f.op, f.line)
	}
	buf := make([]byte, total+2)
	if _, err := io.ReadFull(r.br, buf); err != nil {
		return f, err
	}
	if string(buf[total:]) != "\r\n" {
		return f, fmt.Errorf("%s payload not followed by CRLF: %q", f.op, buf)
	}
	f.hdr, f.body = buf[:hdrLen], buf[hdrLen:total]
	return f, nil
}

// runCase plays a case on a fresh connection to tg and returns the
// normalised transcript.
func runCase(t *testing.T, tg *target, c jsCase) string {
	t.Helper()
	r := dialRaw(t, tg.addr())
	var out strings.Builder
	var acks []string // reply subjects of delivered messages, in order
	record := func(fs []frame) {
		for _, f := range fs {
			if f.isMsg() && strings.HasPrefix(f.reply, "$JS.ACK.") {
				acks = append(acks, f.reply)
				if n := len(strings.Split(f.reply, ".")); n != 9 {
					t.Errorf("%s: ack subject %q has %d tokens, want 9 (V1, spec §2.6)", tg.Name, f.reply, n)
				}
			}
			fmt.Fprintf(&out, "< %s\n", f)
		}
	}
	for i, s := range c.steps {
		fmt.Fprintf(&out, "> %s\n", s.desc)
		if s.quiet > 0 {
			var got []frame
			for {
				f, err := r.next(s.quiet)
				if err != nil {
					break
				}
				got = append(got, f)
			}
			record(got)
			continue
		}
		raw := strings.ReplaceAll(s.raw, "{inbox}", fmt.Sprintf("%s.%d", diffInbox, i+1))
		for n := range acks {
			raw = strings.ReplaceAll(raw, fmt.Sprintf("{ack:%d}", n+1), acks[n])
		}
		if strings.Contains(raw, "{ack:") {
			t.Fatalf("step %d (%s): refers to a delivery that did not happen; deliveries so far: %d", i+1, s.desc, len(acks))
		}
		r.write(raw)
		if s.frames == 0 {
			record(r.sync())
			continue
		}
		var got []frame
		for len(got) < s.frames {
			f, err := r.next(diffStepTimeout)
			if err != nil {
				fmt.Fprintf(&out, "! after %d of %d frames: %v\n", len(got), s.frames, err)
				t.Errorf("%s: step %d (%s): got %d of %d frames: %v", tg.Name, i+1, s.desc, len(got), s.frames, err)
				break
			}
			got = append(got, f)
		}
		record(got)
	}
	fmt.Fprintf(&out, "> (end)\n")
	for {
		f, err := r.next(diffQuiet)
		if err != nil {
			break
		}
		record([]frame{f})
	}
	return out.String()
}

func goldenPath(name string) string { return filepath.Join("testdata", "jsdiff", name+".txt") }

func readGolden(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with STRATA_JS_TARGETS=%s and -jsdiff.update to record it)", err, refName)
	}
	return string(b)
}

// TestJSDiff runs every case on every target and compares transcripts.
func TestJSDiff(t *testing.T) {
	for _, c := range jsCases() {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{} // transcripts of the targets that ran cleanly
			forEachTarget(t, func(t *testing.T, tg *target) {
				tr := runCase(t, tg, c)
				if t.Failed() {
					t.Logf("%s transcript:\n%s", tg.Name, tr)
					return
				}
				got[tg.Name] = tr
				if *dumpDiff != "" {
					if err := os.MkdirAll(*dumpDiff, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(*dumpDiff, c.name+"."+tg.Name+".txt"), []byte(tr), 0o644); err != nil {
						t.Error(err)
					}
				}
			})
			golden := goldenPath(c.name)
			if ref, ok := got[refName]; ok {
				if *updateDiff {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, []byte(ref), 0o644); err != nil {
						t.Fatal(err)
					}
				} else if want := readGolden(t, golden); ref != want {
					t.Errorf("the reference's transcript differs from %s (the recorded expectation; -jsdiff.update rewrites it):\n%s\nwhole transcript:\n%s", golden, firstDiff(ref, want), ref)
				}
			}
			ours, ok := got[strataName]
			if !ok {
				return
			}
			want, wantFrom := got[refName], refName+" (this run)"
			if want == "" {
				want, wantFrom = readGolden(t, golden), golden
			}
			if c.diverges != "" {
				alt := filepath.Join("testdata", "jsdiff", c.name+".strata.txt")
				t.Logf("deliberate difference: %s", c.diverges)
				if want == ours {
					t.Errorf("strata's transcript equals %s: the case no longer diverges; drop diverges and %s", wantFrom, alt)
				} else {
					t.Logf("how it differs from %s:\n%s", wantFrom, firstDiff(ours, want))
				}
				if *updateDiff {
					if err := os.WriteFile(alt, []byte(ours), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, wantFrom = readGolden(t, alt), alt
			}
			if ours != want {
				t.Errorf("strata's transcript differs from %s:\n%s\nwhole transcript:\n%s", wantFrom, firstDiff(ours, want), ours)
			}
		})
	}
}

// firstDiff shows where two transcripts first differ, with the steps
// around it.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	from := max(0, i-6)
	part := func(lines []string) string {
		return strings.Join(lines[min(from, len(lines)):min(i+4, len(lines))], "\n")
	}
	return fmt.Sprintf("first difference at line %d\n--- got:\n%s\n--- want:\n%s", i+1, part(g), part(w))
}
