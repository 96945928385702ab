package testutil

import (
	"bufio"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// StalledSubscriber connects to a NATS server at addr with a 4 KiB socket
// receive buffer (so the kernel absorbs little of what the server sends),
// subscribes to subject (sid 1), waits for the server to confirm it (PONG)
// and returns the connection, which the caller then never reads: a slow
// consumer. The connection is closed when the test ends.
func StalledSubscriber(t testing.TB, addr, subject string) net.Conn {
	t.Helper()
	c := DialSmallWindow(t, addr)
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB %s 1\r\nPING\r\n", subject); err != nil {
		t.Fatal(err)
	}
	if l, err := br.ReadString('\n'); err != nil || l != "PONG\r\n" {
		t.Fatalf("subscribe %s: got %q, %v", subject, l, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c
}

// DialSmallWindow connects to addr over TCP with a 4 KiB socket receive
// buffer; the connection is closed when the test ends.
func DialSmallWindow(t testing.TB, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
