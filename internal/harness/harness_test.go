package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/internal/testutil"
)

func TestMain(m *testing.M) {
	if os.Getenv("HARNESS_FAKE_NODE") == "1" {
		fakeNodeMain()
	}
	goleak.VerifyTestMain(m)
}

// exits records OnExit calls.
type exits struct {
	mu  sync.Mutex
	got map[string][]string // name → "intended|crash: how"
}

func (e *exits) onExit(n *Node, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.got == nil {
		e.got = map[string][]string{}
	}
	kind := "crash"
	if n.Intended() {
		kind = "intended"
	}
	e.got[n.Name()] = append(e.got[n.Name()], kind+": "+describeExit(err))
}

func (e *exits) of(name string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got[name])
}

// fakeHarness is a harness over fake nodes; dir receives their logs and
// the starts file.
func fakeHarness(t *testing.T, cfg Config) (*Harness, string, *exits) {
	t.Helper()
	t.Setenv("HARNESS_FAKE_NODE", "1")
	dir := t.TempDir()
	t.Setenv("HARNESS_FAKE_DIR", dir)
	ex := &exits{}
	if cfg.OnExit == nil {
		cfg.OnExit = ex.onExit
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 20 * time.Second
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 5 * time.Second
	}
	h := New(cfg)
	t.Cleanup(h.Close)
	return h, dir, ex
}

func fakeSpec(t *testing.T, dir, region, id, role string, env ...string) NodeSpec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return NodeSpec{Region: region, ID: id, Role: role, Exe: exe,
		Args: []string{"--region", region, "--id", id, "--role", role},
		Env:  env, Log: filepath.Join(dir, region+"-"+id+".log")}
}

