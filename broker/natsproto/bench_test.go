package natsproto

import (
	"math/rand/v2"
	"testing"
)

// pubStream is n PUBs (or HPUBs with a small header block) of size-byte
// payloads, as `nats bench pub` sends them.
func pubStream(n, size int, headers bool) []byte {
	var hdr []byte
	if headers {
		hdr = AppendStatusHeader(nil, 0, "", "Nats-Msg-Id", "0123456789abcdef")
	}
	payload := make([]byte, size)
	var buf []byte
	for range n {
		buf = AppendPub(buf, []byte("bench.subject.0"), nil, hdr, payload)
	}
	return buf
}

func benchParse(b *testing.B, cfg Config, chunks [][]byte, msgs int) {
	p := NewParser(cfg)
	var h nopHandler
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, c := range chunks {
			if err := p.Parse(c, h); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*msgs), "ns/msg")
}

// BenchmarkParsePub: one op is a 64 KiB-ish read holding 400 PUBs of
// 128-byte payloads, all inside the buffer (the hot path: no copies).
func BenchmarkParsePub(b *testing.B) {
	benchParse(b, Config{}, [][]byte{pubStream(400, 128, false)}, 400)
}

// BenchmarkParseHPub: the same with a 46-byte header block per message.
func BenchmarkParseHPub(b *testing.B) {
	benchParse(b, Config{Headers: true}, [][]byte{pubStream(400, 128, true)}, 400)
}

// BenchmarkParsePubSplit: the same PUBs delivered in reads of random
// length (1..4096 bytes), so ops straddle reads and go through the
// scratch buffer.
func BenchmarkParsePubSplit(b *testing.B) {
	buf := pubStream(400, 128, false)
	rng := rand.New(rand.NewPCG(7, 7))
	var chunks [][]byte
	for len(buf) > 0 {
		n := min(len(buf), 1+rng.IntN(4096))
		chunks = append(chunks, buf[:n])
		buf = buf[n:]
	}
	benchParse(b, Config{}, chunks, 400)
}

// BenchmarkParseRMsg: 400 RMSGs with a reply and a queue group.
func BenchmarkParseRMsg(b *testing.B) {
	payload := make([]byte, 128)
	var buf []byte
	for range 400 {
		buf = AppendRMsg(buf, []byte("bench.subject.0"), []byte("_INBOX.abc.1"), nil, payload, [][]byte{[]byte("workers")})
	}
	benchParse(b, Config{Kind: KindRoute}, [][]byte{buf}, 400)
}

// BenchmarkAppendMsg: encoding one 128-byte MSG into a reused buffer.
func BenchmarkAppendMsg(b *testing.B) {
	dst := make([]byte, 0, 1024)
	subj, sid, payload := []byte("bench.subject.0"), []byte("1"), make([]byte, 128)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendMsg(dst[:0], subj, sid, nil, nil, payload)
	}
}
