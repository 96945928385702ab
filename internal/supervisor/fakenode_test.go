package supervisor

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stratamesh/strata/internal/meshfile"
)

// The test binary doubles as a fake `strata node` when STRATA_FAKE_NODE is
// set: it records its arguments, prints a report like a real node, and
// exits 0 on SIGTERM. STRATA_FAKE_FAIL=<region>/<id> makes that node fail
// before reporting.
func fakeNodeMain() {
	args := map[string]string{}
	flags := os.Args[2:] // os.Args[1] is "node"
	for i := 0; i+1 < len(flags); i += 2 {
		args[strings.TrimPrefix(flags[i], "--")] = flags[i+1]
	}
	name := args["region"] + "/" + args["id"]
	if os.Getenv("STRATA_FAKE_FAIL") == name {
		fmt.Fprintln(os.Stderr, "fake node: cannot start", name)
		os.Exit(1)
	}
	args["env:GOMAXPROCS"] = os.Getenv("GOMAXPROCS")
	b, _ := json.Marshal(args)
	_ = os.WriteFile(filepath.Join(args["data-dir"], "args-"+args["region"]+"-"+args["id"]+".json"), b, 0o644)
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // a real port, so addresses are distinct
	rep := meshfile.Node{ID: args["id"], Role: args["role"], PID: os.Getpid(), Admin: "http://" + ln.Addr().String(), SerfLAN: "lan-" + name}
	switch args["role"] {
	case "meta":
		rep.Etcd = "etcd-" + name
	case "broker":
		rep.SerfWAN = "wan-" + name
		home := "west"
		if args["region"] == "west" {
			home = "east"
		}
		rep.Failover = map[string]string{home: "nats://failover-" + name + "-for-" + home}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	<-sig
	os.Exit(0)
}
