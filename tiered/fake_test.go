package tiered

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/stratamesh/strata/bookie/ledger"
)

// errNotFound is the fake store's missing-object error.
var errNotFound = errors.New("memstore: object not found")

// memStore is an in-memory ObjectStore with fault injection and counters.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte

	puts       int           // Put calls so far
	failPut    map[int]error // the n-th Put (1-based) fails with this, after reading some of its input
	failRead   map[string]error
	corrupt    map[string]int64 // flip a byte at this offset (< 0: from the end) of the named object as it is stored
	rangeReads int64
	bytesRead  int64
}

func newMemStore() *memStore {
	return &memStore{objects: map[string][]byte{}, failPut: map[int]error{}, failRead: map[string]error{}, corrupt: map[string]int64{}}
}

func (s *memStore) Put(ctx context.Context, name string, r io.Reader, size int64) error {
	s.mu.Lock()
	s.puts++
	failErr := s.failPut[s.puts]
	s.mu.Unlock()
	if failErr != nil {
		// Read a little, as a real upload would before failing.
		_, _ = io.CopyN(io.Discard, r, 1000)
		return failErr
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		return fmt.Errorf("memstore: put %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b := buf.Bytes()
	if size >= 0 && int64(len(b)) != size {
		return fmt.Errorf("memstore: put %s: %d bytes, announced %d", name, len(b), size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if off, ok := s.corrupt[name]; ok && len(b) > 0 {
		if off < 0 {
			off += int64(len(b))
		}
		b[off] ^= 0x40
	}
	s.objects[name] = b
	return nil
}

func (s *memStore) NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rangeReads++
	if err := s.failRead[name]; err != nil {
		return nil, err
	}
	b, ok := s.objects[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errNotFound, name)
	}
	if off < 0 || off > int64(len(b)) {
		return nil, fmt.Errorf("memstore: %s: offset %d past the end (%d bytes)", name, off, len(b))
	}
	end := int64(len(b))
	if length >= 0 {
		end = min(end, off+length)
	}
	s.bytesRead += end - off
	return io.NopCloser(bytes.NewReader(slices.Clone(b[off:end]))), nil
}

func (s *memStore) Delete(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, name)
	return nil
}

// names lists the objects held, sorted.
func (s *memStore) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.objects {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (s *memStore) counters() (rangeReads, bytesRead int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rangeReads, s.bytesRead
}

func (s *memStore) object(name string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[name]
}

func (s *memStore) set(f func(s *memStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// fakeSource is a ledger of last+1 entries whose payloads are a function
// of (seed, id): sizes log-uniform in 0..maxSize, so that both tiny entries
// and entries spanning several blocks occur.
type fakeSource struct {
	seed    uint64
	last    int64
	maxSize int
	fixed   int // if > 0, every payload has this size

	mu     sync.Mutex
	reads  int
	failAt int64 // a Read covering this id fails (−1: never)
	failN  int   // … this many times (0: always)
	wrong  bool  // return entry ids shifted by one
}

var errSource = errors.New("fake source: bookie unreachable")

func newSource(seed uint64, last int64, maxSize int) *fakeSource {
	return &fakeSource{seed: seed, last: last, maxSize: maxSize, failAt: -1}
}

// payload is entry id's payload.
func (f *fakeSource) payload(id int64) []byte {
	rng := rand.New(rand.NewPCG(f.seed, uint64(id)))
	size := f.fixed
	if f.fixed <= 0 && f.maxSize > 0 {
		size = min(rng.IntN(1<<rng.IntN(18)), f.maxSize)
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[0:8], f.seed)
	binary.LittleEndian.PutUint64(seed[8:16], uint64(id))
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

// length is the sum of the payload sizes.
func (f *fakeSource) length() int64 {
	var n int64
	for id := int64(0); id <= f.last; id++ {
		n += int64(len(f.payload(id)))
	}
	return n
}

func (f *fakeSource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.reads++
	failAt := f.failAt
	fail := failAt >= first && failAt <= last
	if fail && f.failN > 0 {
		f.failN--
		if f.failN == 0 {
			f.failAt = -1
		}
	}
	wrong := f.wrong
	f.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("%w: entry %d", errSource, failAt)
	}
	if first < 0 || last > f.last || last < first {
		return nil, fmt.Errorf("fake source: read %d..%d of 0..%d", first, last, f.last)
	}
	out := make([]ledger.Entry, 0, last-first+1)
	for id := first; id <= last; id++ {
		e := ledger.Entry{ID: id, Payload: f.payload(id)}
		if wrong && id == last {
			e.ID++
		}
		out = append(out, e)
	}
	return out, nil
}
