package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/stratamesh/strata/internal/natspeer"
)

// The JetStream conformance (shared/specs/nats-wire.md §5, items 15–38)
// and differential tests run every scenario against each target: the
// reference nats-server (the oracle: a scenario that fails there is a
// wrong test) and a Strata broker. Each subtest gets a fresh server.

// envTargets selects the targets: a comma-separated list of names from
// targetNames; unset or empty means all of them.
const envTargets = "STRATA_JS_TARGETS"

const (
	refName    = "nats-server"
	strataName = "strata"
)

var targetNames = []string{refName, strataName}

// target is one server under test.
type target struct {
	Name string
	URL  string // nats://host:port
	// Restart stops the server and starts it again with the same address
	// and the same durable state; it returns once clients can connect.
	Restart func(t *testing.T)
}

// addr is the target's host:port, for raw TCP sessions.
func (tg *target) addr() string { return strings.TrimPrefix(tg.URL, "nats://") }

// targetOptions say how to start a target.
type targetOptions struct {
	// noJetStream starts the server with JetStream off (item 15).
	noJetStream bool
}

type targetOption func(*targetOptions)

// withoutJetStream starts the targets with JetStream disabled.
func withoutJetStream() targetOption { return func(o *targetOptions) { o.noJetStream = true } }

// selectedTargets are the target names chosen by STRATA_JS_TARGETS.
func selectedTargets(t testing.TB) []string {
	t.Helper()
	env := strings.TrimSpace(os.Getenv(envTargets))
	if env == "" {
		return targetNames
	}
	var names []string
	for _, n := range strings.Split(env, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(targetNames, n) {
			t.Fatalf("%s=%q: unknown target %q (known: %s)", envTargets, env, n, strings.Join(targetNames, ", "))
		}
		names = append(names, n)
	}
	return names
}

// forEachTarget runs f as one subtest per selected target, each against a
// freshly started server. Goroutines the subtest leaves behind fail it.
func forEachTarget(t *testing.T, f func(t *testing.T, tg *target), opts ...targetOption) {
	t.Helper()
	var o targetOptions
	for _, opt := range opts {
		opt(&o)
	}
	for _, name := range selectedTargets(t) {
		t.Run(name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			// Registered first, so it runs after every other cleanup
			// (connections closed, servers stopped).
			t.Cleanup(func() {
				goleak.VerifyNone(t, before,
					// The shared embedded etcd serves new client
					// connections on goroutines of its own.
					goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/embed.(*serveCtx).startHandler.func1"),
					goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer).GoAttach.func1"))
			})
			var tg *target
			switch name {
			case refName:
				tg = startReference(t, o)
			case strataName:
				tg = startStrata(t, o)
			}
			f(t, tg)
		})
	}
}

// startReference runs the reference nats-server: R1, file storage in a
// directory of the test's, kept across Restart.
func startReference(t *testing.T, o targetOptions) *target {
	t.Helper()
	var conf []string
	if !o.noJetStream {
		conf = append(conf, fmt.Sprintf("jetstream: {store_dir: %q}", t.TempDir()))
	}
	s := natspeer.Start(t, conf...)
	return &target{
		Name:    refName,
		URL:     s.URL(),
		Restart: func(t *testing.T) { t.Helper(); s.Restart(t) },
	}
}

// Client-side helpers.

// testCtx is a context for one test's API calls, cancelled when it ends.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// connect opens a nats.go connection that does not reconnect (a restart
// is followed by a new connection) and closes it when the test ends.
func connect(t *testing.T, tg *target) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(tg.URL, nats.Timeout(5*time.Second), nats.NoReconnect(), nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("connect %s: %v", tg.Name, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// connectJS is connect plus a JetStream context on it.
func connectJS(t *testing.T, tg *target) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := connect(t, tg)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// createStream creates a stream and fails the test if it cannot.
func createStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	return s
}

// createConsumer creates (or updates) a consumer and fails the test if it
// cannot.
func createConsumer(t *testing.T, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) jetstream.Consumer {
	t.Helper()
	c, err := js.CreateOrUpdateConsumer(testCtx(t), stream, cfg)
	if err != nil {
		t.Fatalf("create consumer %s on %s: %v", cfg.Durable, stream, err)
	}
	return c
}

// publishN publishes n messages ("msg-<i>") on subject and checks that
// they get the stream sequences first, first+1, ….
func publishN(t *testing.T, js jetstream.JetStream, subject string, n int, first uint64) {
	t.Helper()
	ctx := testCtx(t)
	for i := range n {
		ack, err := js.Publish(ctx, subject, fmt.Appendf(nil, "msg-%d", first+uint64(i)))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if want := first + uint64(i); ack.Sequence != want {
			t.Fatalf("publish %d: seq %d, want %d", i, ack.Sequence, want)
		}
	}
}
