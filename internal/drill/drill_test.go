package drill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// script is a drill: 10 msgs/s in r1 for 2 s (ids m0..m19, acked at
// 100 ms steps from 100 ms), cut at 2000 ms, the survivor r2 had up to
// m16 at the cut; producers acked again in r2 at 2600 ms (m20..m29),
// the consumer delivered m0..m14 in r1 and, in r2, m13, m14 again then
// m15.. from 2900 ms; healed at 5000 ms, caught up at 6500 ms.
func script() Log {
	l := Log{
		Region: "r1", Survivor: "r2", Regions: []string{"r1", "r2", "r3"}, Mode: "kill",
		Load: 10, SyncInterval: time.Second,
		Start: at(0), Cut: at(2000), Healed: at(5000), CaughtUp: at(6500),
		Final: map[string][]string{},
	}
	var all []string
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("m%d", i)
		l.Acks = append(l.Acks, Ack{ID: id, Region: "r1", At: at(100 * (i + 1))})
		if i <= 16 {
			l.SurvivorAtCut = append(l.SurvivorAtCut, id)
		}
		all = append(all, id)
	}
	for i := 20; i < 30; i++ {
		id := fmt.Sprintf("m%d", i)
		l.Acks = append(l.Acks, Ack{ID: id, Region: "r2", At: at(2600 + 100*(i-20))})
		all = append(all, id)
	}
	for i := 0; i < 15; i++ {
		l.Deliveries = append(l.Deliveries, Delivery{ID: fmt.Sprintf("m%d", i), Region: "r1", At: at(130 * (i + 1))})
	}
	for i := 13; i < 30; i++ {
		l.Deliveries = append(l.Deliveries, Delivery{ID: fmt.Sprintf("m%d", i), Region: "r2", At: at(2900 + 10*(i-13))})
	}
	for _, r := range l.Regions {
		l.Final[r] = all
	}
	return l
}

func TestAnalyzeScript(t *testing.T) {
	r := Analyze(script())
	if r.Published.Total != 30 || r.Published.InRegion != 20 || r.Published.InSurvivors != 10 {
		t.Fatalf("published %+v", r.Published)
	}
	// 20 acks from the start (0 ms) to the cut at 2000 ms: 20 / 2 s, the rate asked.
	if got := r.Published.RatePerS; got != 10 || r.LoadShort || len(r.Warnings) != 0 {
		t.Fatalf("rate %v short %v %q, want 10/s, not short", got, r.LoadShort, r.Warnings)
	}
	if r.RPO.Msgs != 3 || r.RPO.OldestAgeS != 0.2 { // m17 m18 m19; m17 acked at 1800 ms
		t.Fatalf("RPO %+v, want 3 msgs, oldest 0.2s", r.RPO)
	}
	if want := 3 / r.Published.RatePerS; r.RPO.S != want {
		t.Fatalf("RPO seconds %v, want %v", r.RPO.S, want)
	}
	if *r.RTO.PublishS != 0.6 || *r.RTO.ConsumeS != 0.9 {
		t.Fatalf("RTO %v %v, want 0.6 0.9", *r.RTO.PublishS, *r.RTO.ConsumeS)
	}
	if r.Lost != 0 || !r.CaughtUp || *r.CatchUpS != 1.5 || r.OutageS != 3 {
		t.Fatalf("lost %d caught up %v %v outage %v", r.Lost, r.CaughtUp, *r.CatchUpS, r.OutageS)
	}
	d := r.Duplicates
	// 15 deliveries from 130 ms to 2000 ms; bound ceil(15/1.87 × 1 s) + 1 = 10.
	if d.Delivered != 2 || d.Redeliveries != 2 || d.StoredTwice != 0 || d.Bound != 10 || !d.WithinBound {
		t.Fatalf("duplicates %+v", d)
	}
	if v := Check(r, Thresholds{}); len(v) != 0 {
		t.Fatalf("violations %v", v)
	}
}

func TestAnalyzeLostAndStoredTwice(t *testing.T) {
	l := script()
	l.Final["r3"] = l.Final["r3"][:25]                                  // r3 lacks m25..m29
	l.Final["r2"] = append(append([]string{}, l.Final["r2"]...), "m19") // retried in r2: two copies
	l.Deliveries = append(l.Deliveries, Delivery{ID: "m19", Region: "r2", At: at(5200)})
	r := Analyze(l)
	if r.Lost != 5 || r.MissingByRegion["r3"] != 5 || len(r.MissingByRegion) != 1 || r.LostIDs[0] != "m25" {
		t.Fatalf("lost %d %v %v", r.Lost, r.MissingByRegion, r.LostIDs)
	}
	if d := r.Duplicates; d.Delivered != 3 || d.StoredTwice != 1 || d.Redeliveries != 2 {
		t.Fatalf("duplicates %+v", d)
	}
	v := Check(r, Thresholds{})
	if len(v) != 1 || v[0].Flag != "--max-lost" || !strings.Contains(v[0].Msg, "5 acknowledged messages lost") {
		t.Fatalf("violations %v", v)
	}
}

