package bundle

import (
	"fmt"
	"strings"
	"testing"
)

func TestSplitCoversTheHashSpace(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7, 16} {
		rs := Split(n)
		if len(rs) != n {
			t.Fatalf("Split(%d) gave %d ranges", n, len(rs))
		}
		if rs[0].Lo != 0 || rs[n-1].Hi != 0xffffffff {
			t.Fatalf("Split(%d) = %v: does not span 0..0xffffffff", n, rs)
		}
		for i := 1; i < n; i++ {
			if rs[i].Lo != rs[i-1].Hi {
				t.Fatalf("Split(%d): range %d starts at %#x, previous ends at %#x", n, i, rs[i].Lo, rs[i-1].Hi)
			}
		}
		for _, h := range []uint32{0, 1, 0x3fffffff, 0x40000000, 0x7fffffff, 0xfffffffe, 0xffffffff} {
			in := 0
			for _, r := range rs {
				if r.Contains(h) {
					in++
				}
			}
			if in != 1 {
				t.Fatalf("Split(%d): hash %#x is in %d ranges", n, h, in)
			}
		}
	}
	if got := Split(4)[1].String(); got != "0x40000000_0x80000000" {
		t.Fatalf("Split(4)[1] = %s", got)
	}
}

func TestOfPlacesTopicsStably(t *testing.T) {
	a := Of("acme", "orders", "eu", 4)
	if b := Of("acme", "orders", "eu", 4); a != b {
		t.Fatalf("Of is not deterministic: %v vs %v", a, b)
	}
	if !a.Range.Contains(TopicHash("acme", "orders", "eu")) {
		t.Fatalf("topic hash not in its bundle %v", a)
	}
	// Names that differ only at the end (t1, t2, …) spread too.
	seen := map[Range]int{}
	for i := 1; i <= 20; i++ {
		seen[Of("acme", "orders", fmt.Sprintf("t%d", i), 4).Range]++
	}
	for _, r := range Split(4) {
		if seen[r] < 2 {
			t.Fatalf("20 topics t1..t20 spread over the 4 bundles as %v", seen)
		}
	}
}

func TestParseIDRoundTripAndErrors(t *testing.T) {
	for _, id := range Namespace("acme", "orders", 4) {
		got, err := ParseID(id.String())
		if err != nil || got != id {
			t.Fatalf("ParseID(%q) = %v, %v", id.String(), got, err)
		}
	}
	for _, bad := range []string{
		"", "acme", "acme/orders", "acme/orders/0x0_0x1", "acme/orders/0x00000000-0x40000000",
		"acme/orders/0x40000000_0x00000000", "acme/orders/0x4000000g_0x80000000", "/orders/0x00000000_0x40000000",
		"acme/orders/0x00000000_0x40000000/x", "acme/orders/00000000000_0x40000000",
	} {
		if _, err := ParseID(bad); err == nil {
			t.Fatalf("ParseID(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), "bundle") {
			t.Fatalf("ParseID(%q) error %q does not say bundle", bad, err)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add("acme/orders/0x00000000_0x40000000")
	f.Add("a/b/0xffffffff_0x00000000")
	f.Add("//")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		if id.Range.Lo >= id.Range.Hi {
			t.Fatalf("ParseID(%q) accepted an empty range %v", s, id.Range)
		}
		back, err := ParseID(id.String())
		if err != nil || back != id {
			t.Fatalf("ParseID(%q) = %v does not round-trip: %v, %v", s, id, back, err)
		}
	})
}

// TestRangeStringIsHex: String is "0x%08x_0x%08x" of the bounds, which
// ParseRange reads back.
func TestRangeStringIsHex(t *testing.T) {
	for _, r := range []Range{{0, 0xffffffff}, {0x1, 0x2}, {0xdeadbeef, 0xfeedface}, {0x00ab0000, 0x40000000}} {
		if got, want := r.String(), fmt.Sprintf("0x%08x_0x%08x", r.Lo, r.Hi); got != want {
			t.Errorf("String = %s, want %s", got, want)
		}
		if back, err := ParseRange(r.String()); err == nil && back != r {
			t.Errorf("ParseRange(%s) = %v", r, back)
		}
	}
}
