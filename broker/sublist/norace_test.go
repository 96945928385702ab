//go:build !race

package sublist

// raceEnabled says whether the race detector is on (it makes allocation
// counts unreliable).
const raceEnabled = false
