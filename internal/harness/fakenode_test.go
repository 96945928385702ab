package harness

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// The test binary doubles as a fake `strata node` when HARNESS_FAKE_NODE
// is set. Its arguments are `node --region R --id I --role X`. It appends
// "region/id role pid" to $HARNESS_FAKE_DIR/starts, writes a line to
// stderr, prints a ready report with a real listening port and exits 0 on
// SIGTERM. HARNESS_FAKE_MODE changes that: "fail" exits 1 before the
// report, "garbage" prints a line that is not JSON, "silent" prints
// nothing, "noid" prints JSON without id and role.
func fakeNodeMain() {
	args := map[string]string{}
	flags := os.Args[2:] // os.Args[1] is "node"
	for i := 0; i+1 < len(flags); i += 2 {
		args[strings.TrimPrefix(flags[i], "--")] = flags[i+1]
	}
	name := args["region"] + "/" + args["id"]
	if dir := os.Getenv("HARNESS_FAKE_DIR"); dir != "" {
		f, err := os.OpenFile(filepath.Join(dir, "starts"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %s %d\n", name, args["role"], os.Getpid())
			f.Close()
		}
	}
	fmt.Fprintln(os.Stderr, "fake node starting", name)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	switch os.Getenv("HARNESS_FAKE_MODE") {
	case "fail":
		fmt.Fprintln(os.Stderr, "fake node: cannot start", name)
		os.Exit(1)
	case "garbage":
		fmt.Println("hello, not a report")
		<-sig
		os.Exit(0)
	case "silent":
		<-sig
		os.Exit(0)
	case "noid":
		fmt.Println(`{"nats":"x"}`)
		<-sig
		os.Exit(0)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	rep := Report{ID: args["id"], Role: args["role"], PID: os.Getpid(), Admin: "http://" + ln.Addr().String(), SerfLAN: "lan-" + name}
	switch args["role"] {
	case RoleMeta:
		rep.Etcd = "etcd-" + name
	case RoleBroker:
		rep.SerfWAN, rep.NATS = "wan-"+name, "nats://"+ln.Addr().String()
	}
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	fmt.Println("after the report") // copied into the log
	<-sig
	os.Exit(0)
}
