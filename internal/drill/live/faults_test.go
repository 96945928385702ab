package live

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratamesh/strata/internal/harness"
)

// fakeFaults records the calls; cutErr fails Cut (as the harness's
// ErrNoNetwork does on a loopback mesh).
type fakeFaults struct {
	calls  []string
	cutErr error
}

func (f *fakeFaults) rec(s string) error                 { f.calls = append(f.calls, s); return nil }
func (f *fakeFaults) KillRegion(r string) error          { return f.rec("kill " + r) }
func (f *fakeFaults) FreezeRegion(r string) error        { return f.rec("freeze " + r) }
func (f *fakeFaults) ThawRegion(r string) error          { return f.rec("thaw " + r) }
func (f *fakeFaults) RestartRegion(r string) error       { return f.rec("restart " + r) }
func (f *fakeFaults) Heal(a, b string) error             { return f.rec("heal " + a + " " + b) }
func (f *fakeFaults) Nodes() ([]harness.NodeInfo, error) { return nil, f.rec("nodes") }
func (f *fakeFaults) Cut(a, b string) error {
	if f.cutErr != nil {
		return f.cutErr
	}
	return f.rec("cut " + a + " " + b)
}

func TestHarnessFaultModes(t *testing.T) {
	ctx := context.Background()
	for mode, want := range map[string]string{
		ModeKill:      "kill a,restart a",
		ModeFreeze:    "freeze a,thaw a",
		ModePartition: "cut a b,cut a c,heal a b,heal a c",
	} {
		f := &fakeFaults{}
		h, err := HarnessFault(f, mode, "a", []string{"b", "c"})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Cut(ctx); err != nil {
			t.Fatal(err)
		}
		if err := h.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(f.calls, ","); got != want {
			t.Errorf("%s: calls %q, want %q", mode, got, want)
		}
	}
	if _, err := HarnessFault(&fakeFaults{}, "nuke", "a", nil); err == nil || !strings.Contains(err.Error(), `--mode "nuke"`) {
		t.Fatalf("bad mode: %v", err)
	}
	noNet := errors.New("harness: no network namespaces")
	h, _ := HarnessFault(&fakeFaults{cutErr: noNet}, ModePartition, "a", []string{"b"})
	if err := h.Cut(ctx); !errors.Is(err, noNet) || !strings.Contains(err.Error(), "partition needs regions in network namespaces") {
		t.Fatalf("partition on loopback: %v", err)
	}
}

func TestHookFault(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	h, err := HookFault("echo cut {region} $STRATA_DRILL_REGION >> "+out, "echo heal {region} >> "+out, "us-east")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Cut(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Heal(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if string(b) != "cut us-east us-east\nheal us-east\n" {
		t.Fatalf("hooks ran %q", b)
	}
	h, _ = HookFault("echo no such host >&2; exit 3", "true", "r")
	if err := h.Cut(context.Background()); err == nil || !strings.Contains(err.Error(), "--cut-cmd for r") || !strings.Contains(err.Error(), "no such host") {
		t.Fatalf("failing hook: %v", err)
	}
	if _, err := HookFault("true", " ", "r"); err == nil {
		t.Fatal("an empty --heal-cmd was accepted")
	}
}

func TestDialFaultsWithoutSocket(t *testing.T) {
	_, err := DialFaults(t.TempDir())
	if !errors.Is(err, ErrNoFaults) || !strings.Contains(err.Error(), "--cut-cmd and --heal-cmd") {
		t.Fatalf("no socket: %v", err)
	}
}

func TestOtherRegions(t *testing.T) {
	nodes := []harness.NodeInfo{{Region: "c", ID: "meta"}, {Region: "a", ID: "meta"}, {Region: "b", ID: "meta"},
		{Region: "b", ID: "b1"}, {Region: "c", ID: "b1"}}
	got, err := OtherRegions(nodes, "b")
	if err != nil || !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Fatalf("others of b: %v, %v; want [a c]", got, err)
	}
	got, err = OtherRegions(nodes[:1], "c")
	if err != nil || len(got) != 0 {
		t.Fatalf("a one-region mesh: %v, %v; want none", got, err)
	}
	if _, err := OtherRegions(nodes, "d"); err == nil || !strings.Contains(err.Error(), "--region d") || !strings.Contains(err.Error(), "a, b, c") {
		t.Fatalf("unknown region: %v", err)
	}
	if _, err := OtherRegions(nil, "a"); err == nil || !strings.Contains(err.Error(), "no node") {
		t.Fatalf("no nodes: %v", err)
	}
}
