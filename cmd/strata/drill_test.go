package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/drill"
	"github.com/stratamesh/strata/internal/harness"
)

// runStrata runs the root command with args and returns its error.
func runStrata(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestDrillFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--region is required"},
		{[]string{"--region", "us east"}, `--region "us east"`},
		{[]string{"--region", "a", "--for", "ten"}, `invalid argument "ten" for "--for" flag`},
		{[]string{"--region", "a", "--for", "0s"}, "--for 0s: want more than 0"},
		{[]string{"--region", "a", "--for", "2h"}, "--for 2h0m0s: want more than 0 and at most 1h0m0s"},
		{[]string{"--region", "a", "--warmup", "-1s"}, "--warmup -1s"},
		{[]string{"--region", "a", "--max-rto", "5"}, `invalid argument "5" for "--max-rto" flag`},
		{[]string{"--region", "a", "--max-rto", "-5s"}, "--max-rto -5s: want 0 or more"},
		{[]string{"--region", "a", "--max-rpo-msgs", "-1"}, "--max-rpo-msgs -1"},
		{[]string{"--region", "a", "--max-lost", "x"}, `invalid argument "x" for "--max-lost" flag`},
		{[]string{"--region", "a", "--load", "fast"}, `--load: drill: bad rate "fast"`},
		{[]string{"--region", "a", "--load", "10/d"}, `unit "d"`},
		{[]string{"--region", "a", "--mode", "nuke"}, `--mode "nuke": want kill, freeze or partition`},
		{[]string{"--region", "a", "--survivor", "a"}, "--survivor a is the region cut"},
		{[]string{"--region", "a", "--cut-cmd", "true"}, "--cut-cmd and --heal-cmd go together"},
		{[]string{"--region", "a", "--namespace", "demo"}, `--namespace "demo"`},
		{[]string{"--region", "a", "--nats", "a=http://h:1"}, `bad --nats "a=http://h:1"`},
		{[]string{"--region", "a", "--nats", "a=h:1"}, "--nats needs --namespace"},
		{[]string{"--region", "a", "--load", "10/h", "--for", "2s"}, "--load 10/h: drill: --load too low: 0.003 msgs/s plans 0.008 messages in the 3s warmup and 0.006 in the 2s outage; a drill needs at least 5 in each: give --load 2.5/s or more"},
		{[]string{"--region", "a", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"--region", "a", "extra"}, `unknown command "extra"`},
		{[]string{"--region", "a", "--survivor", "mars", "--namespace", "demo/events", "--nats", "a=h:1", "--nats", "b=h:2"},
			"--survivor mars: unknown region mars (regions: a, b)"},
		{[]string{"--region", "c", "--namespace", "demo/events", "--nats", "a=h:1", "--nats", "b=h:2"},
			"--region c: unknown region c (regions: a, b)"},
	} {
		_, err := runStrata(t, append([]string{"drill", "failover"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v; want %q", c.args, err, c.want)
		}
		// Bad arguments exit 2, apart from a missed threshold's 1.
		var ce codedError
		if !errors.As(err, &ce) || ce.code != 2 {
			t.Errorf("%v: error %v is not exit status 2", c.args, err)
		}
	}
}

func TestDrillThresholdsOnlyWhenGiven(t *testing.T) {
	f := &drillFlags{}
	cmd := drillFailoverCmd(f)
	if err := cmd.ParseFlags([]string{"--region", "a", "--max-rto", "5s", "--max-rpo-msgs", "0"}); err != nil {
		t.Fatal(err)
	}
	th, err := f.thresholds(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if th.MaxRTO == nil || *th.MaxRTO != 5*time.Second || th.MaxRPOMsgs == nil || *th.MaxRPOMsgs != 0 {
		t.Fatalf("given thresholds missing: %+v", th)
	}
	if th.MaxRPO != nil || th.MaxDups != nil || th.MaxCatchUp != nil || th.MaxLost != 0 {
		t.Fatalf("thresholds not given are set: %+v", th)
	}
}

func TestDrillReportJSON(t *testing.T) {
	r := drill.Report{Region: "a", Survivor: "b", Regions: []string{"a", "b"}, Mode: "kill"}
	var b bytes.Buffer
	if err := writeDrillReport(&b, true, r, nil); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"region", "survivor", "rpo", "rto", "lost", "duplicates", "catch_up_s", "violations", "pass"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b.String())
		}
	}
	if got["pass"] != true || len(got["violations"].([]any)) != 0 {
		t.Fatalf("pass/violations: %s", b.String())
	}
}

// TestDrillNATSThroughFaultSocket: --nats without the hooks takes its
// faults from the fault socket in --data-dir (a harness serving it, as
// an e2e test's namespaced mesh does); the mesh's regions come from the
// socket's node list, so a --region it has no node in is refused before
// any client runs, and without a socket the error says what is missing.
func TestDrillNATSThroughFaultSocket(t *testing.T) {
	args := func(dir string) []string {
		return []string{"drill", "failover", "--region", "b", "--mode", "partition", "--namespace", "demo/geo",
			"--nats", "a=nats://127.0.0.1:1", "--nats", "b=nats://127.0.0.1:2", "--data-dir", dir}
	}
	if _, err := runStrata(t, args(t.TempDir())...); err == nil || !strings.Contains(err.Error(), "no fault socket") {
		t.Fatalf("--nats without hooks or socket: %v", err)
	}
	dir := t.TempDir()
	h := harness.New(harness.Config{})
	defer h.Close()
	ln, err := harness.ListenSocket(filepath.Join(dir, harness.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- harness.ServeListener(ctx, h, ln) }()
	defer func() { cancel(); <-served }()
	_, err = runStrata(t, args(dir)...)
	if err == nil || !strings.Contains(err.Error(), "--region b: the fault socket's mesh has no node in it") {
		t.Fatalf("--nats with a socket whose mesh lacks b: %v", err)
	}
}
