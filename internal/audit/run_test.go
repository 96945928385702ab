package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeMesh: topic a/b/c replicated over us-east (origin of stream east)
// and eu-west; cursor positions per reading.
type fakeMesh struct {
	t        *testing.T
	copies   map[string]copyOf
	readings [][]uint64 // per reading: east's last, its cursor's position towards eu-west
	n        int
	down     string
}

func (f *fakeMesh) Topics(context.Context) ([]Topic, error) {
	return []Topic{{Name: "a/b/c", Regions: []string{"us-east", "eu-west"}}}, nil
}

func (f *fakeMesh) Replication(_ context.Context, region, _ string) (Replication, error) {
	if region == f.down {
		return Replication{}, errors.New("connection refused")
	}
	if region != "us-east" {
		return Replication{Incarnation: "inc-2"}, nil
	}
	r := f.readings[min(f.n, len(f.readings)-1)]
	f.n++
	return Replication{Incarnation: east.Incarnation, LastOriginSeq: r[0],
		Cursors: []Cursor{{Topic: "a/b/c", Region: "us-east", Remote: "eu-west", Position: r[1], LastOriginSeq: r[0]}}}, nil
}

func (f *fakeMesh) Summary(_ context.Context, region, _ string, q Request) (*Summary, error) {
	if region == f.down {
		return nil, errors.New("connection refused")
	}
	s := f.copies[region].summarize(f.t, q)
	return &s, nil
}