func TestAnalyzeNeverRecovered(t *testing.T) {
	l := script()
	l.Acks = l.Acks[:20]
	l.Deliveries = l.Deliveries[:15]
	l.CaughtUp = time.Time{}
	l.SurvivorAtCut = nil
	r := Analyze(l)
	if r.RTO.PublishS != nil || r.RTO.ConsumeS != nil || r.CaughtUp || r.CatchUpS != nil {
		t.Fatalf("rto %+v caught up %v", r.RTO, r.CaughtUp)
	}
	if r.RPO.Msgs != 20 || r.RPO.OldestAgeS != 1.9 {
		t.Fatalf("RPO %+v", r.RPO)
	}
	rto := 5 * time.Second
	v := Check(r, Thresholds{MaxRTO: &rto})
	var flags []string
	for _, x := range v {
		flags = append(flags, x.Flag)
	}
	// Never recovered is a failure to measure, with or without --max-rto.
	if strings.Join(flags, ",") != "measure,measure,catch-up" ||
		!strings.Contains(v[0].Msg, "producer never resumed: no publish acknowledged in r2") ||
		!strings.Contains(v[1].Msg, "consumer never resumed: no delivery in r2") {
		t.Fatalf("violations %v", v)
	}
	if v2 := Check(r, Thresholds{}); len(v2) != 3 || v2[0] != v[0] || v2[1] != v[1] {
		t.Fatalf("violations without --max-rto %v", v2)
	}
	// The JSON shows the RTOs as null.
	b, err := json.Marshal(r)
	if err != nil || !bytes.Contains(b, []byte(`"rto":{"publish_s":null,"consume_s":null}`)) {
		t.Fatalf("json %s %v", b, err)
	}
}

// TestCheckMeasure: a drill that acknowledged too few messages before
// the cut fails whatever the thresholds, and one with enough passes.
func TestCheckMeasure(t *testing.T) {
	l := script()
	l.Acks = append(l.Acks[:MinMsgs-1:MinMsgs-1], l.Acks[20:]...) // m0..m3 in r1, then r2
	r := Analyze(l)
	v := Check(r, Thresholds{})
	if len(v) != 1 || v[0].Flag != "measure" || !strings.Contains(v[0].Msg, "only 4 messages acknowledged in r1 before the cut (at least 5 needed)") {
		t.Fatalf("violations %v", v)
	}
	l = script()
	l.Acks = append(l.Acks[:MinMsgs:MinMsgs], l.Acks[20:]...)
	if v := Check(Analyze(l), Thresholds{}); len(v) != 0 {
		t.Fatalf("violations with %d acknowledged: %v", MinMsgs, v)
	}
}

// TestLoadShort: an achieved rate below 80 % of the asked one is flagged
// in the report (field, warning, table line) without failing the drill.
func TestLoadShort(t *testing.T) {
	l := script()
	l.Load = 12.5 // 10 achieved = 80 %: not short
	if r := Analyze(l); r.LoadShort || len(r.Warnings) != 0 {
		t.Fatalf("80%%: short %v %q", r.LoadShort, r.Warnings)
	}
	// A slow fault call: the rate is measured up to when it was made.
	l.CutBegan = at(1000) // m0..m9 acked by then: 10 in 1 s
	if r := Analyze(l); r.Published.RatePerS != 10 || r.LoadShort {
		t.Fatalf("rate to the fault call %v short %v", r.Published.RatePerS, r.LoadShort)
	}
	l.CutBegan = time.Time{}
	l.Load = 1000000
	r := Analyze(l)
	if !r.LoadShort || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "10.0 msgs/s acknowledged in r1 before the cut, 0.001% of the 1000000 msgs/s asked") {
		t.Fatalf("short %v %q", r.LoadShort, r.Warnings)
	}
	if v := Check(r, Thresholds{}); len(v) != 0 {
		t.Fatalf("violations %v", v)
	}
	var b bytes.Buffer
	_ = WriteTable(&b, r, nil)
	if !strings.Contains(b.String(), "\nWARN load: 10.0 msgs/s") || !strings.HasSuffix(b.String(), "\nPASS\n") {
		t.Fatalf("table:\n%s", b.String())
	}
	js, _ := json.Marshal(r)
	if !bytes.Contains(js, []byte(`"load_short":true,"warnings":["load: `)) {
		t.Fatalf("json %s", js)
	}
}

func TestCheckLoad(t *testing.T) {
	if err := CheckLoad(2.5, 3*time.Second, 2*time.Second); err != nil {
		t.Fatalf("5 msgs in each: %v", err)
	}
	for _, c := range []struct {
		rate        float64
		warmup, out time.Duration
		want        string
	}{
		{10.0 / 3600, 3 * time.Second, 2 * time.Second, "0.003 msgs/s plans 0.008 messages in the 3s warmup and 0.006 in the 2s outage; a drill needs at least 5 in each: give --load 2.5/s or more"},
		{2, 10 * time.Second, 2 * time.Second, "give --load 2.5/s or more"},
		{1, time.Second, 10 * time.Second, "plans 1 messages in the 1s warmup and 10 in the 10s outage"},
	} {
		err := CheckLoad(c.rate, c.warmup, c.out)
		if !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckLoad(%v, %v, %v) = %v; want %q", c.rate, c.warmup, c.out, err, c.want)
		}
	}
}

