package pebblevfs

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/goleak"

	"github.com/stratamesh/strata/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func open(t *testing.T, fsys vfs.FS) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("/db", &pebble.Options{FS: New(fsys), Logger: quiet{}, FormatMajorVersion: pebble.FormatNewest})
	if err != nil {
		t.Fatalf("open pebble: %v", err)
	}
	return db
}

// TestPebbleSurvivesCrashOfMemFS: what pebble committed with Sync is there
// after a crash of the MemFS under it, including after a flush to sstables.
func TestPebbleSurvivesCrashOfMemFS(t *testing.T) {
	m := vfs.NewMem()
	db := open(t, m)
	for i := 0; i < 100; i++ {
		if err := db.Set([]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint(i)), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if i == 50 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	crashed := m.CrashClone()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := open(t, crashed)
	defer db2.Close()
	for i := 0; i < 100; i++ {
		v, closer, err := db2.Get([]byte(fmt.Sprintf("k%03d", i)))
		if err != nil {
			t.Fatalf("k%03d after crash: %v", i, err)
		}
		if string(v) != fmt.Sprint(i) {
			t.Fatalf("k%03d = %q", i, v)
		}
		closer.Close()
	}
	// A second pebble on the same directory in this process is refused.
	if _, err := pebble.Open("/db", &pebble.Options{FS: New(crashed), Logger: quiet{}}); err == nil {
		t.Fatal("second open of a locked directory succeeded")
	}
}
