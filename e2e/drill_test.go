package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/drill"
	"github.com/stratamesh/strata/internal/meshfile"
)

// TestDrill runs the drill scenarios on the default mesh of `strata up`.
func TestDrill(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	up := startUp(t, dataDir)
	waitAlive(t, up, "the default mesh alive")
	drillScenario(t, up, dataDir)
}

// drillScenario runs `strata drill failover` on us-east of a running
// default mesh in kill and freeze mode (through up's fault socket) and
// in freeze mode through hook commands (SIGSTOP/SIGCONT of the region's
// node processes from mesh.json): each must report lost 0 and RPO and RTO
// within the thresholds it was given, in JSON that parses.
func drillScenario(t *testing.T, up *upProcess, dataDir string) {
	thresholds := []string{"--max-rto", "15s", "--max-rpo", "3s", "--max-lost", "0"}
	common := []string{"drill", "failover", "--data-dir", dataDir, "--region", "us-east", "--load", "40/s",
		"--warmup", "2s", "--for", "3s", "--catch-up-timeout", "90s", "--json"}
	run := func(t *testing.T, extra ...string) drill.Report {
		t.Helper()
		start := time.Now()
		out, errOut, code := strataLong(t, 4*time.Minute, append(append(append([]string{}, common...), thresholds...), extra...)...)
		t.Logf("drill %v: %v, exit %d", extra, time.Since(start).Round(time.Millisecond), code)
		var rep struct {
			drill.Report
			Violations []drill.Violation `json:"violations"`
			Pass       bool              `json:"pass"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("drill --json is not JSON (%v); exit %d\nstdout: %s\nstderr: %s", err, code, out, errOut)
		}
		t.Logf("RPO %d msgs %.3fs, RTO publish %v consume %v, lost %d, duplicates %+v, catch-up %v",
			rep.RPO.Msgs, rep.RPO.S, fptr(rep.RTO.PublishS), fptr(rep.RTO.ConsumeS), rep.Lost, rep.Duplicates, fptr(rep.CatchUpS))
		if code != 0 || !rep.Pass || len(rep.Violations) != 0 {
			t.Fatalf("drill failed: exit %d, violations %v\nstderr: %s", code, rep.Violations, errOut)
		}
		if rep.Lost != 0 || !rep.CaughtUp || rep.RPO.S > 3 || rep.RTO.PublishS == nil || *rep.RTO.PublishS > 15 ||
			rep.RTO.ConsumeS == nil || *rep.RTO.ConsumeS > 15 {
			t.Fatalf("report outside the thresholds passed: %+v", rep.Report)
		}
		if rep.Published.InRegion < 20 || rep.Published.InSurvivors < 20 || rep.Survivor != "eu-west" {
			t.Fatalf("the drill's clients did not run in both regions: %+v", rep.Published)
		}
		return rep.Report
	}
	t.Run("kill", func(t *testing.T) { run(t, "--mode", "kill") })
	t.Run("freeze", func(t *testing.T) { run(t, "--mode", "freeze") })
	t.Run("freeze-hooks", func(t *testing.T) {
		mf, err := meshfile.Read(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		var pids []string
		for _, r := range mf.Regions {
			if r.Name == "us-east" {
				for _, n := range r.Nodes {
					pids = append(pids, strconv.Itoa(n.PID))
				}
			}
		}
		if len(pids) == 0 {
			t.Fatal("no us-east node in mesh.json")
		}
		list := strings.Join(pids, " ")
		t.Cleanup(func() { _ = exec.Command("sh", "-c", "kill -CONT "+list).Run() })
		rep := run(t, "--cut-cmd", "kill -STOP "+list+" && test {region} = us-east", "--heal-cmd", "kill -CONT "+list)
		if rep.Mode != "hook" {
			t.Fatalf("mode %q, want hook", rep.Mode)
		}
	})
}

func fptr(p *float64) string {
	if p == nil {
		return "never"
	}
	return fmt.Sprintf("%.3fs", *p)
}

// strataLong runs a strata command for up to limit.
func strataLong(t *testing.T, limit time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("strata %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}
