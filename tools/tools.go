//go:build tools

// Package tools pins the benchmark and differential-test peers — the
// reference NATS server and the nats CLI — in a module of their own, so
// they never enter Strata's dependencies. Build them with `make peers`
// (into bin/).
package tools

import (
	_ "github.com/nats-io/nats-server/v2"
	_ "github.com/nats-io/natscli/nats"
)
