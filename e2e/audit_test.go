package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestAudit runs auditScenario on the default mesh (`strata up`, three
// regions) started with the audit's test hooks on.
func TestAudit(t *testing.T) {
	t.Setenv("STRATA_TEST_HOOKS", "1") // inherited by up and its nodes
	dataDir := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	up := startUp(t, dataDir)
	waitAlive(t, up, "the default mesh alive")
	auditScenario(t, up, dataDir)
	t.Logf("TestAudit: %.1fs in all", time.Since(start).Seconds())
}

// auditJSON is the part of `strata audit --json` the scenario reads.
type auditJSON struct {
	Exit     int `json:"exit"`
	Compared []struct {
		Region string `json:"region"`
	} `json:"compared"`
	Findings []struct {
		Topic  string `json:"topic"`
		Region string `json:"region"`
		Kind   string `json:"kind"`
		Origin struct {
			Region string `json:"region"`
		} `json:"origin"`
		Ranges []struct{ From, To uint64 } `json:"ranges"`
	} `json:"findings"`
	Stalled []struct {
		Second struct {
			Region   string  `json:"region"`
			Remote   string  `json:"remote"`
			Position uint64  `json:"position"`
			LagMsgs  uint64  `json:"lag_msgs"`
			LagSecs  float64 `json:"lag_seconds"`
			LastSeq  uint64  `json:"last_origin_seq"`
			TopicStr string  `json:"topic"`
		} `json:"second"`
	} `json:"stalled"`
	Errors []string `json:"errors"`
}

// auditScenario (issue 26 items 3 and 7) on a running default mesh whose
// nodes have STRATA_TEST_HOOKS=1: a replicated topic audits clean (exit
// 0); a message removed from eu-west's copy by a test hook is named
// missing there (exit 1); a replicator cursor frozen by a test hook
// (dropping its sends, reporting no lag) is reported stalled after more
// publishes (exit 1). Then lag: ap-south's brokers frozen (SIGSTOP) for
// longer than the stall time, one publish in us-east: the first reading of
// the cursor's lag is that one message, no older than it is.
func auditScenario(t *testing.T, up *upProcess, dataDir string) {
	start := time.Now()
	topic := fmt.Sprintf("demo/events/audit%d", time.Now().UnixNano()%1e6)
	subject := strings.ReplaceAll(topic, "/", ".")
	live, ok := meshStatus(t, dataDir)
	if !ok {
		t.Fatal("strata status failed")
	}
	urls, err := live.NATSURLs("us-east")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	publish := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := js.Publish(ctx, subject, fmt.Appendf(nil, "m%d", i), jetstream.WithMsgID(fmt.Sprintf("%s-%d-%d", subject, n, i)))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	runAudit := func(watch string) (auditJSON, string) {
		t.Helper()
		out, errOut, code := strata(t, "audit", "--data-dir", dataDir, "--topic", topic, "--watch", watch, "--json")
		var a auditJSON
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("audit --json (exit %d) is not JSON: %v\n%s\n%s", code, err, out, errOut)
		}
		if a.Exit != code {
			t.Fatalf("audit exited %d, its JSON says %d", code, a.Exit)
		}
		return a, out
	}
	hook := func(region, body string) {
		t.Helper()
		admin := live.Node(region, "b1").Admin
		resp, err := http.Post(admin+"/admin/v1/testhooks/topics/"+topic, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			var v any
			_ = json.NewDecoder(resp.Body).Decode(&v)
			t.Fatalf("test hook %s in %s: %d %v", body, region, resp.StatusCode, v)
		}
	}

	publish(50)
	// Replication is asynchronous: audit until both copies are compared
	// past message 25 (in-flight messages are never differences).
	testutil.Eventually(t, "audit clean with every region compared", 60*time.Second, func() bool {
		a, out := runAudit("500ms")
		if a.Exit != 0 {
			t.Fatalf("audit of a healthy topic: exit %d\n%s", a.Exit, out)
		}
		return len(a.Compared) == 2
	})
	t.Logf("clean audit at %.1fs", time.Since(start).Seconds())

	hook("eu-west", `{"action": "remove-message", "origin_region": "us-east", "origin_seq": 25}`)
	a, out := runAudit("500ms")
	if a.Exit != 1 || len(a.Findings) != 1 {
		t.Fatalf("after removing origin seq 25 in eu-west: exit %d\n%s", a.Exit, out)
	}
	if f := a.Findings[0]; f.Kind != "missing" || f.Region != "eu-west" || f.Origin.Region != "us-east" || len(f.Ranges) != 1 || f.Ranges[0].From != 25 || f.Ranges[0].To != 25 {
		t.Fatalf("finding %+v, want origin us-east seq 25 missing in eu-west", f)
	}
	text, _, code := strata(t, "audit", "--data-dir", dataDir, "--topic", topic, "--watch", "500ms")
	if code != 1 || !strings.Contains(text, "MISSING  "+topic+" origin us-east/") || !strings.Contains(text, "in eu-west: origin seqs 25\n") {
		t.Fatalf("audit text (exit %d) does not name the missing message:\n%s", code, text)
	}
	t.Logf("missing message found at %.1fs", time.Since(start).Seconds())

	hook("us-east", `{"action": "freeze-replicator", "remote": "ap-south"}`)
	defer hook("us-east", `{"action": "thaw-replicator", "remote": "ap-south"}`)
	publish(10)
	a, out = runAudit("2s")
	if a.Exit != 1 || len(a.Stalled) != 1 {
		t.Fatalf("frozen replicator: exit %d, want 1 with one stalled cursor\n%s", a.Exit, out)
	}
	if s := a.Stalled[0].Second; s.Region != "us-east" || s.Remote != "ap-south" || s.LagMsgs != 0 || s.LastSeq != 60 {
		t.Fatalf("stalled %+v, want us-east's cursor towards ap-south, reporting lag 0 at last origin seq 60", s)
	}
	t.Logf("stalled cursor found at %.1fs", time.Since(start).Seconds())
	hook("us-east", `{"action": "thaw-replicator", "remote": "ap-south"}`)
	nope := "demo/events/nope-" + fmt.Sprintf("%x", time.Now().UnixNano())
	if text, errText, code := strata(t, "audit", "--data-dir", dataDir, "--topic", nope, "--watch", "0s"); code != 2 || !strings.Contains(errText, "no such topic "+nope) {
		t.Fatalf("audit of a topic that does not exist: exit %d, want 2 naming it\n%s\n%s", code, text, errText)
	}

	lagScenario(t, live, dataDir, js, subject, topic)
	t.Logf("auditScenario: %.1fs", time.Since(start).Seconds())
}

