package quotanet

import (
	"testing"
	"time"
)

// TestNewClock: the clock's times carry no monotonic reading (they
// compare with times made from Unix ns), start at the wall time of its
// creation and advance.
func TestNewClock(t *testing.T) {
	before := time.Now().Round(0)
	c := NewClock()
	a := c()
	if a != a.Round(0) {
		t.Errorf("a clock time carries a monotonic reading: %v", a)
	}
	if d := a.Sub(before); d < 0 || d > time.Minute {
		t.Errorf("the clock starts %v after the wall time of its creation", d)
	}
	time.Sleep(2 * time.Millisecond)
	if b := c(); !b.After(a) {
		t.Errorf("after 2 ms the clock reads %v, not after %v", b, a)
	}
}
