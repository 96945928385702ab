package replicator

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine leaks (the core starts none) and runs
// the rapid properties 300 times, 200 steps each, unless -rapid.checks or
// -rapid.steps say otherwise (rapid's 100×30 rarely reaches a trim behind
// a partition followed by a crash).
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, v := range map[string]string{"rapid.checks": "300", "rapid.steps": "200"} {
		if !set[name] {
			if err := flag.Set(name, v); err != nil {
				panic(err)
			}
		}
	}
	goleak.VerifyTestMain(m)
}