// starts is the starts file: one "region/id role pid" line per start.
func starts(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "starts"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// procState is the one-letter state in /proc/pid/stat (R, S, T, Z …).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func TestStartParallelReportsAndClose(t *testing.T) {
	ready := map[string]int{}
	var mu sync.Mutex
	h, dir, ex := fakeHarness(t, Config{OnReady: func(n *Node) { mu.Lock(); ready[n.Name()]++; mu.Unlock() }})
	specs := []NodeSpec{
		fakeSpec(t, dir, "r1", "m1", RoleMeta),
		fakeSpec(t, dir, "r1", "k1", RoleBookie),
		fakeSpec(t, dir, "r1", "b1", RoleBroker, "EXTRA=1"),
		fakeSpec(t, dir, "r2", "b1", RoleBroker),
	}
	nodes, err := h.StartParallel(specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		rep := n.Report()
		if rep.ID != specs[i].ID || rep.Role != specs[i].Role || rep.PID != n.PID() || rep.Admin == "" {
			t.Errorf("%s: report %+v (pid %d)", n.Name(), rep, n.PID())
		}
		if n.State() != StateRunning {
			t.Errorf("%s: state %s", n.Name(), n.State())
		}
	}
	if got := nodes[0].Report().Etcd; got != "etcd-r1/m1" {
		t.Errorf("meta's etcd = %q", got)
	}
	if got := nodes[2].Report().SerfWAN; got != "wan-r1/b1" {
		t.Errorf("broker's serf wan = %q", got)
	}
	if n, ok := h.Node("r2", "b1"); !ok || n != nodes[3] {
		t.Errorf("Node(r2, b1) = %v, %v", n, ok)
	}
	if _, ok := h.Node("r2", "b9"); ok {
		t.Error("Node(r2, b9) found")
	}
	if got := len(h.Nodes()); got != 4 {
		t.Errorf("Nodes() has %d", got)
	}
	if _, err := h.Start(specs[1]); !errors.Is(err, ErrDuplicate) {
		t.Errorf("second start of a running node: %v, want ErrDuplicate", err)
	}
	h.Close()
	h.Close() // idempotent
	for _, n := range nodes {
		if done, err := n.Exited(); !done || err != nil {
			t.Errorf("%s after Close: exited %v, %v (want exit status 0 on SIGTERM)", n.Name(), done, err)
		}
		if got := ex.of(n.Name()); !slices.Equal(got, []string{"intended: exit status 0"}) {
			t.Errorf("%s exits %v", n.Name(), got)
		}
		if ready[n.Name()] != 1 {
			t.Errorf("%s: OnReady called %d times", n.Name(), ready[n.Name()])
		}
	}
	log, _ := os.ReadFile(specs[0].Log)
	if !strings.Contains(string(log), "fake node starting r1/m1") || !strings.Contains(string(log), "after the report") {
		t.Errorf("log lacks stderr or the stdout after the report:\n%s", log)
	}
	if _, err := h.Start(specs[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
}

func TestStartFailuresSayWhy(t *testing.T) {
	h, dir, _ := fakeHarness(t, Config{StartTimeout: 500 * time.Millisecond})
	for _, c := range []struct{ mode, want string }{
		{"fail", "exited before it was ready (exit status 1)"},
		{"garbage", `printed no ready report (harness: ready report is not JSON`},
		{"noid", "ready report lacks the node's id or role"},
		{"silent", "was not ready within 500ms"},
	} {
		s := fakeSpec(t, dir, "r", c.mode, RoleBookie, "HARNESS_FAKE_MODE="+c.mode)
		_, err := h.Start(s)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "r/"+c.mode) {
			t.Errorf("%s: %v, want it to name the node and say %q", c.mode, err, c.want)
		}
		if c.mode == "fail" && !strings.Contains(err.Error(), "fake node: cannot start r/fail") {
			t.Errorf("fail: error lacks the log tail: %v", err)
		}
		if _, ok := h.Node("r", c.mode); ok {
			t.Errorf("%s: a node that never became ready is listed", c.mode)
		}
	}
	if _, err := h.Start(NodeSpec{Region: "r"}); err == nil || !strings.Contains(err.Error(), "needs Region, ID and Exe") {
		t.Errorf("empty spec: %v", err)
	}
	if len(h.Nodes()) != 0 {
		t.Errorf("nodes listed: %v", h.NodeInfos())
	}
}

func TestNodeFaults(t *testing.T) {
	h, dir, ex := fakeHarness(t, Config{})
	n, err := h.Start(fakeSpec(t, dir, "r", "b1", RoleBroker))
	if err != nil {
		t.Fatal(err)
	}
	pid := n.PID()
	if err := h.Freeze("r", "b1"); err != nil {
		t.Fatal(err)
	}
	if n.State() != StateFrozen || procState(t, pid) != "T" {
		t.Errorf("after Freeze: state %s, /proc %s", n.State(), procState(t, pid))
	}
	if err := h.Thaw("r", "b1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "thawed process leaves state T", 10*time.Second, func() bool { return procState(t, pid) != "T" })
	if n.State() != StateRunning {
		t.Errorf("after Thaw: state %s", n.State())
	}
	if err := h.Freeze("r", "b1"); err != nil {
		t.Fatal(err)
	}
	if err := h.Kill("r", "b1"); err != nil { // SIGKILL reaches a frozen process
		t.Fatal(err)
	}
	if done, err := n.Exited(); !done || err == nil || n.State() != StateExited || !n.Intended() {
		t.Fatalf("after Kill: exited %v %v, state %s, intended %v", done, err, n.State(), n.Intended())
	}
	if err := h.Kill("r", "b1"); err != nil {
		t.Errorf("Kill of an exited node: %v", err)
	}
	for _, f := range []func(string, string) error{h.Freeze, h.Thaw} {
		if err := f("r", "b1"); !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "r/b1") {
			t.Errorf("freeze/thaw of an exited node: %v, want ErrNotRunning naming it", err)
		}
	}
	if err := h.Restart("r", "b1"); err != nil {
		t.Fatal(err)
	}
	pid2 := n.PID()
	if pid2 == pid || n.State() != StateRunning || n.Intended() || n.Report().PID != pid2 {
		t.Errorf("after Restart: pid %d (was %d), state %s, intended %v, report pid %d", pid2, pid, n.State(), n.Intended(), n.Report().PID)
	}
	if err := h.Restart("r", "b1"); err != nil { // a live node: killed first
		t.Fatal(err)
	}
	if n.PID() == pid2 {
		t.Error("Restart of a live node kept its process")
	}
	if got := len(starts(t, dir)); got != 3 {
		t.Errorf("%d starts, want 3", got)
	}
	want := []string{"intended: signal: killed", "intended: signal: killed"}
	if got := ex.of("r/b1"); !slices.Equal(got, want) {
		t.Errorf("exits %v, want %v", got, want)
	}
	// A death the harness did not cause is a crash.
	pid3 := n.PID()
	if err := syscall.Kill(pid3, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.Done()
	if n.Intended() {
		t.Error("an outside SIGKILL is reported as intended")
	}
	testutil.Eventually(t, "OnExit sees the crash", 10*time.Second, func() bool { return len(ex.of("r/b1")) == 3 })
	if got := ex.of("r/b1")[2]; got != "crash: signal: killed" {
		t.Errorf("crash reported as %q", got)
	}
	for _, err := range []error{h.Kill("r", "nope"), h.Freeze("x", "b1"), h.Restart("", ""), h.KillRegion("x")} {
		if !errors.Is(err, ErrUnknownNode) {
			t.Errorf("unknown node: %v, want ErrUnknownNode", err)
		}
	}
}

func TestRegionFaults(t *testing.T) {
	h, dir, _ := fakeHarness(t, Config{})
	// Started in an order other than meta, bookies, brokers.
	specs := []NodeSpec{
		fakeSpec(t, dir, "r1", "b1", RoleBroker),
		fakeSpec(t, dir, "r1", "k1", RoleBookie),
		fakeSpec(t, dir, "r1", "m1", RoleMeta),
		fakeSpec(t, dir, "r1", "k2", RoleBookie),
		fakeSpec(t, dir, "r1", "b2", RoleBroker),
		fakeSpec(t, dir, "r2", "b1", RoleBroker),
	}
	for _, s := range specs {
		if _, err := h.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	other, _ := h.Node("r2", "b1")
	if err := h.FreezeRegion("r1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range h.Nodes() {
		want := StateFrozen
		if n.Spec().Region == "r2" {
			want = StateRunning
		}
		if n.State() != want {
			t.Errorf("%s after FreezeRegion(r1): %s", n.Name(), n.State())
		}
	}
	if err := h.ThawRegion("r1"); err != nil {
		t.Fatal(err)
	}
	if err := h.Kill("r1", "k2"); err != nil {
		t.Fatal(err)
	}
	if err := h.FreezeRegion("r1"); err != nil { // skips the dead k2
		t.Fatalf("FreezeRegion with one node dead: %v", err)
	}
	if err := h.RestartRegion("r1"); err != nil { // frozen and dead nodes alike
		t.Fatal(err)
	}
	lines := starts(t, dir)[len(specs):]
	var order []string
	for _, l := range lines {
		order = append(order, strings.Fields(l)[1])
	}
	if len(order) != 5 || order[0] != RoleMeta || order[1] != RoleBookie || order[2] != RoleBookie || order[3] != RoleBroker || order[4] != RoleBroker {
		t.Errorf("RestartRegion started %v, want meta, bookies, brokers", lines)
	}
	for _, n := range h.Nodes() {
		if n.State() != StateRunning {
			t.Errorf("%s after RestartRegion: %s", n.Name(), n.State())
		}
	}
	otherPID := other.PID()
	if err := h.KillRegion("r1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range h.Nodes() {
		if r := n.Spec().Region; (r == "r1") != (n.State() == StateExited) {
			t.Errorf("%s after KillRegion(r1): %s", n.Name(), n.State())
		}
	}
	if other.PID() != otherPID {
		t.Error("KillRegion(r1) touched r2")
	}
	if err := h.FreezeRegion("r1"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("FreezeRegion of a dead region: %v", err)
	}
	infos, err := h.Faults().Nodes()
	if err != nil || len(infos) != len(specs) {
		t.Fatalf("Faults().Nodes(): %v, %v", infos, err)
	}
	if i := infos[0]; i.Region != "r1" || i.ID != "b1" || i.Role != RoleBroker || i.State != StateExited || !i.Intended || i.Exit != "signal: killed" {
		t.Errorf("info %+v", i)
	}
}

type fakeLinks struct{ calls []string }

func (f *fakeLinks) Cut(a, b string) error  { f.calls = append(f.calls, "cut "+a+" "+b); return nil }
func (f *fakeLinks) Heal(a, b string) error { f.calls = append(f.calls, "heal "+a+" "+b); return nil }

func TestCutNeedsLinks(t *testing.T) {
	h := New(Config{})
	defer h.Close()
	if err := h.Cut("a", "b"); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("Cut without Links: %v", err)
	}
	if err := h.Heal("a", "b"); !errors.Is(err, ErrNoNetwork) {
		t.Errorf("Heal without Links: %v", err)
	}
	l := &fakeLinks{}
	h2 := New(Config{Links: l})
	defer h2.Close()
	if err := h2.Cut("a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := h2.Heal("a", "b"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.calls, []string{"cut a b", "heal a b"}) {
		t.Errorf("links got %v", l.calls)
	}
}

func TestParseReport(t *testing.T) {
	r, err := ParseReport([]byte(`{"id":"b1","role":"broker","pid":7,"nats":"nats://127.0.0.1:1","admin":"http://x","serf_wan":"w"}` + "\n"))
	if err != nil || r.ID != "b1" || r.PID != 7 || r.NATS != "nats://127.0.0.1:1" || r.SerfWAN != "w" {
		t.Errorf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "x", "[]", `{"id":"b1"}`, `{"role":"meta"}`, `{"id":1,"role":"meta"}`} {
		if _, err := ParseReport([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestNetnsCommand(t *testing.T) {
	s := NodeSpec{Exe: "/bin/strata", Args: []string{"--id", "b1"}, Netns: "strata-r1"}
	want := []string{"ip", "netns", "exec", "strata-r1", "/bin/strata", "node", "--id", "b1"}
	if got := s.Command(); !slices.Equal(got, want) {
		t.Errorf("%v", got)
	}
	s.Netns = ""
	if got := s.Command(); !slices.Equal(got, want[4:]) {
		t.Errorf("%v", got)
	}
}

func TestSpecFromArgs(t *testing.T) {
	s := SpecFromArgs("/bin/strata", []string{"node", "--topology", "t.yaml", "--region", "eu", "--id=k2", "--role", "bookie", "--join", "x"})
	if s.Region != "eu" || s.ID != "k2" || s.Role != RoleBookie || s.Exe != "/bin/strata" || s.Args[0] != "--topology" || len(s.Args) != 9 {
		t.Errorf("%+v", s)
	}
	if s := SpecFromArgs("x", []string{"--region", "r", "--id", "b1"}); s.Role != "" || s.Region != "r" || s.ID != "b1" {
		t.Errorf("without --role: %+v", s)
	}
}
