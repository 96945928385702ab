package core

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine leaks (the core starts none), and
// runs the rapid properties 3000 times unless -rapid.checks says
// otherwise (rapid's default of 100 explores too little of the ensemble
// change and fault space; 3000 take a few seconds under -race).
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", "3000"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
