package bundle

import (
	"hash/fnv"
	"sort"
)

// View is what placement decides from: the region's bundles, its live
// brokers and who owns what, as one broker sees them in etcd.
type View struct {
	// Brokers are the live brokers that may own bundles (registered under
	// a live lease and not draining).
	Brokers []string
	// Owners maps each owned bundle to its owner (which may be a broker
	// that is draining or about to expire).
	Owners map[ID]string
	// Unloads are admin unloads in progress: the bundle must not go back
	// to From, and goes to To when To is live.
	Unloads map[ID]Unload
	// Settling are bundles that moved lately: Shed does not pick them, so
	// that a bundle just placed (by an unload, a takeover or shedding) is
	// not moved again at once.
	Settling map[ID]bool
	// Threshold is the imbalance a broker tolerates before it sheds: it
	// sheds while it owns at least Threshold+1 more bundles than the least
	// loaded live broker. < 1 is taken as 1.
	Threshold int
	// Loads, when set, is Load's answer computed once for a round of
	// decisions over this View (Acquirer is asked for every unowned
	// bundle; counting the owners each time made a round O(bundles²)).
	Loads map[string]int
}

// Unload is an admin unload of a bundle (strata admin bundles unload).
type Unload struct {
	From, To string
}

// Load returns the number of bundles each live broker owns (zero for
// those owning none).
func (v View) Load() map[string]int {
	if v.Loads != nil {
		return v.Loads
	}
	load := make(map[string]int, len(v.Brokers))
	for _, b := range v.Brokers {
		load[b] = 0
	}
	for _, o := range v.Owners {
		if _, live := load[o]; live {
			load[o]++
		}
	}
	return load
}

// Acquirer returns the broker that should acquire bundle id now that it
// has no owner: an unload's live target; else the live broker with the
// fewest bundles other than the unload's source, ties broken by the
// highest rendezvous score of (id, broker). "" when no live broker may.
func (v View) Acquirer(id ID) string {
	u := v.Unloads[id]
	live := map[string]bool{}
	for _, b := range v.Brokers {
		live[b] = true
	}
	if u.To != "" && live[u.To] {
		return u.To
	}
	load := v.Load()
	best, bestLoad, bestScore := "", 0, uint64(0)
	for _, b := range sorted(v.Brokers) {
		if b == u.From && len(v.Brokers) > 1 {
			continue
		}
		l, s := load[b], score(id, b)
		if best == "" || l < bestLoad || (l == bestLoad && s > bestScore) {
			best, bestLoad, bestScore = b, l, s
		}
	}
	return best
}

// Shed returns a bundle that broker self should hand over now, if it
// owns at least Threshold+1 more bundles than the least loaded live
// broker: of its bundles not Settling, the one with the lowest
// rendezvous score for self (the one it is least suited to keep). ok is
// false when self is balanced, not live, or owns only settling bundles.
func (v View) Shed(self string) (id ID, ok bool) {
	load := v.Load()
	mine, live := load[self]
	if !live {
		return ID{}, false
	}
	least := mine
	for _, l := range load {
		least = min(least, l)
	}
	if mine-least < max(v.Threshold, 1)+1 {
		return ID{}, false
	}
	var bestScore uint64
	for b, o := range v.Owners {
		if o != self || v.Settling[b] {
			continue
		}
		if s := score(b, self); !ok || s < bestScore || (s == bestScore && b.String() < id.String()) {
			id, bestScore, ok = b, s, true
		}
	}
	return id, ok
}

// score is the rendezvous (highest random weight) score of broker for
// bundle id: FNV-1a 64 of both names.
func score(id ID, broker string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id.String()))
	h.Write([]byte{0})
	h.Write([]byte(broker))
	return h.Sum64()
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
