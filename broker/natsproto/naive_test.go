package natsproto

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// naiveParse is an obviously-correct reference for Parse on a whole input:
// it cuts lines with strings functions and knows nothing of split reads,
// scratch buffers or early errors. It returns the calls a recorder would
// see and the error of the first bad complete op; exact is false when it
// stopped on an unfinished op or on an over-long line, where Parse may
// report a different sentinel (it looks at prefixes and positions).
func naiveParse(cfg Config, data []byte) (calls []string, err error, exact bool) {
	maxLine, maxPay := DefaultMaxControlLine, DefaultMaxPayload
	if cfg.MaxControlLine > 0 {
		maxLine = cfg.MaxControlLine
	}
	if cfg.MaxPayload > 0 {
		maxPay = cfg.MaxPayload
	}
	allowed := map[string]bool{"CONNECT": true, "PING": true, "PONG": true, "-ERR": true}
	for _, op := range strings.Fields(map[Kind]string{KindClient: "PUB HPUB SUB UNSUB +OK INFO", KindRoute: "INFO RS+ RS- RMSG"}[cfg.Kind]) {
		allowed[op] = true
	}
	headers := cfg.Headers
	s := string(data)
	isWS := func(r rune) bool { return r == ' ' || r == '\t' }
	digits := func(a string) bool { return a != "" && strings.Trim(a, "0123456789") == "" }
	size := func(a string) *big.Int {
		n, _ := new(big.Int).SetString("0"+a, 10)
		return n
	}
	b := func(x string) []byte { return []byte(x) }
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return calls, nil, false
		}
		line := strings.TrimSuffix(s[:i], "\r")
		body := s[i+1:]
		s = body
		if len(line) > maxLine {
			return calls, ErrControlLine, false
		}
		f := strings.FieldsFunc(line, isWS)
		if line == "" || isWS(rune(line[0])) {
			return calls, ErrUnknownOp, true
		}
		op := asciiUpper(f[0])
		if !allowed[op] {
			return calls, ErrUnknownOp, true
		}
		a, rest := f[1:], strings.Trim(line[len(f[0]):], " \t")
		switch {
		case (op == "PING" || op == "PONG" || op == "+OK") && len(a) == 0:
			calls = append(calls, op)
		case (op == "CONNECT" || op == "INFO") && rest != "":
			if op == "CONNECT" {
				headers = strings.Contains(rest, `"headers":true`)
			}
			calls = append(calls, op+" "+q(b(rest)))
		case op == "-ERR":
			if len(rest) >= 2 && rest[0] == '\'' && rest[len(rest)-1] == '\'' {
				rest = rest[1 : len(rest)-1]
			}
			calls = append(calls, "-ERR "+q(b(rest)))
		case op == "SUB" && (len(a) == 2 || len(a) == 3) && digits(a[len(a)-1]):
			var queue []byte
			if len(a) == 3 {
				queue = b(a[1])
			}
			calls = append(calls, "SUB "+q(b(a[0]))+" "+q(queue)+" "+q(b(a[len(a)-1])))
		case op == "UNSUB" && (len(a) == 1 || len(a) == 2) && digits(a[0]):
			max := int64(-1)
			if len(a) == 2 {
				n, err := strconv.ParseInt(a[1], 10, 64)
				if err != nil || !digits(a[1]) {
					return calls, ErrUnknownOp, true
				}
				max = n
			}
			calls = append(calls, fmt.Sprintf("UNSUB %s %d", q(b(a[0])), max))
		case (op == "RS+" || op == "RS-") && (len(a) == 1 || len(a) == 2):
			var queue []byte
			if len(a) == 2 {
				queue = b(a[1])
			}
			calls = append(calls, op+" "+q(b(a[0]))+" "+q(queue))
		case op == "PUB" || op == "HPUB" || op == "RMSG":
			if op == "HPUB" && !headers {
				return calls, ErrHeadersOff, true
			}
			m := Msg{}
			var hs, ts string
			switch {
			case op == "PUB" && len(a) == 2:
				m.Subject, ts = b(a[0]), a[1]
			case op == "PUB" && len(a) == 3:
				m.Subject, m.Reply, ts = b(a[0]), b(a[1]), a[2]
			case op == "HPUB" && len(a) == 3:
				m.Subject, hs, ts = b(a[0]), a[1], a[2]
			case op == "HPUB" && len(a) == 4:
				m.Subject, m.Reply, hs, ts = b(a[0]), b(a[1]), a[2], a[3]
			case op == "RMSG" && len(a) >= 4 && (a[1] == "-" || len(a[1]) > 1 && a[1][0] == '+'):
				m.Subject, hs, ts = b(a[0]), a[2], a[3]
				if a[1] != "-" {
					m.Reply = b(a[1][1:])
				}
				for _, x := range a[4:] {
					m.Queues = append(m.Queues, b(x))
				}
			default:
				return calls, ErrUnknownOp, true
			}
			if hs == "" && op != "PUB" || !digits(ts) || hs != "" && !digits(hs) {
				return calls, ErrUnknownOp, true
			}
			bigHdr, bigTotal := size(hs), size(ts)
			if bigHdr.Cmp(bigTotal) > 0 {
				return calls, ErrBadHeaders, true
			}
			if bigTotal.Cmp(big.NewInt(int64(maxPay))) > 0 {
				return calls, ErrMaxPayload, true
			}
			hdr, total := bigHdr.Int64(), bigTotal.Int64()
			if int64(len(body)) < total+2 {
				return calls, nil, false
			}
			if body[total:total+2] != "\r\n" {
				return calls, ErrUnknownOp, true
			}
			if hdr > 0 {
				m.Header = b(body[:hdr])
			}
			m.Payload = b(body[hdr:total])
			calls = append(calls, fmtMsg(&m))
			s = body[total+2:]
		default:
			return calls, ErrUnknownOp, true
		}
	}
	return calls, nil, true
}

// asciiUpper upper-cases ASCII letters only (strings.ToUpper would map
// 'ı' to 'I').
func asciiUpper(s string) string {
	u := []byte(s)
	for i, c := range u {
		if 'a' <= c && c <= 'z' {
			u[i] = c - ('a' - 'A')
		}
	}
	return string(u)
}

// checkNaive compares Parse on the whole input with naiveParse.
func checkNaive(t *testing.T, cfg Config, data []byte, calls []string, err error) {
	t.Helper()
	want, wantErr, exact := naiveParse(cfg, data)
	if strings.Join(calls, "\n") != strings.Join(want, "\n") || exact && sentinel(err) != sentinel(wantErr) {
		t.Fatalf("Parse: calls %q err %v\nnaive: calls %q err %v (exact %v)", calls, err, want, wantErr, exact)
	}
}

func TestNaiveAgrees(t *testing.T) {
	for _, in := range [][]byte{mixedClientStream(), []byte("PUB a 1\r\nx\r\nHPUB a 0 0\r\n\r\n")} {
		calls, err := feed(Config{}, in)
		checkNaive(t, Config{}, in, calls, err)
	}
	in := mixedRouteStream()
	calls, err := feed(Config{Kind: KindRoute}, in)
	checkNaive(t, Config{Kind: KindRoute}, in, calls, err)
}
