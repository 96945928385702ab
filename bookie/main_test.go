package bookie

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	"github.com/stratamesh/strata/bookie/bookietest"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
)

func TestMain(m *testing.M) { metatest.Main(m) }

// openStore opens a Store on the shared test etcd under a prefix unique
// to the test.
func openStore(t *testing.T) *meta.Store { return metatest.OpenStore(t) }

// testCtx is canceled when the test ends and bounds every call in it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// harness is a Server over a bookietest.Mem on a real loopback listener.
type harness struct {
	mem      *bookietest.Mem
	srv      *Server
	addr     string
	instance string
}

func startHarness(t testing.TB, mod ...func(*ServerConfig)) *harness {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{mem: bookietest.NewMem(), addr: lis.Addr().String(), instance: uuid.NewString()}
	cfg := ServerConfig{Storage: h.mem, BookieID: "b1", Instance: h.instance, Address: h.addr}
	for _, f := range mod {
		f(&cfg)
	}
	h.srv = NewServer(cfg)
	gs := grpc.NewServer(ServerOptions()...)
	h.srv.Register(gs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		h.srv.Shutdown()
		gs.Stop()
		<-served
		h.srv.Close()
		h.mem.Close()
	})
	return h
}

// dial returns a client naming instance ("" : the harness's own).
func (h *harness) dial(t *testing.T, instance string) *Client {
	t.Helper()
	if instance == "" {
		instance = h.instance
	}
	c, err := Dial(testCtx(t), h.addr, DialOptions{Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openAdds opens an add stream closed (with a deadline) at the end of the test.
func openAdds(t *testing.T, c *Client) *AddStream {
	t.Helper()
	s, err := c.NewAddStream(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

var key = []byte("master-key")

// addReq is an add of entry e to ledger l with the LAC e-1.
func addReq(l, e int64) storage.AddRequest {
	return storage.AddRequest{LedgerID: l, EntryID: e, LAC: e - 1, MasterKey: key, Payload: fmt.Appendf(nil, "l%d-e%d", l, e)}
}

// addSync sends one add and waits for its outcome.
func addSync(t *testing.T, s *AddStream, req storage.AddRequest) error {
	t.Helper()
	ch := make(chan error, 1)
	if err := s.Send(req, func(err error) { ch <- err }); err != nil {
		return err
	}
	return recv(t, ch, 10*time.Second, "add outcome")
}

// recv takes one value from ch or fails the test after timeout.
func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	panic("unreachable")
}
