// Command bulkwrite measures what writing a large file costs the CPU,
// written through the page cache or with direct I/O: the question behind
// the bookie's entry logs, which a flush writes megabytes at a time. It
// writes -mib MiB to a new file in -chunk-byte writes, fdatasync(2) after
// every -sync-every bytes, and prints the wall time, MB/s, this process's
// CPU time per MiB written and the whole machine's busy CPU time per MiB
// (from /proc/stat, so the kernel's write-back threads count too).
//
//	go run ./bench/bulkwrite -mode buffered
//	go run ./bench/bulkwrite -mode direct
//
// Buffered writes are followed by sync_file_range(SYNC_FILE_RANGE_WRITE),
// as the entry log writer's page-cache fallback does. docs/perf.md (issue
// 3) has the figures.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratamesh/strata/internal/vfs"
)

func main() {
	mode := flag.String("mode", "buffered", "buffered: through the page cache; direct: O_DIRECT")
	mib := flag.Int("mib", 2048, "MiB to write")
	chunk := flag.Int("chunk", 1<<20, "bytes per write (a multiple of 4096)")
	syncEvery := flag.Int("sync-every", 16<<20, "bytes between fdatasyncs (a multiple of -chunk)")
	dir := flag.String("dir", ".", "directory for the file (on the disk to measure; removed after)")
	flag.Parse()
	if err := run(*dir, *mode, int64(*mib)<<20, *chunk, *syncEvery); err != nil {
		fmt.Fprintln(os.Stderr, "bulkwrite:", err)
		os.Exit(1)
	}
}

func run(dir, mode string, total int64, chunk, syncEvery int) error {
	if chunk <= 0 || chunk%vfs.DirectAlignment != 0 || syncEvery < chunk || syncEvery%chunk != 0 || total < int64(chunk) {
		return fmt.Errorf("-chunk must be a positive multiple of %d, -sync-every a multiple of -chunk, -mib at least one chunk", vfs.DirectAlignment)
	}
	name := filepath.Join(dir, fmt.Sprintf("bulkwrite-%d.tmp", os.Getpid()))
	defer os.Remove(name)
	var f vfs.File
	var err error
	switch mode {
	case "buffered":
		f, err = vfs.Default.Create(name)
	case "direct":
		var direct bool
		f, direct, err = vfs.CreateDirect(vfs.Default, name)
		if err == nil && !direct {
			f.Close()
			return fmt.Errorf("the file system under %s has no direct I/O", dir)
		}
	default:
		return fmt.Errorf("-mode %q: want buffered or direct", mode)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	buf := vfs.AlignedBuffer(chunk)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	busy0, err := machineBusy()
	if err != nil {
		return err
	}
	start := time.Now()
	for off := int64(0); off+int64(chunk) <= total; off += int64(chunk) {
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
		if mode == "buffered" {
			vfs.StartWriteback(f, off, int64(chunk))
		}
		if (off+int64(chunk))%int64(syncEvery) == 0 {
			if err := vfs.SyncData(f); err != nil {
				return err
			}
		}
	}
	if err := vfs.SyncData(f); err != nil {
		return err
	}
	wall := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	busy1, err := machineBusy()
	if err != nil {
		return err
	}
	mibs := float64(total) / (1 << 20)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	fmt.Printf("%s: %.0f MiB in %v, %.0f MB/s; CPU per MiB: this process %.2f ms, whole machine %.2f ms\n",
		mode, mibs, wall.Round(time.Millisecond), float64(total)/wall.Seconds()/1e6,
		float64(cpu)/1e6/mibs, float64(busy1-busy0)/1e6/mibs)
	return nil
}

// machineBusy is the machine's busy CPU time so far (all but idle and
// iowait), from /proc/stat's first line, in clock ticks converted to
// nanoseconds at unix USER_HZ (100 on Linux).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for i, s := range fields[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %v", err)
		}
		if i != 3 && i != 4 { // idle, iowait
			ticks += v
		}
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}
