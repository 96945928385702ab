package live

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratamesh/strata/internal/harness"
)

// Faults is the part of the fault harness's control API
// (harness.Faults, served by `strata up` on <data-dir>/fault.sock) that a
// drill uses; *harness.Remote satisfies it.
type Faults interface {
	KillRegion(region string) error
	FreezeRegion(region string) error
	ThawRegion(region string) error
	RestartRegion(region string) error
	Cut(a, b string) error
	Heal(a, b string) error
	// Nodes lists the mesh's nodes (OtherRegions reads the regions).
	Nodes() ([]harness.NodeInfo, error)
}

// OtherRegions is the sorted regions of nodes (a fault socket's node
// list: every region of the mesh it runs) other than region: what a
// partition of region cuts it from, when no mesh.json names the
// regions (--nats). It fails when region has no node there.
func OtherRegions(nodes []harness.NodeInfo, region string) ([]string, error) {
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.Region] = true
	}
	if !seen[region] {
		all := make([]string, 0, len(seen))
		for r := range seen {
			all = append(all, r)
		}
		sort.Strings(all)
		return nil, fmt.Errorf("drill: --region %s: the fault socket's mesh has no node in it (its regions: %s)", region, strings.Join(all, ", "))
	}
	delete(seen, region)
	others := make([]string, 0, len(seen))
	for r := range seen {
		others = append(others, r)
	}
	sort.Strings(others)
	return others, nil
}

// ErrNoFaults is returned by DialFaults when no fault socket is served.
var ErrNoFaults = errors.New("drill: no fault socket")

// DialFaults connects to the fault socket of the `strata up` whose data
// directory is dataDir (harness.Dial). It is a variable so that tests can
// plug in a fake.
var DialFaults = func(dataDir string) (Faults, error) {
	sock := filepath.Join(dataDir, harness.SocketName)
	if _, err := os.Stat(sock); err != nil {
		return nil, fmt.Errorf("%w at %s: the drill needs a `strata up` serving one, or --cut-cmd and --heal-cmd", ErrNoFaults, sock)
	}
	r, err := harness.Dial(dataDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoFaults, err)
	}
	return r, nil
}

// Fault cuts and heals one region.
type Fault interface {
	Cut(ctx context.Context) error
	Heal(ctx context.Context) error
}

// Modes are the drill's fault modes.
const (
	ModeKill      = "kill"      // SIGKILL every node of the region; restart at heal
	ModeFreeze    = "freeze"    // SIGSTOP every node; SIGCONT at heal
	ModePartition = "partition" // cut the region's links to every other region
	ModeHook      = "hook"      // the operator's --cut-cmd / --heal-cmd
)

// HarnessFault is the mode's fault on region through f; others are the
// other regions of the mesh (for partition).
func HarnessFault(f Faults, mode, region string, others []string) (Fault, error) {
	switch mode {
	case ModeKill, ModeFreeze, ModePartition:
		return harnessFault{f: f, mode: mode, region: region, others: others}, nil
	}
	return nil, fmt.Errorf("drill: --mode %q: want kill, freeze or partition", mode)
}

type harnessFault struct {
	f      Faults
	mode   string
	region string
	others []string
}

func (h harnessFault) Cut(context.Context) error {
	switch h.mode {
	case ModeKill:
		return h.f.KillRegion(h.region)
	case ModeFreeze:
		return h.f.FreezeRegion(h.region)
	}
	for _, o := range h.others {
		if err := h.f.Cut(h.region, o); err != nil {
			return fmt.Errorf("partition %s from %s: %w (partition needs regions in network namespaces, or --cut-cmd/--heal-cmd hooks)", h.region, o, err)
		}
	}
	return nil
}

func (h harnessFault) Heal(context.Context) error {
	switch h.mode {
	case ModeKill:
		return h.f.RestartRegion(h.region)
	case ModeFreeze:
		return h.f.ThawRegion(h.region)
	}
	var errs []error
	for _, o := range h.others {
		if err := h.f.Heal(h.region, o); err != nil {
			errs = append(errs, fmt.Errorf("heal %s–%s: %w", h.region, o, err))
		}
	}
	return errors.Join(errs...)
}

// HookFault runs the operator's commands with `sh -c`: cut to cut the
// region, heal to bring it back. "{region}" in either is replaced by the
// region's name, which is also in $STRATA_DRILL_REGION. A command that
// exits non-zero fails the step with its output.
func HookFault(cut, heal, region string) (Fault, error) {
	if strings.TrimSpace(cut) == "" || strings.TrimSpace(heal) == "" {
		return nil, errors.New("drill: --cut-cmd and --heal-cmd go together; both must be non-empty")
	}
	return hookFault{cut: cut, heal: heal, region: region}, nil
}

type hookFault struct{ cut, heal, region string }

func (h hookFault) Cut(ctx context.Context) error  { return h.run(ctx, "--cut-cmd", h.cut) }
func (h hookFault) Heal(ctx context.Context) error { return h.run(ctx, "--heal-cmd", h.heal) }

func (h hookFault) run(ctx context.Context, flag, cmd string) error {
	c := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmd, "{region}", h.region))
	c.Env = append(os.Environ(), "STRATA_DRILL_REGION="+h.region)
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("drill: %s for %s: %w: %s", flag, h.region, err, strings.TrimSpace(string(out)))
	}
	return nil
}
