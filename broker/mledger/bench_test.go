package mledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/bookietest/cluster"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
)

// BenchmarkPublish measures Publish throughput end to end: 128-byte
// messages from one publisher keeping benchInFlight publishes
// unanswered (as nats bench's async publisher does), into one topic over
// four real in-process bookies (fsync on) with E3/Qw2/Qa2. It reports
// msgs/s (answered publishes per second) and msgs/entry (the mean batch
// of the ledger entries written). origin=local is the production setting
// (Config.Region set: each record carries its origin, about 50 bytes
// more with a UUID incarnation); origin=none records none, as before
// origins. Compare runs made side by side on the same machine:
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
	name := Name{Tenant: "bench", Namespace: "ns", Topic: fmt.Sprintf("publish-%d", b.N)}
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
