package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/harness"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/nodedir"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/topology"
)

func TestMain(m *testing.M) {
	if os.Getenv("STRATA_FAKE_NODE") == "1" {
		fakeNodeMain()
	}
	goleak.VerifyTestMain(m)
}

const twoRegions = `mesh: t
regions:
  - name: east
    brokers: 2
    bookies: 2
    ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 1}
  - name: west
    brokers: 1
    bookies: 2
    ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 1}
`

// syncBuffer is a bytes.Buffer safe for the supervisor's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func fakeConfig(t *testing.T, dataDir string, out *syncBuffer) Config {
	t.Helper()
	m, _, err := topology.Parse("t.yaml", []byte(twoRegions))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_FAKE_NODE", "1")
	return Config{Mesh: m, TopologyYAML: []byte(twoRegions), DataDir: dataDir, Executable: exe, Out: out,
		StartTimeout: 30 * time.Second, StopGrace: 10 * time.Second}
}

func readArgs(t *testing.T, dataDir, region, id string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "args-"+region+"-"+id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var args map[string]string
	if err := json.Unmarshal(b, &args); err != nil {
		t.Fatal(err)
	}
	return args
}

// TestRunStartsStopsAndReports drives Run with fake nodes: start order and
// seeds, mesh.json, a node death, and a clean stop.
func TestRunStartsStopsAndReports(t *testing.T) {
	dataDir := t.TempDir()
	out := &syncBuffer{}
	cfg := fakeConfig(t, dataDir, out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()

	var f *meshfile.File
	testutil.Eventually(t, "mesh.json written", 30*time.Second, func() bool {
		var err error
		f, err = meshfile.Read(dataDir)
		return err == nil
	})
	if len(f.Regions) != 2 || len(f.Regions[0].Nodes) != 5 || len(f.Regions[1].Nodes) != 4 {
		t.Fatalf("mesh.json regions/nodes wrong: %+v", f)
	}
	if got := f.Regions[0].Nodes[0]; got.Role != "meta" || got.Etcd != "etcd-east/meta" {
		t.Fatalf("first node of east = %+v, want the meta node", got)
	}
	// The brokers' failover listeners reach mesh.json: west's clients
	// fail over to east's brokers (ready report → client URL list).
	if urls := f.Regions[1].ClientURLs; !slices.Contains(urls, "nats://failover-east/b1-for-west") {
		t.Errorf("west's client URLs %v lack east/b1's failover listener for west", urls)
	}
	if tier := f.Regions[1].Tier; tier.Kind != "fs" || tier.Dir != filepath.Join(dataDir, "west", "tier") {
		t.Fatalf("west tier = %+v", tier)
	}

	// Seeds: everyone in a region gets its meta's etcd and LAN address;
	// brokers get the WAN addresses of the first broker of each region
	// started before them.
	if a := readArgs(t, dataDir, "east", "k1"); a["etcd"] != "etcd-east/meta" || a["join"] != "lan-east/meta" || a["wan-join"] != "" {
		t.Fatalf("east/k1 args = %v", a)
	}
	if a := readArgs(t, dataDir, "east", "b1"); a["wan-join"] != "" {
		t.Fatalf("east/b1 is the first broker and has no WAN seed, got %v", a)
	}
	// The 9 nodes share the machine's cores (nodeProcs), unless the
	// environment sets GOMAXPROCS.
	_, procs := nodeProcs(cfg.Mesh, runtime.NumCPU())
	want := strconv.Itoa(procs)
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		want = v
	}
	if a := readArgs(t, dataDir, "west", "k2"); a["env:GOMAXPROCS"] != want {
		t.Fatalf("west/k2 runs with GOMAXPROCS=%q, want %s", a["env:GOMAXPROCS"], want)
	}
	if a := readArgs(t, dataDir, "west", "b1"); a["wan-join"] != "wan-east/b1" || a["gossip"] != "loopback" {
		t.Fatalf("west/b1 args = %v", a)
	}
	if a := readArgs(t, dataDir, "east", "b2"); a["wan-join"] != "wan-east/b1,wan-west/b1" {
		t.Fatalf("east/b2 args = %v", a)
	}
	if !strings.Contains(out.String(), "mesh t is running (9 nodes") {
		t.Fatalf("output lacks the running line:\n%s", out)
	}

	// A node that dies is reported and recorded.
	victim := f.Node("west", "k2")
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the death reported", 30*time.Second, func() bool {
		g, err := meshfile.Read(dataDir)
		return err == nil && g.Node("west", "k2").Exited == "signal: killed" &&
			strings.Contains(out.String(), "node west/k2 (pid")
	})
	if o := out.String(); !strings.Contains(o, "to start it again by hand") || !strings.Contains(o, " node --topology ") ||
		!strings.Contains(o, "--region west --role bookie --id k2 --data-dir "+dataDir) {
		t.Fatalf("the death's report does not give the command to start west/k2 again:\n%s", o)
	}

	// The fault socket: a kill through it is one line, not a crash
	// report; a restart puts the node back in mesh.json.
	sock := filepath.Join(dataDir, harness.SocketName)
	if f.FaultSocket != sock {
		t.Fatalf("mesh.json names fault socket %q, want %q", f.FaultSocket, sock)
	}
	faults, err := harness.Dial(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer faults.Close()
	if err := faults.Kill("east", "k1"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the fault kill reported", 30*time.Second, func() bool {
		g, err := meshfile.Read(dataDir)
		return err == nil && g.Node("east", "k1").Exited == "signal: killed" &&
			strings.Contains(out.String(), "node east/k1 (pid")
	})
	if o := out.String(); !strings.Contains(o, "node east/k1 (pid "+strconv.Itoa(f.Node("east", "k1").PID)+") killed by a fault command\n") ||
		strings.Count(o, "to start it again by hand") != 1 {
		t.Fatalf("a fault kill is reported as a crash, or not at all:\n%s", o)
	}
	if err := faults.Restart("west", "k2"); err != nil { // after a crash
		t.Fatal(err)
	}
	g, err := meshfile.Read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if n := g.Node("west", "k2"); n.Exited != "" || n.PID == victim.PID || syscall.Kill(n.PID, 0) != nil {
		t.Fatalf("west/k2 after restart in mesh.json: %+v", n)
	}
	if !strings.Contains(out.String(), "node west/k2 restarted (pid "+strconv.Itoa(g.Node("west", "k2").PID)+")") {
		t.Fatalf("restart not reported:\n%s", out)
	}
	infos, err := faults.Nodes()
	if err != nil || len(infos) != 9 {
		t.Fatalf("fault socket lists %v, %v", infos, err)
	}
	f = g

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after a clean stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, r := range f.Regions {
		for _, n := range r.Nodes {
			if syscall.Kill(n.PID, 0) != syscall.ESRCH {
				t.Errorf("node %s/%s (pid %d) still running", r.Name, n.ID, n.PID)
			}
		}
	}
	if _, err := meshfile.Read(dataDir); !errors.Is(err, meshfile.ErrNotRunning) {
		t.Fatalf("mesh.json after stop: %v", err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fault socket after stop: %v", err)
	}
}

