// Package natspeer runs the reference nats-server (v2.15.3, pinned in
// tools/go.mod) as a subprocess: the oracle of Strata's conformance and
// differential tests (shared/specs/nats-wire.md §5).
//
// # What it owns
//
//   - Binary: the nats-server executable, built once per test binary from
//     the tools module (about a minute cold, a second or two with a warm
//     build cache), or taken from STRATA_NATS_SERVER.
//   - CLI: the pinned nats CLI (natscli), built the same way, or taken
//     from STRATA_NATS_CLI: the unmodified tool that e2e tests run
//     against a Strata mesh.
//   - Start: one server process on a free loopback port with the caller's
//     config lines, killed when the test ends (and, through the Linux
//     parent-death signal, when the test binary dies).
//   - Server.Restart: a graceful stop (SIGTERM) and a start on the same
//     port with the same config, so a JetStream store_dir and the clients'
//     URL survive.
//
// # What it must not do
//
// It is test support: only _test.go files may import it. The reference
// server and the CLI never enter Strata's module (they are built from
// tools/, a module of its own).
//
// # Concurrency and the caller's duties
//
// Start and Restart must be called from the test's goroutine (they call
// t.Fatal). URL and Addr may be called from any goroutine. Pdeathsig is
// tied to the OS thread that started the process, so do not call Start or
// Restart from a goroutine that holds runtime.LockOSThread.
package natspeer
