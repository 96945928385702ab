package replicator

import "time"

// Health is a sender's state as `strata status` shows it.
type Health uint8

const (
	// Replicating: sending (or caught up), not waiting for a retry.
	Replicating Health = iota + 1
	// BackingOff: the last attempts failed (failures in a row since the
	// last progress): waiting for the retry time, or retrying and not yet
	// answered. The first success makes it Replicating again.
	BackingOff
	// Stalled: the backlog has not been empty and the position has not
	// moved for Config.StallAfter. The sender keeps retrying; it leaves
	// this state on its next progress.
	Stalled
)

func (h Health) String() string {
	switch h {
	case Replicating:
		return "replicating"
	case BackingOff:
		return "backing-off"
	case Stalled:
		return "stalled"
	}
	return "unknown"
}

// Lag is how far the remote is behind this origin, computed from the
// Source on every call (never a cached zero).
type Lag struct {
	// Msgs is the origin's last sequence minus the position: messages the
	// remote has not acknowledged, trimmed ones included.
	Msgs uint64
	// Bytes is the size of those still stored (Source.Backlog).
	Bytes uint64
	// Age is how old the oldest of them is: now minus its origin time;
	// when only trimmed ones remain (a gap record to send), the time
	// since the backlog last made progress. Zero when Msgs is 0.
	Age time.Duration
}

// Stats are counters over the sender's life (not persisted).
type Stats struct {
	Batches      uint64 // batches sent, gap records included
	Sent         uint64 // messages put in batches, resends included
	Resent       uint64 // of Sent, messages sent before in this life
	GapRecords   uint64 // gap records sent
	Duplicates   uint64 // Duplicate answers
	GapRefusals  uint64 // GapRefused answers
	Failures     uint64 // Failed answers
	Timeouts     uint64 // batches that got no answer within AckTimeout
	StaleAnswers uint64 // answers to batches no longer in flight
	Regressions  uint64 // refusals below the position (the remote lost state)
	Learned      uint64 // sequences acknowledged through a third region (Sender.Learn)
	Probes       uint64 // probe batches sent (Sender.Probe)
}

// Status is a sender's health, window and lag at one time.
type Status struct {
	Remote   string
	Health   Health
	Position uint64 // SenderState.Position
	Next     uint64 // the next origin sequence to send
	InFlight uint64 // sequences sent and unanswered (a gap record counts 1)
	Lag      Lag
	// LastSuccess is the time of the last Stored or Duplicate answer
	// (zero when none in this life).
	LastSuccess time.Time
	// RetryAt is when sending resumes (meaningful while BackingOff, and
	// while Stalled after a failure).
	RetryAt time.Time
	// Failures counts failures in a row since the last progress.
	Failures int
	// LastError is the latest failure since the last progress, nil if none.
	LastError error
	Stats     Stats
}

// Health is the sender's state at now (see Health's values).
func (s *Sender) Health(now time.Time) Health {
	switch {
	case !s.behindFrom.IsZero() && s.src.LastSeq() > s.acked && now.Sub(s.behindFrom) >= s.cfg.StallAfter:
		return Stalled
	case now.Before(s.retryAt) || s.failures > 0:
		return BackingOff
	}
	return Replicating
}

// Lag is the remote's lag behind this origin at now.
func (s *Sender) Lag(now time.Time) Lag {
	last := s.src.LastSeq()
	if last <= s.acked {
		return Lag{}
	}
	bytes, oldest := s.src.Backlog(s.acked)
	l := Lag{Msgs: last - s.acked, Bytes: bytes}
	switch {
	case !oldest.IsZero():
		l.Age = now.Sub(oldest)
	case !s.behindFrom.IsZero():
		l.Age = now.Sub(s.behindFrom)
	}
	l.Age = max(l.Age, 0)
	return l
}

// Status returns the sender's status at now. It reads the Source (for
// the lag) and changes nothing.
func (s *Sender) Status(now time.Time) Status {
	return Status{
		Remote:      s.remote,
		Health:      s.Health(now),
		Position:    s.acked,
		Next:        s.next,
		InFlight:    s.n,
		Lag:         s.Lag(now),
		LastSuccess: s.lastOK,
		RetryAt:     s.retryAt,
		Failures:    s.failures,
		LastError:   s.lastErr,
		Stats:       s.stats,
	}
}
