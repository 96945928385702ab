package tiered

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running (a
// Reader's read-ahead, an Offload's Put).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