// lagScenario: ap-south's brokers frozen longer than the stall time, one
// publish in us-east: its first lag reading is 1 message, bytes of that
// message, and no more seconds than the message's age.
func lagScenario(t *testing.T, live *meshfile.File, dataDir string, js jetstream.JetStream, subject, topic string) {
	type stats struct {
		Topic struct {
			Replication struct {
				Cursors []struct {
					Remote     string  `json:"remote"`
					LagMsgs    uint64  `json:"lag_msgs"`
					LagBytes   uint64  `json:"lag_bytes"`
					LagSeconds float64 `json:"lag_seconds"`
				} `json:"cursors"`
			} `json:"replication"`
		} `json:"topic"`
	}
	read := func() (msgs, bytes uint64, secs float64) {
		t.Helper()
		resp, err := http.Get(live.Node("us-east", "b1").Admin + "/admin/v1/topics/" + topic + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s stats
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Topic.Replication.Cursors {
			if c.Remote == "ap-south" {
				return c.LagMsgs, c.LagBytes, c.LagSeconds
			}
		}
		t.Fatalf("no cursor towards ap-south: %+v", s)
		return
	}
	testutil.Eventually(t, "ap-south caught up after the thaw", 60*time.Second, func() bool {
		m, _, _ := read()
		return m == 0
	})
	var pids []int
	for _, id := range []string{"b1", "b2"} {
		pid := live.Node("ap-south", id).PID
		if pid == 0 {
			t.Fatalf("no pid for ap-south %s in mesh.json", id)
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	frozen := time.Now()
	const idle = 3 * time.Second // over the idle of the bug: lag used to read "now - last success"
	testutil.Eventually(t, "idle with ap-south frozen", 10*time.Second, func() bool { return time.Since(frozen) > idle })
	before := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := js.Publish(ctx, subject, []byte("one after the idle"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	m, b, s := read()
	age := time.Since(before).Seconds()
	t.Logf("first lag reading: %d msgs %d bytes %.3fs; the message is at most %.3fs old", m, b, s, age)
	if m != 1 || b == 0 || s > age+0.1 {
		t.Fatalf("lag %d msgs %d bytes %.3fs; want 1 msg, its bytes, at most %.3fs", m, b, s, age)
	}
	// the audit with ap-south frozen: incomplete within seconds, its
	// cursor unreachable, not stalled. The message hidden in eu-west
	// earlier is still missing there: a difference, so the exit is 1 (a
	// difference outranks incomplete), with eu-west's MISSING the only
	// finding.
	out, errOut, code := strata(t, "audit", "--data-dir", dataDir, "--topic", topic, "--watch", "500ms", "--timeout", "1s", "--json")
	var a struct {
		Exit     int      `json:"exit"`
		NoAnswer []string `json:"no_answer"`
		Stalled  []any    `json:"stalled"`
		Findings []struct {
			Region string `json:"region"`
			Kind   string `json:"kind"`
		} `json:"findings"`
		Unreachable []struct {
			Remote string `json:"remote"`
		} `json:"unreachable"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("audit --json (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	missingInEU := len(a.Findings) == 1 && a.Findings[0].Region == "eu-west" && a.Findings[0].Kind == "missing"
	if code != 1 || a.Exit != 1 || !missingInEU || len(a.NoAnswer) != 1 || a.NoAnswer[0] != "ap-south" || len(a.Stalled) != 0 || len(a.Unreachable) != 1 || a.Unreachable[0].Remote != "ap-south" {
		t.Fatalf("audit with ap-south frozen: exit %d, want 1 (eu-west's hidden message), ap-south not answering, its cursor unreachable\n%s\n%s", code, out, errOut)
	}
}