func run(t *testing.T, f *fakeMesh) *Report {
	t.Helper()
	slept := time.Duration(0)
	rep, err := Run(context.Background(), f, Options{Watch: 5 * time.Second, Span: 16, Sleep: func(_ context.Context, d time.Duration) error {
		slept += d
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if slept != 5*time.Second {
		t.Fatalf("slept %v between the readings", slept)
	}
	return rep
}

func TestRun(t *testing.T) {
	full := stream(east, 1, 100)
	clean := run(t, &fakeMesh{t: t, copies: map[string]copyOf{"us-east": full, "eu-west": stream(east, 1, 90)}, readings: [][]uint64{{100, 90}, {100, 100}}})
	if clean.Exit() != 0 || len(clean.Compared) != 1 || clean.Compared[0].Window != (Range{1, 90}) || clean.Compared[0].InFlight != 10 {
		t.Fatalf("clean mesh: %+v", clean)
	}

	holed := append(stream(east, 1, 40), stream(east, 42, 100)...)
	rep := run(t, &fakeMesh{t: t, copies: map[string]copyOf{"us-east": full, "eu-west": holed}, readings: [][]uint64{{100, 100}}})
	if rep.Exit() != 1 || len(rep.Findings) != 1 || rep.Findings[0].Kind != KindMissing || rep.Findings[0].Region != "eu-west" || rep.Findings[0].Ranges[0] != (Range{41, 41}) {
		t.Fatalf("missing: %+v", rep)
	}

	stuck := run(t, &fakeMesh{t: t, copies: map[string]copyOf{"us-east": full, "eu-west": stream(east, 1, 60)}, readings: [][]uint64{{90, 60}, {100, 60}}})
	if stuck.Exit() != 1 || len(stuck.Stalled) != 1 || len(stuck.Findings) != 0 {
		t.Fatalf("stalled cursor: %+v", stuck)
	}

	down := run(t, &fakeMesh{t: t, copies: map[string]copyOf{"us-east": full}, readings: [][]uint64{{100, 100}}, down: "eu-west"})
	if down.Exit() != 2 || len(down.Errors) == 0 {
		t.Fatalf("unreachable region: %+v", down)
	}
}

// frozenMesh wraps fakeMesh: region frozen never answers (blocks until
// the call's context ends), counting the calls it got.
type frozenMesh struct {
	*fakeMesh
	frozen string
	calls  int
}

func (f *frozenMesh) block(ctx context.Context) error {
	f.calls++
	<-ctx.Done()
	return ctx.Err()
}

func (f *frozenMesh) Replication(ctx context.Context, region, topic string) (Replication, error) {
	if region == f.frozen {
		return Replication{}, f.block(ctx)
	}
	return f.fakeMesh.Replication(ctx, region, topic)
}

func (f *frozenMesh) Summary(ctx context.Context, region, topic string, q Request) (*Summary, error) {
	if region == f.frozen {
		return nil, f.block(ctx)
	}
	return f.fakeMesh.Summary(ctx, region, topic, q)
}

func noSleep(context.Context, time.Duration) error { return nil }

func TestRunFrozenRegion(t *testing.T) {
	f := &frozenMesh{fakeMesh: &fakeMesh{t: t, copies: map[string]copyOf{"us-east": stream(east, 1, 100)}, readings: [][]uint64{{100, 60}, {100, 60}}}, frozen: "eu-west"}
	var lines []string
	rep, err := Run(context.Background(), f, Options{Watch: time.Second, Timeout: 20 * time.Millisecond, Span: 16, Sleep: noSleep, Progress: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	if f.calls != 1 {
		t.Fatalf("the frozen region was asked %d times, want once", f.calls)
	}
	if rep.Exit() != 2 || !rep.Incomplete() || len(rep.NoAnswer) != 1 || rep.NoAnswer[0] != "eu-west" {
		t.Fatalf("want incomplete, eu-west not answering: %+v", rep)
	}
	if len(rep.Stalled) != 0 || len(rep.Unreachable) != 1 || rep.Unreachable[0].Remote != "eu-west" || rep.Unreachable[0].Position != 60 {
		t.Fatalf("the cursor towards the frozen region is unreachable, not stalled: %+v", rep)
	}
	found := false
	for _, l := range lines {
		found = found || l == "region eu-west did not answer: context deadline exceeded"
	}
	if !found {
		t.Fatalf("progress does not name the region: %q", lines)
	}
}

func TestRunErrNoAnswer(t *testing.T) {
	m := &noAnswerMesh{fakeMesh: &fakeMesh{t: t, copies: map[string]copyOf{"us-east": stream(east, 1, 100)}, readings: [][]uint64{{100, 60}}}}
	rep, err := Run(context.Background(), m, Options{Span: 16, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	if rep.StallDetection || rep.Exit() != 2 || len(rep.NoAnswer) != 1 || len(rep.Unreachable) != 1 || m.calls != 1 {
		t.Fatalf("watch 0, eu-west not answering: %+v (asked %d times)", rep, m.calls)
	}
}

type noAnswerMesh struct {
	*fakeMesh
	calls int
}

func (f *noAnswerMesh) Replication(ctx context.Context, region, topic string) (Replication, error) {
	if region == "eu-west" {
		f.calls++
		return Replication{}, fmt.Errorf("%w: no node answered", ErrNoAnswer)
	}
	return f.fakeMesh.Replication(ctx, region, topic)
}

func TestRunStallStillStalledWhenOthersDown(t *testing.T) {
	// a stalled cursor towards a region that answers stays STALLED.
	rep, err := Run(context.Background(), &fakeMesh{t: t, copies: map[string]copyOf{"us-east": stream(east, 1, 100), "eu-west": stream(east, 1, 60)}, readings: [][]uint64{{90, 60}, {100, 60}}},
		Options{Watch: time.Second, Span: 16, Sleep: noSleep})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.StallDetection || len(rep.Stalled) != 1 || len(rep.Unreachable) != 0 || rep.Exit() != 1 {
		t.Fatalf("stalled: %+v", rep)
	}
}

func TestRunTimeRunsOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeMesh{t: t, copies: map[string]copyOf{"us-east": stream(east, 1, 100), "eu-west": stream(east, 1, 100)}, readings: [][]uint64{{100, 100}}}
	rep, err := Run(ctx, f, Options{Watch: time.Hour, Span: 16, Sleep: func(ctx context.Context, _ time.Duration) error {
		cancel()
		return ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exit() != 2 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "time ran out") {
		t.Fatalf("want incomplete, time ran out: %+v", rep)
	}
}
