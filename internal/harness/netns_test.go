package harness

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a helper run inside a namespace (`ip netns
// exec NS <test binary>`), chosen by STRATA_NETNS_HELPER:
// "serve ADDR" listens on ADDR:7777 and answers "ok" to every connection
// (printing "ready" first); "dial ADDR" connects to ADDR:7777 and prints
// what it read or the error.
func init() {
	v := os.Getenv("STRATA_NETNS_HELPER")
	if v == "" {
		return
	}
	verb, addr, _ := strings.Cut(v, " ")
	hp := net.JoinHostPort(addr, "7777")
	switch verb {
	case "serve":
		ln, err := net.Listen("tcp", hp)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("ready")
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			c.Write([]byte("ok\n"))
			c.Close()
		}
	case "dial":
		fmt.Println(dial(hp))
		os.Exit(0)
	case "dialall": // ADDR is a comma-separated list: one result line each
		for _, a := range strings.Split(addr, ",") {
			fmt.Println(dial(net.JoinHostPort(a, "7777")))
		}
		os.Exit(0)
	}
	os.Exit(2)
}

// dial connects to hp and returns the line read, or the error.
func dial(hp string) string {
	c, err := net.DialTimeout("tcp", hp, 2*time.Second)
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error " + err.Error()
	}
	return strings.TrimSpace(line)
}

// inNetns runs the test binary as helper v in namespace ns.
func inNetns(ns, v string) *exec.Cmd {
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	cmd.Env = append(os.Environ(), "STRATA_NETNS_HELPER="+v)
	return cmd
}

func newTestNet(t *testing.T, regions ...string) *Net {
	t.Helper()
	n, err := NewNet("t-"+strings.ReplaceAll(t.Name(), "/", "-"), regions)
	if err != nil {
		t.Fatalf("NewNet: %v", err) // never skipped: CI runs as root
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

// TestNetCutOneLink: a server in each region; B–C cut leaves A–B, A–C
// and the caller's links up; healed, B–C works again.
func TestNetCutOneLink(t *testing.T) {
	regions := []string{"a", "b", "c"}
	n := newTestNet(t, regions...)
	for _, r := range regions {
		srv := inNetns(n.Netns(r), "serve "+n.Addr(r))
		out, err := srv.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
		if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "ready" {
			t.Fatalf("server in %s: %q", r, line)
		}
	}
	// from dials every region from src in one helper process (each
	// start of the race-built test binary costs about a second).
	from := func(src string) map[string]string {
		addrs := make([]string, len(regions))
		for i, dst := range regions {
			addrs[i] = n.Addr(dst)
		}
		out, err := inNetns(n.Netns(src), "dialall "+strings.Join(addrs, ",")).Output()
		if err != nil {
			t.Fatalf("dial from %s: %v", src, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(regions) {
			t.Fatalf("dial from %s: %d results for %d regions: %q", src, len(lines), len(regions), out)
		}
		got := map[string]string{}
		for i, dst := range regions {
			got[dst] = strings.TrimSpace(lines[i])
		}
		return got
	}
	check := func(cut bool) {
		t.Helper()
		for _, src := range regions {
			if got := dial(net.JoinHostPort(n.Addr(src), "7777")); got != "ok" {
				t.Errorf("caller→%s: %s", src, got)
			}
			res := from(src)
			for _, dst := range regions {
				got := res[dst]
				isCut := cut && (src == "b" && dst == "c" || src == "c" && dst == "b")
				if isCut && got == "ok" {
					t.Errorf("%s→%s reached across the cut link", src, dst)
				}
				if !isCut && got != "ok" {
					t.Errorf("%s→%s: %s", src, dst, got)
				}
			}
		}
	}
	check(false)
	if err := n.Cut("c", "b"); err != nil {
		t.Fatal(err)
	}
	check(true)
	if err := n.Cut("b", "c"); err != nil { // again: a no-op
		t.Fatal(err)
	}
	if err := n.Heal("b", "c"); err != nil {
		t.Fatal(err)
	}
	check(false)
}

// TestNetCloseRemovesEverything: Close removes every namespace and link
// with the Net's tag, and is idempotent; a crashed run's leftovers are
// removed by a new Net of the same name.
func TestNetCloseRemovesEverything(t *testing.T) {
	n := newTestNet(t, "x", "y")
	leftover, err := NewNet(n.name, []string{"x", "y"}) // as after a crash: same name, removes n's
	if err != nil {
		t.Fatal(err)
	}
	if err := leftover.Close(); err != nil {
		t.Fatal(err)
	}
	if err := leftover.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, args := range [][]string{{"netns", "list"}, {"-o", "link", "show"}} {
		out, err := ip(args...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, leftover.tag) {
			t.Errorf("ip %v still lists %s:\n%s", args, leftover.tag, out)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Cut("x", "y"); !errors.Is(err, ErrNetInvalid) {
		t.Errorf("Cut on a closed Net: %v, want ErrNetInvalid", err)
	}
}

// TestNetBadInput: bad names, region lists and pairs are refused,
// naming what was wrong.
func TestNetBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		regions []string
		want    string
	}{
		{"", []string{"a"}, `net name ""`},
		{"a b", []string{"a"}, `net name "a b"`},
		{"ok", nil, "0 regions"},
		{"ok", []string{"a", "a"}, `region "a" twice`},
		{"ok", []string{"a", ""}, "empty region"},
	} {
		_, err := NewNet(tc.name, tc.regions)
		if !errors.Is(err, ErrNetInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewNet(%q, %q): %v, want ErrNetInvalid naming %q", tc.name, tc.regions, err, tc.want)
		}
	}
	n := newTestNet(t, "a", "b")
	for _, p := range [][2]string{{"a", "a"}, {"a", "z"}} {
		if err := n.Cut(p[0], p[1]); !errors.Is(err, ErrNetInvalid) {
			t.Errorf("Cut(%s, %s): %v, want ErrNetInvalid", p[0], p[1], err)
		}
	}
	if n.Netns("z") != "" || n.Addr("z") != "" {
		t.Errorf("unknown region has netns %q addr %q", n.Netns("z"), n.Addr("z"))
	}
	if err := CleanupNets("other"); !errors.Is(err, ErrNetInvalid) {
		t.Errorf("CleanupNets(other): %v", err)
	}
}
