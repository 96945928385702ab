package mledger

// subjectIndex is the per-subject index (last sequence and count per
// exact subject) in two views: every appended message (head: what
// Nats-Expected-Last-Subject-Sequence is checked against) and confirmed
// messages only (what readers are told). Plain data.
//
// Counts cover the messages from the core's counted sequence on: a
// trimmed message is subtracted (forget) when the core learns its
// subject, so counts may exceed the live messages until then; a
// subject's last sequence is exact, and a subject whose last sequence is
// below FirstSeq has no live message.
type subjectIndex struct {
	m       map[string]*subjectState
	numConf int // subjects with cCount > 0
}

type subjectState struct {
	last, count   uint64 // every appended message
	cLast, cCount uint64 // confirmed messages
}

func newSubjectIndex() subjectIndex { return subjectIndex{m: map[string]*subjectState{}} }

// assign counts seq (newly appended) under subject.
func (x *subjectIndex) assign(subject string, seq uint64) {
	s := x.m[subject]
	if s == nil {
		s = &subjectState{}
		x.m[subject] = s
	}
	s.last = seq
	s.count++
}

// confirm counts seq (confirmed, assigned before) in the confirmed view.
func (x *subjectIndex) confirm(subject string, seq uint64) {
	s := x.m[subject]
	if s == nil { // not assigned through this index (never in the ML's own flow)
		s = &subjectState{last: seq, count: 1}
		x.m[subject] = s
	}
	if s.cCount == 0 {
		x.numConf++
	}
	s.cLast = seq
	s.cCount++
}

// forget subtracts n confirmed messages of subject (trimmed ones).
func (x *subjectIndex) forget(subject string, n uint64) {
	s := x.m[subject]
	if s == nil {
		return
	}
	if n = min(n, s.cCount); n == 0 {
		return
	}
	s.count -= min(n, s.count)
	s.cCount -= n
	if s.cCount == 0 {
		x.numConf--
	}
	if s.count == 0 {
		delete(x.m, subject)
	}
}

// forgetConfirmed subtracts every confirmed message (all of them are
// trimmed: a purge).
func (x *subjectIndex) forgetConfirmed() {
	for subj, s := range x.m {
		s.count -= min(s.cCount, s.count)
		s.cCount = 0
		if s.count == 0 {
			delete(x.m, subj)
		}
	}
	x.numConf = 0
}

// lastHead is subject's last appended sequence at or above first (0 if
// none).
func (x *subjectIndex) lastHead(subject string, first uint64) uint64 {
	if s := x.m[subject]; s != nil && s.count > 0 && s.last >= first {
		return s.last
	}
	return 0
}

// lastConf is subject's last confirmed sequence at or above first, and
// its count (0, 0 if none).
func (x *subjectIndex) lastConf(subject string, first uint64) (uint64, uint64) {
	if s := x.m[subject]; s != nil && s.cCount > 0 && s.cLast >= first {
		return s.cLast, s.cCount
	}
	return 0, 0
}