// TestRunStartFailure checks that a node failing to start stops the nodes
// already started and names the failing node with its log.
func TestRunStartFailure(t *testing.T) {
	dataDir := t.TempDir()
	cfg := fakeConfig(t, dataDir, &syncBuffer{})
	t.Setenv("STRATA_FAKE_FAIL", "west/k2")
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "node west/k2 exited before it was ready") || !strings.Contains(err.Error(), "fake node: cannot start west/k2") {
		t.Fatalf("Run = %v, want the failing node named with its log", err)
	}
	b, _ := os.ReadFile(filepath.Join(dataDir, "args-east-meta.json"))
	if len(b) == 0 {
		t.Fatal("east/meta never started")
	}
	if _, err := meshfile.Read(dataDir); !errors.Is(err, meshfile.ErrNotRunning) {
		t.Fatalf("mesh.json written after a failed start: %v", err)
	}
}

func TestDataDirLockAndFresh(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "new")
	cfg := Config{DataDir: dataDir, TopologyYAML: []byte(twoRegions)}
	unlock, err := prepareDataDir(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !Running(dataDir) {
		t.Fatal("Running = false while the lock is held")
	}
	if _, err := prepareDataDir(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("second prepare = %v, want ErrLocked", err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "old-data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	unlock()
	if Running(dataDir) {
		t.Fatal("Running = true after unlock")
	}

	cfg.Fresh = true
	unlock, err = prepareDataDir(cfg)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(dataDir, "old-data")); !os.IsNotExist(err) {
		t.Fatal("--fresh kept old data")
	}

	// A user's directory, even one holding a topology file, is never used
	// nor wiped, and no lock file is left in it.
	for _, fresh := range []bool{false, true} {
		foreign := t.TempDir()
		for _, name := range []string{"topology.yaml", "NOTES.md"} {
			if err := os.WriteFile(filepath.Join(foreign, name), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err = prepareDataDir(Config{DataDir: foreign, TopologyYAML: []byte("x"), Fresh: fresh})
		if !errors.Is(err, ErrNotDataDir) {
			t.Fatalf("fresh=%v on a foreign dir = %v, want ErrNotDataDir", fresh, err)
		}
		entries, _ := os.ReadDir(foreign)
		if len(entries) != 2 {
			t.Fatalf("fresh=%v changed a foreign dir: %v", fresh, entries)
		}
		if b, _ := os.ReadFile(filepath.Join(foreign, "topology.yaml")); string(b) != "mine" {
			t.Fatal("the user's topology.yaml was overwritten")
		}
	}
}

// TestNodeProcs: the node processes of a mesh share the cores evenly,
// each getting at least one.
func TestNodeProcs(t *testing.T) {
	m, _, err := topology.Parse("t.yaml", []byte(twoRegions))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cpus, want int }{{1, 1}, {2, 1}, {8, 1}, {9, 1}, {18, 2}, {32, 3}} {
		nodes, procs := nodeProcs(m, c.cpus)
		if nodes != 9 || procs != c.want {
			t.Errorf("%d cpus: %d nodes, GOMAXPROCS %d; want 9 nodes, %d", c.cpus, nodes, procs, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{StartTimeout: -1}.Validate()
	for _, want := range []string{"Mesh is required", "TopologyYAML is required", "DataDir is required", "Executable is required", "must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %q: %v", want, err)
		}
	}
}

// --fresh empties a bookie's journal_dir when the journal is the wiped
// data's (same owner id) and nothing else: not another data directory's
// journal (another mesh's data dir with the same topology), not the
// journal of a bookie whose data_dir lies outside, and no other file.
func TestFreshRemovesOwnedJournals(t *testing.T) {
	root := t.TempDir()
	dataA, dataB := filepath.Join(root, "a"), filepath.Join(root, "b")
	jd1, jd2 := filepath.Join(root, "nvme", "k1"), filepath.Join(root, "nvme", "k2")
	k2Data := filepath.Join(root, "k2-data")
	unlock, err := prepareDataDir(Config{DataDir: dataA, TopologyYAML: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	// Real bookies: k1's data in mesh A's data dir, k2's outside.
	for _, b := range []struct{ data, journal string }{{filepath.Join(dataA, "r", "k1"), jd1}, {k2Data, jd2}} {
		sc := storage.DefaultConfig()
		sc.Dir, sc.JournalDir = b.data, b.journal
		e, err := storage.Open(sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.journal, "NOTES.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mesh := &topology.Mesh{Name: "m", Regions: []topology.Region{{Name: "r", Nodes: []topology.Node{
		{ID: "k1", Role: topology.RoleBookie, JournalDir: jd1},
		{ID: "k2", Role: topology.RoleBookie, JournalDir: jd2, DataDir: k2Data},
	}}}}
	list := func(d string) []string {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	has := func(names []string, name string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
		}
		return false
	}
	fresh := func(dataDir string) {
		t.Helper()
		unlock, err := prepareDataDir(Config{Mesh: mesh, DataDir: dataDir, TopologyYAML: []byte("x"), Fresh: true})
		if err != nil {
			t.Fatal(err)
		}
		unlock()
	}
	// --fresh on another data directory: k1's journal is mesh A's.
	fresh(dataB)
	if got := list(jd1); !has(got, "OWNER") {
		t.Fatalf("--fresh of another data dir emptied mesh A's journal: %v", got)
	}
	fresh(dataA)
	if got := list(jd1); len(got) != 2 || got[0] != "LOCK" || got[1] != "NOTES.txt" {
		t.Fatalf("k1's journal_dir after --fresh of its data dir: %v, want only LOCK (never removed) and NOTES.txt", got)
	}
	if got := list(jd2); !has(got, "OWNER") || !has(got, "NOTES.txt") {
		t.Fatalf("k2 (own data_dir, not wiped) lost journal files: %v", got)
	}
	// The emptied journal_dir starts a new bookie on the wiped data dir.
	sc := storage.DefaultConfig()
	sc.Dir, sc.JournalDir = filepath.Join(dataA, "r", "k1"), jd1
	e, err := storage.Open(sc)
	if err != nil {
		t.Fatalf("new bookie on the fresh data dir: %v", err)
	}
	defer e.Close()
	// While a bookie has its data directory open (a node left running),
	// --fresh refuses and wipes nothing.
	if _, err := prepareDataDir(Config{Mesh: mesh, DataDir: dataA, TopologyYAML: []byte("x"), Fresh: true}); !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("--fresh under a running bookie: %v, want ErrInUse", err)
	}
	if got := list(sc.Dir); !has(got, "index") || !has(got, "LOCK") {
		t.Fatalf("--fresh under a running bookie wiped its data dir: %v", got)
	}
}

// TestFreshRefusesARunningNode: --fresh refuses while any node of the
// mesh runs on a directory it would wipe (a meta node started by hand,
// say: its etcd data would go from under it), and wipes nothing.
func TestFreshRefusesARunningNode(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "d")
	unlock, err := prepareDataDir(Config{DataDir: dataDir, TopologyYAML: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	mesh := &topology.Mesh{Name: "m", Regions: []topology.Region{{Name: "r", Nodes: []topology.Node{
		{ID: "meta", Role: topology.RoleMeta}, {ID: "b1", Role: topology.RoleBroker},
	}}}}
	metaDir := nodedir.Dir(dataDir, "r", mesh.Regions[0].Nodes[0])
	held, err := nodedir.Lock(metaDir) // the running meta node
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(metaDir, "etcd-data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = prepareDataDir(Config{Mesh: mesh, DataDir: dataDir, TopologyYAML: []byte("x"), Fresh: true})
	if !errors.Is(err, nodedir.ErrInUse) || !strings.Contains(err.Error(), "meta r/meta") {
		t.Fatalf("--fresh under a running meta node: %v, want ErrInUse naming it", err)
	}
	if _, err := os.Stat(filepath.Join(metaDir, "etcd-data")); err != nil {
		t.Fatalf("--fresh under a running meta node wiped its data: %v", err)
	}
	held.Close()
	unlock, err = prepareDataDir(Config{Mesh: mesh, DataDir: dataDir, TopologyYAML: []byte("x"), Fresh: true})
	if err != nil {
		t.Fatalf("--fresh once the node stopped: %v", err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(metaDir, "etcd-data")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--fresh left the stopped node's data: %v", err)
	}
}

func TestShellCommand(t *testing.T) {
	got := shellCommand([]string{"/usr/bin/strata", "node", "--data-dir", "/tmp/my data", "--join", "127.0.0.1:7946", "it's", ""})
	want := `/usr/bin/strata node --data-dir '/tmp/my data' --join 127.0.0.1:7946 'it'\''s' ''`
	if got != want {
		t.Fatalf("shellCommand = %s\nwant %s", got, want)
	}
}

// TestHandStarted: after up has stopped its nodes, the nodes whose
// directory a process still holds (started by hand) are named.
func TestHandStarted(t *testing.T) {
	dataDir := t.TempDir()
	mesh := &topology.Mesh{Name: "m", Regions: []topology.Region{{Name: "r", Nodes: []topology.Node{
		{ID: "meta", Role: topology.RoleMeta}, {ID: "b1", Role: topology.RoleBroker}, {ID: "k1", Role: topology.RoleBookie},
	}}}}
	cfg := Config{Mesh: mesh, DataDir: dataDir}
	if got := handStarted(cfg); len(got) != 0 {
		t.Fatalf("nothing running: %v", got)
	}
	held, err := nodedir.Lock(nodedir.Dir(dataDir, "r", mesh.Regions[0].Nodes[2]))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if got := handStarted(cfg); !slices.Equal(got, []string{"r/k1"}) {
		t.Fatalf("handStarted = %v, want [r/k1]", got)
	}
}
