package region

import (
	"errors"
	"fmt"
	"net"
	"testing"
)

// TestWithPortFallsBackOnlyOnBind: a remembered port that cannot be bound
// any more gives way to a fresh one; any other start error (a bookie's
// cookie mismatch, say) is returned at once, not repeated on a new port
// and wrapped as if the port were to blame.
func TestWithPortFallsBackOnlyOnBind(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	remembered := busy.Addr().(*net.TCPAddr).Port
	var tried []int
	listen := func(port int) (net.Listener, error) {
		tried = append(tried, port)
		return net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	}
	ln, err := withPort(0, remembered, listen)
	if err != nil {
		t.Fatalf("withPort with the remembered port taken: %v", err)
	}
	ln.Close()
	if len(tried) != 2 || tried[0] != remembered || tried[1] != 0 {
		t.Fatalf("ports tried %v, want the remembered one then a fresh one", tried)
	}

	tried = nil
	mismatch := errors.New("bookie: cookie mismatch: the data directory belongs to bookie \"k2\"")
	_, err = withPort(0, remembered, func(port int) (int, error) {
		tried = append(tried, port)
		return 0, mismatch
	})
	if err != mismatch || len(tried) != 1 {
		t.Fatalf("withPort with a non-bind failure = %v after ports %v; want the error as it is, after one try", err, tried)
	}
}

func TestIsBindError(t *testing.T) {
	for msg, want := range map[string]bool{
		"Failed to start TCP listener on \"127.0.0.1\" port 7946: listen tcp 127.0.0.1:7946: bind: address already in use": true,
		"listen tcp 10.9.9.9:80: bind: cannot assign requested address":                                                    true,
		"bookie: cookie mismatch": false,
	} {
		if got := isBindError(errors.New(msg)); got != want {
			t.Errorf("isBindError(%q) = %v", msg, got)
		}
	}
}
