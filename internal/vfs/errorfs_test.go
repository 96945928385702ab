package vfs

import (
	"errors"
	"testing"
)

func TestFailNthSync(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	boom := errors.New("boom")
	inj := NewFailNth(2, OnKind(OpSync), boom)
	e := NewErrorFS(m, inj)
	f, err := e.Create("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "one")
	if err := f.Sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	mustWrite(t, f, "two")
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("second sync: want boom, got %v", err)
	}
	if err := SyncData(f); err != nil {
		t.Fatalf("third sync: %v", err)
	}
	if inj.Seen() != 3 {
		t.Fatalf("seen %d syncs", inj.Seen())
	}
	// The failed sync did nothing: only the third made "onetwo" durable.
	e.SyncDir("/d")
	if got := mustRead(t, m.CrashClone(), "/d/a"); got != "onetwo" {
		t.Fatalf("durable: %q", got)
	}
}

func TestFailAllMatchingWrites(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d/j", 0o755)
	m.MkdirAll("/d/l", 0o755)
	e := NewErrorFS(m, nil)
	j, _ := e.Create("/d/j/1")
	l, _ := e.Create("/d/l/1")
	e.SetInjector(FailAll(And(OnKind(OpWrite), InDir("/d/j")), nil))
	if _, err := j.Write([]byte("x")); !errors.Is(err, ErrInjected) {
		t.Fatalf("journal write: %v", err)
	}
	if _, err := j.WriteAt([]byte("x"), 5); !errors.Is(err, ErrInjected) {
		t.Fatalf("journal writeAt: %v", err)
	}
	if _, err := l.Write([]byte("x")); err != nil {
		t.Fatalf("other dir write: %v", err)
	}
	if st, _ := m.Stat("/d/j/1"); st.Size() != 0 {
		t.Fatalf("failed write reached the file: size %d", st.Size())
	}
	var seen []Op
	e.SetInjector(InjectorFunc(func(op Op) error { seen = append(seen, op); return nil }))
	if _, err := l.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != (Op{Kind: OpWrite, Path: "/d/l/1", Off: 1, Len: 3}) {
		t.Fatalf("ops seen: %+v", seen)
	}
	e.SetInjector(nil)
	if _, err := j.Write([]byte("x")); err != nil {
		t.Fatalf("after disarming: %v", err)
	}
}
