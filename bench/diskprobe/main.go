// Command diskprobe measures how fast this machine's disk makes small
// writes durable, the ways a journal could: one write+fdatasync(2) at a
// time, several at once from concurrent writers, with pwritev2(RWF_DSYNC),
// or through O_DIRECT|O_DSYNC. Every write overwrites part of a file that
// was zero-filled and synced first, so no write allocates blocks or changes
// the file's size. It prints writes/s, the wall time per write (1 ÷
// writes/s), how long each write took its writer (that times the number of
// writers) and MB/s.
//
//	go run ./bench/diskprobe -mode fdatasync -q 2 -bytes 151552
//
// docs/perf.md (issue 3) has its figures and what the bookie made of them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const fileBytes = 64 << 20 // the zero-filled file the writes cycle through

func main() {
	size := flag.Int("bytes", 151552, "bytes per write (rounded up to 4 KiB for -mode direct)")
	n := flag.Int("n", 4000, "writes in all")
	q := flag.Int("q", 1, "concurrent writers; they take the file's -bytes-sized slots in turn (there must be at least one slot per writer)")
	mode := flag.String("mode", "fdatasync", "fdatasync: pwrite then fdatasync; dsync: pwritev2 with RWF_DSYNC; direct: pwrite on an O_DIRECT|O_DSYNC descriptor")
	dir := flag.String("dir", ".", "directory for the probe's 64 MiB file (on the disk to measure; removed after, also on SIGINT or SIGTERM)")
	flag.Parse()
	if err := run(*dir, *mode, *size, *n, *q); err != nil {
		fmt.Fprintln(os.Stderr, "diskprobe:", err)
		os.Exit(1)
	}
}

func run(dir, mode string, size, n, q int) error {
	if size <= 0 || size > fileBytes || n <= 0 || q <= 0 {
		return fmt.Errorf("-bytes must be in (0, %d], -n and -q positive", fileBytes)
	}
	if mode == "direct" {
		size = (size + 4095) &^ 4095
	} else if mode != "fdatasync" && mode != "dsync" {
		return fmt.Errorf("-mode %q: want fdatasync, dsync or direct", mode)
	}
	if fileBytes/size < q {
		return fmt.Errorf("-q %d writers need at least %d slots of -bytes %d in the %d-byte file", q, q, size, fileBytes)
	}
	name := filepath.Join(dir, fmt.Sprintf("diskprobe-%d.tmp", os.Getpid()))
	defer os.Remove(name)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		os.Remove(name)
		os.Exit(130)
	}()
	if err := zeroFile(name); err != nil {
		return err
	}
	flags := os.O_RDWR
	if mode == "direct" {
		flags |= unix.O_DIRECT | unix.O_DSYNC
	}
	f, err := os.OpenFile(name, flags, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := alignedBuffer(size)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	fd := int(f.Fd())
	write := func(off int64) error {
		switch mode {
		case "dsync":
			_, err := unix.Pwritev2(fd, [][]byte{buf}, off, unix.RWF_DSYNC)
			return err
		case "direct":
			_, err := f.WriteAt(buf, off)
			return err
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
		return unix.Fdatasync(fd)
	}
	slots := int64(fileBytes / size)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, q)
	start := time.Now()
	for w := range q {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := write((i % slots) * int64(size)); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	wall := elapsed.Seconds() * 1e6 / float64(n)
	fmt.Printf("mode %s, %d writer(s), %d B per write: %.0f writes/s, %.0f µs of wall time per write, %.0f µs per write for its writer, %.0f MB/s\n",
		mode, q, size, float64(n)/elapsed.Seconds(), wall, wall*float64(q),
		float64(n)*float64(size)/elapsed.Seconds()/1e6)
	return nil
}

// zeroFile creates name holding fileBytes durable zero bytes.
func zeroFile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < fileBytes && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros, off)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// alignedBuffer returns size bytes starting on a 4 KiB boundary, as
// O_DIRECT requires.
func alignedBuffer(size int) []byte {
	raw := make([]byte, size+4096)
	skip := (4096 - int(uintptr(unsafe.Pointer(&raw[0]))&4095)) & 4095
	return raw[skip : skip+size]
}
