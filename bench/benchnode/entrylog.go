package benchnode

import (
	"fmt"
	"os"
	"syscall"
)

// EntryLogLoad writes to an entry log alongside a raw journal loop what a
// bookie's write-cache flush writes there: every entry a second time,
// appended in 1 MiB writes with writeback started after each
// (sync_file_range(2)) and a data sync every 64 MiB. With it the raw loop
// puts on the disk the bytes a bookie with its journal and entry logs on
// one disk must write, so its figure is that bookie's physical limit.
type EntryLogLoad struct {
	bytes chan int
	done  chan struct{}
	err   error
}

// StartEntryLogLoad creates the entry log file name and starts its
// writer. Errors: the file cannot be created.
func StartEntryLogLoad(name string) (*EntryLogLoad, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, fmt.Errorf("entry log load: %w", err)
	}
	l := &EntryLogLoad{bytes: make(chan int, 1024), done: make(chan struct{})}
	go l.run(f)
	return l, nil
}

// Add queues n bytes (one batch's entries) for the entry log.
func (l *EntryLogLoad) Add(n int) { l.bytes <- n }

// Stop waits for the queued bytes to be written and returns the first
// write or sync error.
func (l *EntryLogLoad) Stop() error {
	close(l.bytes)
	<-l.done
	return l.err
}

func (l *EntryLogLoad) run(f *os.File) {
	defer close(l.done)
	defer f.Close()
	const syncEvery = 64 << 20
	chunk := make([]byte, 1<<20)
	var off, pending, unsynced int64
	for n := range l.bytes {
		if l.err != nil {
			continue // drain, so Add never blocks for good
		}
		pending += int64(n)
		for pending >= int64(len(chunk)) && l.err == nil {
			if _, err := f.WriteAt(chunk, off); err != nil {
				l.err = err
				break
			}
			_ = syscall.SyncFileRange(int(f.Fd()), off, int64(len(chunk)), 0x2) // SYNC_FILE_RANGE_WRITE: a hint
			off += int64(len(chunk))
			pending -= int64(len(chunk))
			if unsynced += int64(len(chunk)); unsynced >= syncEvery {
				l.err = syscall.Fdatasync(int(f.Fd()))
				unsynced = 0
			}
		}
	}
}
