package mledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/bookietest/cluster"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/tenancy"
)

// BenchmarkPublish measures Publish throughput end to end: 128-byte
// messages from one publisher keeping benchInFlight publishes
// unanswered (as nats bench's async publisher does), into one topic over
// four real in-process bookies (fsync on) with E3/Qw2/Qa2. It reports
// msgs/s (answered publishes per second) and msgs/entry (the mean batch
// of the ledger entries written). origin=local is the production setting
// (Config.Region set: each record carries its origin, compact: the
// origin sequence alone, 1 to 5 bytes; TestRecordSizes); origin=none
// records none, as before origins. Compare runs made side by side on the
// same machine:
//
//	go test ./broker/mledger -run '^$' -bench BenchmarkPublish -benchtime 100000x -count 3
func BenchmarkPublish(b *testing.B) {
	b.Run("origin=local", func(b *testing.B) { benchPublish(b, "bench-region") })
	b.Run("origin=none", func(b *testing.B) { benchPublish(b, "") })
}

func benchPublish(b *testing.B, region string) {
	const benchInFlight = 4096
	st := metatest.OpenStore(b)
	bk := cluster.Start(b, st, 4)
	lc := bk.Client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name := tenancy.Name{Tenant: "bench", Namespace: "ns", Topic: fmt.Sprintf("publish-%d", b.N)}
	if err := Create(ctx, st, name, []byte(`{}`), time.Now()); err != nil {
		b.Fatal(err)
	}
	owner := "owners/" + name.String()
	rev, err := st.Put(ctx, owner, []byte("bench"))
	if err != nil {
		b.Fatal(err)
	}
	ml, err := Open(ctx, Config{
		Store: st, Ledgers: lc, Ensemble: 3, WriteQuorum: 2, AckQuorum: 2, Region: region,
		Cond: meta.Cond{Key: owner, ModRevision: rev},
	}, name)
	if err != nil {
		b.Fatal(err)
	}
	defer ml.Drop()
	data := make([]byte, 128)
	window := make(chan struct{}, benchInFlight)
	failed := make(chan error, 1)
	done := func(_ PubResult, err error) {
		if err != nil {
			select {
			case failed <- err:
			default:
			}
		}
		<-window
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		window <- struct{}{}
		ml.Publish("bench.subject", nil, data, PublishOptions{}, done)
	}
	for range benchInFlight { // wait for every answer
		window <- struct{}{}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-failed:
		b.Fatal(err)
	default:
	}
	if st := ml.State(); st.LastSeq != uint64(b.N) || region != "" && st.LastOriginSeq != uint64(b.N) {
		b.Fatalf("last seq %d, last origin seq %d after %d publishes", st.LastSeq, st.LastOriginSeq, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	ml.mu.Lock()
	var entries int64
	for _, l := range ml.core.ledgers {
		entries += l.Entries
	}
	ml.mu.Unlock()
	b.ReportMetric(float64(b.N)/float64(max(entries, 1)), "msgs/entry")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkEntryCodec measures encoding and decoding an entry of 100
// local messages of 128 bytes (as BenchmarkPublish publishes them: a
// UUID incarnation) with full origins (origin=full: as every local
// message was written before compact records) and compact ones
// (origin=compact), reporting the record size (B/record):
//
//	go test ./broker/mledger -run '^$' -bench BenchmarkEntryCodec -benchmem -count 3
func BenchmarkEntryCodec(b *testing.B) {
	l := Local{Region: "bench-region", Incarnation: "6f1c2b0e-8d9a-4c3b-a1e2-f3d4c5b6a798"}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	msgs := make([]Message, 100)
	for i := range msgs {
		t := now.Add(time.Duration(i) * time.Microsecond)
		msgs[i] = Message{Seq: 1_000_001 + uint64(i), Subject: "bench.subject", Data: make([]byte, 128), Time: t,
			Origin: Origin{Region: l.Region, Incarnation: l.Incarnation, Seq: 1_000_001 + uint64(i), Time: t}}
	}
	for _, c := range []struct {
		name  string
		local Local
	}{{"origin=full", Local{}}, {"origin=compact", l}} {
		entry := EncodeBatch(nil, msgs, c.local)
		perRecord := float64(len(entry)-batchHeaderSize) / float64(len(msgs))
		b.Run(c.name+"/encode", func(b *testing.B) {
			buf := make([]byte, 0, len(entry))
			b.SetBytes(int64(len(entry)))
			for range b.N {
				buf = EncodeBatch(buf[:0], msgs, c.local)
			}
			b.ReportMetric(perRecord, "B/record")
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(entry)))
			for range b.N {
				if _, err := DecodeBatch(entry, l); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(perRecord, "B/record")
		})
	}
}
