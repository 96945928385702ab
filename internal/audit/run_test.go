package audit

import (
	"context"
	"errors"
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
