package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/natspeer"
)

// natsCLI is the pinned, unmodified nats CLI run against a mesh, with a
// HOME of its own and no context (the machine user's contexts do not
// apply).
type natsCLI struct {
	bin, home, url string
}

func newNATSCLI(t *testing.T, urls []string) *natsCLI {
	t.Helper()
	return &natsCLI{bin: natspeer.CLI(t), home: t.TempDir(), url: strings.Join(urls, ",")}
}

func (n *natsCLI) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, n.bin, append([]string{"--no-context", "-s", n.url}, args...)...)
	cmd.Env = []string{"HOME=" + n.home, "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs one nats command to its end (60 s at most) and returns its
// output (stdout and stderr) and exit code.
func (n *natsCLI) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := n.command(ctx, args...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("nats %v: %v", args, err)
	}
	return string(out), 0
}

// mustRun is run that fails unless the command exits 0.
func (n *natsCLI) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, code := n.run(t, args...)
	if code != 0 {
		t.Fatalf("nats %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// natsCLI (a step of TestTenantIsolation): the unmodified nats CLI with
// alice's .creds file publishes, subscribes, adds a stream and runs
// `nats bench`, core and JetStream; without credentials it is refused.
func (s *isoSuite) natsCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := newNATSCLI(t, s.c.regions["r1"].urls())
	creds := s.creds["alice"]

	// sub (until one message) and pub.
	var mu sync.Mutex
	var subOut bytes.Buffer
	sub := n.command(ctx, "--creds", creds, "sub", "tools.chat", "--count", "1", "--raw")
	sub.Stdout, sub.Stderr = lockedWriter{&mu, &subOut}, lockedWriter{&mu, &subOut}
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sub.Wait() }()
	var subErr error
	waitFor(t, "nats sub gets what nats pub sends", 30*time.Second, func() bool {
		n.mustRun(t, "--creds", creds, "pub", "tools.chat", "hello from nats pub")
		select {
		case subErr = <-exited:
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	})
	mu.Lock()
	got := subOut.String()
	mu.Unlock()
	if subErr != nil || !strings.Contains(got, "hello from nats pub") {
		t.Fatalf("nats sub: %v\n%s", subErr, got)
	}

	// stream add, then pub into it.
	n.mustRun(t, "--creds", creds, "stream", "add", "TOOLS", "--subjects", "tools.orders.>", "--storage", "file", "--defaults")
	n.mustRun(t, "--creds", creds, "pub", "tools.orders.new", "order", "--count", "3")
	st, err := s.alice["r1"].js(t).Stream(ctx, "TOOLS")
	if err != nil {
		t.Fatalf("alpha's stream TOOLS, added by nats stream add: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 3 {
		t.Fatalf("TOOLS after 3 nats pub: %+v %v", info, err)
	}
	if out := n.mustRun(t, "--creds", creds, "stream", "info", "TOOLS"); !strings.Contains(out, "tools.orders.>") {
		t.Fatalf("nats stream info TOOLS:\n%s", out)
	}
	if _, err := s.bob1["r1"].js(t).Stream(ctx, "TOOLS"); err == nil || !strings.Contains(err.Error(), jetstream.ErrStreamNotFound.Error()) {
		t.Fatalf("bravo looks up alpha's TOOLS: %v, want not found", err)
	}

	// nats bench, core and JetStream.
	if out := n.mustRun(t, "bench", "pub", "tools.bench", "--creds", creds, "--msgs", "2000", "--size", "64", "--no-progress"); !strings.Contains(out, "msgs/sec") {
		t.Fatalf("nats bench pub:\n%s", out)
	}
	out := n.mustRun(t, "bench", "js", "pub", "sync", "tools.benchjs", "--creds", creds, "--stream", "BENCH", "--create", "--msgs", "300", "--size", "64", "--no-progress")
	if !strings.Contains(out, "msgs/sec") {
		t.Fatalf("nats bench js pub:\n%s", out)
	}
	bench, err := s.alice["r1"].js(t).Stream(ctx, "BENCH")
	if err != nil {
		t.Fatalf("the stream nats bench made: %v", err)
	}
	if bi, err := bench.Info(ctx); err != nil || bi.State.Msgs != 300 {
		t.Fatalf("BENCH after nats bench js pub of 300: %+v %v", bi, err)
	}

	// Without credentials: refused.
	out, code := n.run(t, "pub", "tools.chat", "no creds")
	if code == 0 || !strings.Contains(strings.ToLower(out), "authorization violation") {
		t.Fatalf("nats pub without credentials: exit %d\n%s", code, out)
	}
	t.Logf("nats pub without credentials: exit %d: %s", code, strings.TrimSpace(out))
}

// lockedWriter serializes writes to a buffer that is also read.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
