package memblob

import "errors"

// Op names a Store operation for fault injection and call counts.
type Op int

// Operations.
const (
	OpPut    Op = iota + 1 // Put
	OpRead                 // NewRangeReader
	OpStat                 // Stat
	OpList                 // List
	OpDelete               // Delete
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpRead:
		return "read"
	case OpStat:
		return "stat"
	case OpList:
		return "list"
	case OpDelete:
		return "delete"
	}
	return "op?"
}

// ErrInjected is the error of a Fault whose Err is nil.
var ErrInjected = errors.New("memblob: injected fault")

// Fault makes one future call fail. Calls are counted per Fault from the
// moment it is injected; it fires once, on the Nth matching call, and is
// then forgotten.
type Fault struct {
	// Op is the operation that fails.
	Op Op
	// Nth is which matching call fails: 1 (or 0) is the next one.
	Nth int
	// Name restricts the fault to calls on this object name (for OpList:
	// this prefix); "" matches every call of Op.
	Name string
	// Err is returned, wrapped with the store's detail; nil means
	// ErrInjected.
	Err error
	// AfterBytes makes the failure happen mid-stream. OpPut: the body is
	// read up to this many bytes before Put fails (nothing is stored, as
	// for any failed Put). OpRead: when > 0 the open succeeds and the
	// reader returns this many bytes, then fails; otherwise the open
	// fails. Ignored for other ops.
	AfterBytes int64
}

func (f *Fault) err() error {
	if f.Err == nil {
		return ErrInjected
	}
	return f.Err
}

// Inject arms f. Several faults may be armed at once; each call consumes
// at most one (the first armed that fires).
func (s *Store) Inject(f Fault) {
	if f.Nth <= 0 {
		f.Nth = 1
	}
	s.mu.Lock()
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// Calls returns how many times op was called (including calls that
// failed), for tests that check access patterns such as read-ahead.
func (s *Store) Calls(op Op) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.calls[op]
}

// fault counts a call of op on name and returns the fault that fires for
// it, if any.
func (s *Store) fault(op Op, name string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	var fired *Fault
	for i := 0; i < len(s.faults); i++ {
		f := s.faults[i]
		if f.Op != op || (f.Name != "" && f.Name != name) {
			continue
		}
		switch {
		case f.Nth > 1:
			f.Nth--
		case fired == nil:
			fired = f
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			i--
		}
		// A second fault due on this call stays due: it fires on the
		// next one.
	}
	return fired
}
