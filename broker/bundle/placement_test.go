package bundle

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// settle plays placement like the brokers do, one decision at a time:
// every unowned bundle goes to its Acquirer, and each broker sheds while
// Shed says so, until nothing changes. It returns the number of moves
// (sheds) it made.
func settle(t *rapid.T, v *View, bundles []ID) int {
	moves := 0
	for step := 0; step < 10*len(bundles)+10; step++ {
		changed := false
		for _, b := range bundles {
			if _, owned := v.Owners[b]; !owned {
				if a := v.Acquirer(b); a != "" {
					v.Owners[b] = a
					delete(v.Unloads, b)
					changed = true
				}
			}
		}
		for _, br := range v.Brokers {
			if id, ok := v.Shed(br); ok {
				delete(v.Owners, id)
				moves++
				changed = true
				break
			}
		}
		if !changed {
			return moves
		}
	}
	t.Fatalf("placement did not settle: %v", v.Owners)
	return moves
}

func checkBalanced(t *rapid.T, v *View, bundles []ID) {
	load := v.Load()
	lo, hi := len(bundles), 0
	for _, l := range load {
		lo, hi = min(lo, l), max(hi, l)
	}
	for _, b := range bundles {
		o, ok := v.Owners[b]
		if !ok {
			t.Fatalf("bundle %v has no owner with brokers %v", b, v.Brokers)
		}
		if _, live := load[o]; !live {
			t.Fatalf("bundle %v owned by %s, not live (%v)", b, o, v.Brokers)
		}
	}
	if len(v.Brokers) > 0 && hi-lo > max(v.Threshold, 1) {
		t.Fatalf("unbalanced: loads %v (threshold %d)", load, v.Threshold)
	}
}

// TestPlacementConverges: whatever the history of brokers joining,
// dying and unloading, every bundle ends up owned by a live broker and
// the loads differ by at most the threshold; a join moves only as many
// bundles as the joiner needs.
func TestPlacementConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var bundles []ID
		for ns := 0; ns < rapid.IntRange(1, 5).Draw(t, "namespaces"); ns++ {
			bundles = append(bundles, Namespace("t", fmt.Sprintf("ns%d", ns), rapid.IntRange(1, 8).Draw(t, "bundles"))...)
		}
		v := &View{Owners: map[ID]string{}, Unloads: map[ID]Unload{}, Threshold: rapid.IntRange(0, 2).Draw(t, "threshold")}
		next := 0
		join := func() {
			v.Brokers = append(v.Brokers, fmt.Sprintf("b%d", next))
			next++
		}
		join()
		settle(t, v, bundles)
		checkBalanced(t, v, bundles)
		for i := 0; i < rapid.IntRange(1, 12).Draw(t, "events"); i++ {
			switch ev := rapid.IntRange(0, 2).Draw(t, "event"); {
			case ev == 0 || len(v.Brokers) == 1: // join
				before := v.Load()
				join()
				moves := settle(t, v, bundles)
				fair := len(bundles)/len(v.Brokers) + 1
				if moves > fair+len(before) {
					t.Fatalf("a join moved %d bundles; the joiner needed at most %d", moves, fair)
				}
			case ev == 1: // a broker dies: its bundles become unowned
				k := rapid.IntRange(0, len(v.Brokers)-1).Draw(t, "dead")
				dead := v.Brokers[k]
				v.Brokers = append(v.Brokers[:k:k], v.Brokers[k+1:]...)
				for b, o := range v.Owners {
					if o == dead {
						delete(v.Owners, b)
					}
				}
				settle(t, v, bundles)
			case ev == 2: // an admin unload, to a named broker or not
				b := bundles[rapid.IntRange(0, len(bundles)-1).Draw(t, "unload")]
				from := v.Owners[b]
				u := Unload{From: from}
				if rapid.Bool().Draw(t, "to") {
					u.To = v.Brokers[rapid.IntRange(0, len(v.Brokers)-1).Draw(t, "target")]
				}
				v.Unloads[b] = u
				delete(v.Owners, b)
				a := v.Acquirer(b)
				switch {
				case u.To != "" && a != u.To:
					t.Fatalf("unload of %v to %s: acquirer %s", b, u.To, a)
				case u.To == "" && a == from:
					t.Fatalf("unload of %v from %s went back to it", b, from)
				}
				v.Owners[b] = a
				delete(v.Unloads, b)
				settle(t, v, bundles)
			}
			checkBalanced(t, v, bundles)
		}
	})
}

func TestAcquirerIsTheSameEverywhere(t *testing.T) {
	bundles := Namespace("t", "ns", 8)
	v1 := View{Brokers: []string{"a", "b", "c"}, Owners: map[ID]string{bundles[0]: "a"}}
	v2 := View{Brokers: []string{"c", "a", "b"}, Owners: map[ID]string{bundles[0]: "a"}}
	for _, b := range bundles[1:] {
		if x, y := v1.Acquirer(b), v2.Acquirer(b); x != y || x == "a" {
			t.Fatalf("bundle %v: acquirer %q vs %q (a is the most loaded)", b, x, y)
		}
	}
	if got := (View{}).Acquirer(bundles[0]); got != "" {
		t.Fatalf("no brokers: acquirer %q", got)
	}
}

// TestShedSkipsSettling: an overloaded broker does not hand over a bundle
// that is settling (just placed by an unload), and sheds another instead;
// with only settling bundles it sheds nothing.
func TestShedSkipsSettling(t *testing.T) {
	bs := Namespace("t", "ns", 4)
	v := View{Brokers: []string{"a", "b"}, Owners: map[ID]string{bs[0]: "a", bs[1]: "a", bs[2]: "a", bs[3]: "a"}}
	first, ok := v.Shed("a")
	if !ok {
		t.Fatal("a owns 4 of 4 with b idle and sheds nothing")
	}
	v.Settling = map[ID]bool{first: true}
	if next, ok := v.Shed("a"); !ok || next == first {
		t.Fatalf("with %v settling, a sheds %v (%v)", first, next, ok)
	}
	v.Settling = map[ID]bool{bs[0]: true, bs[1]: true, bs[2]: true, bs[3]: true}
	if id, ok := v.Shed("a"); ok {
		t.Fatalf("every bundle settling, a sheds %v", id)
	}
}
