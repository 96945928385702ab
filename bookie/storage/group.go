package storage

import "time"

// groupPolicy is the group-commit decision, as a pure function of the
// pending batch and the time: when to write and fsync what has arrived.
type groupPolicy struct {
	window   time.Duration // longest wait for companions at an idle journal
	maxBytes int           // a batch this large is written at once
}

// groupState is what the journal knows about its pending batch.
type groupState struct {
	count int       // records pending
	bytes int       // their encoded size
	first time.Time // arrival of the oldest pending record
	// firstWhileBusy: the oldest pending record arrived while a batch was
	// being written. It has already waited for the disk, which is the
	// best batching window there is; waiting longer only adds latency.
	firstWhileBusy bool
	closing        bool // the journal is closing: write what is left
}

// decide reports whether to write the pending batch now; if not, wait is
// how long until the window ends (0: nothing pending, wait for an
// arrival).
func (p groupPolicy) decide(s groupState, now time.Time) (write bool, wait time.Duration) {
	switch {
	case s.count == 0:
		return false, 0
	case s.closing, s.firstWhileBusy, s.bytes >= p.maxBytes:
		return true, 0
	}
	age := now.Sub(s.first)
	if age >= p.window {
		return true, 0
	}
	return false, p.window - age
}