func TestRegionChecks(t *testing.T) {
	mesh := []string{"us-east", "eu-west", "ap-south"}
	if err := CheckRegion(mesh, "survivor", "eu-west"); err != nil {
		t.Fatal(err)
	}
	if err := CheckRegion(mesh, "survivor", "mars"); !errors.Is(err, ErrRegion) ||
		!strings.Contains(err.Error(), "--survivor mars: unknown region mars (regions: us-east, eu-west, ap-south)") {
		t.Fatalf("mars: %v", err)
	}
	ns := tenancy.NSName{Tenant: "demo", Namespace: "events"}
	repl := []string{"us-east", "eu-west"}
	for _, c := range []struct{ region, survivor, want, err string }{
		{"us-east", "", "eu-west", ""},
		{"eu-west", "", "us-east", ""},
		{"us-east", "eu-west", "eu-west", ""},
		{"us-east", "ap-south", "", "--survivor ap-south is not in demo/events's replication list [us-east eu-west]"},
		{"ap-south", "", "", "--region ap-south is not in demo/events's replication list [us-east eu-west]"},
		{"us-east", "us-east", "", "--survivor us-east is the region cut"},
	} {
		got, err := PickSurvivor(ns, repl, c.region, c.survivor)
		if c.err == "" && (err != nil || got != c.want) || c.err != "" && (!errors.Is(err, ErrRegion) || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("PickSurvivor(%s, %q) = %q, %v; want %q %q", c.region, c.survivor, got, err, c.want, c.err)
		}
	}
	if _, err := PickSurvivor(ns, []string{"us-east"}, "us-east", ""); err == nil || !strings.Contains(err.Error(), "replicates only to [us-east]") {
		t.Fatalf("alone: %v", err)
	}
}

func TestCheckThresholds(t *testing.T) {
	r := Analyze(script())
	msgs, dups := 2, 1
	rpo, rto, cu := 100*time.Millisecond, 700*time.Millisecond, time.Second
	v := Check(r, Thresholds{MaxRPOMsgs: &msgs, MaxRPO: &rpo, MaxRTO: &rto, MaxDups: &dups, MaxCatchUp: &cu})
	want := []string{
		"--max-rpo-msgs: RPO 3 messages > 2",
		"--max-rpo: RPO 0.300s of traffic > 100ms",
		"--max-rto: RTO consume 0.900s > 700ms",
		"--max-duplicates: 2 duplicate deliveries > 1",
		"--max-catch-up: catch-up 1.500s > 1s",
	}
	if len(v) != len(want) {
		t.Fatalf("violations %v", v)
	}
	for i := range want {
		if v[i].String() != want[i] {
			t.Errorf("violation %d: %q, want %q", i, v[i], want[i])
		}
	}
	// At the limits nothing fails.
	msgs, dups = 3, 2
	rpo, rto, cu = time.Second, 900*time.Millisecond, 1500*time.Millisecond
	if v := Check(r, Thresholds{MaxRPOMsgs: &msgs, MaxRPO: &rpo, MaxRTO: &rto, MaxDups: &dups, MaxCatchUp: &cu, WithinBound: true}); len(v) != 0 {
		t.Fatalf("violations at the limits: %v", v)
	}
}

func TestWriteTable(t *testing.T) {
	r := Analyze(script())
	var b bytes.Buffer
	if err := WriteTable(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"RPO          3 msgs = 0.300s of traffic", "at 10.0 msgs/s of 10 asked", "RTO publish  0.600s", "lost         0\n", "catch-up     1.500s", "\nPASS\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	_ = WriteTable(&b, r, []Violation{{Flag: "--max-rto", Msg: "x"}})
	if !strings.HasSuffix(b.String(), "FAIL --max-rto: x\n") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"200": 200, "200/s": 200, " 50/s ": 50, "600/m": 10, "3600/h": 1, "0.5": 0.5} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":        "want a number",
		"fast":    "want a number",
		"10/d":    `unit "d"`,
		"0":       "more than 0",
		"-5/s":    "want a number",
		"0/m":     "more than 0",
		"2000000": "at most 1000000",
		"NaN":     "want a number",
		"Inf":     "want a number",
		"10/s/s":  `unit "s/s"`,
		"1_000/s": "want a number",
	} {
		_, err := ParseRate(in)
		if !errors.Is(err, ErrRate) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParseRate(%q) = %v; want an ErrRate naming the input and %q", in, err, want)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"200", "200/s", "600/m", "1/h", "", "x/s", "1e300", "0x10/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err != nil {
			if !errors.Is(err, ErrRate) {
				t.Fatalf("%q: %v is not ErrRate", s, err)
			}
			return
		}
		if !(v > 0 && v <= 1e6) {
			t.Fatalf("%q: accepted %v", s, v)
		}
	})
}
