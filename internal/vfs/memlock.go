package vfs

import (
	"fmt"
	"io"
	"sync"
)

// Lock implements Locker: one holder per name (cleaned) until the
// returned io.Closer is closed or the MemFS crashes (Crash: the holder's
// process is gone). The file is created as the OS file system's is.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	m.mu.Lock()
	if _, held := m.locks[name]; held {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is held by another holder", ErrLocked, name)
	}
	if m.locks == nil {
		m.locks = map[string]uint64{}
	}
	m.locks[name] = m.gen
	gen := m.gen
	m.mu.Unlock()
	if _, err := m.Stat(name); err != nil {
		f, cerr := m.Create(name)
		if cerr != nil {
			m.unlock(name, gen)
			return nil, cerr
		}
		f.Close()
	}
	return &memLock{m: m, name: name, gen: gen}, nil
}

func (m *MemFS) unlock(name string, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if g, ok := m.locks[name]; ok && g == gen {
		delete(m.locks, name)
	}
}

type memLock struct {
	m    *MemFS
	name string
	gen  uint64
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() { l.m.unlock(l.name, l.gen) })
	return nil
}
