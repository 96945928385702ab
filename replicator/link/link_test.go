package link

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/broker"
)

// startBroker starts a Strata broker on a free port and an echo
// responder on subject "repl.test" that answers "ok:<payload>".
func startBroker(t *testing.T, name string) *broker.Server {
	t.Helper()
	srv, err := broker.Start(broker.Config{ServerName: name, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe("repl.test", func(m *nats.Msg) { _ = m.Respond(append([]byte("ok:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return srv
}

// brokers is a Config.Brokers whose list a test changes.
type brokers struct {
	mu   sync.Mutex
	urls []string
}

func (b *brokers) set(urls ...string) { b.mu.Lock(); b.urls = urls; b.mu.Unlock() }
func (b *brokers) get() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.urls...)
}

// request publishes on the link until an answer comes back on the
// sender's channel (the link dials in the background).
func request(t *testing.T, l *Link, prefix string, answers <-chan []byte, data string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if err := l.Publish("repl.test", prefix+"1", []byte(data)); err != nil {
			if !errors.Is(err, ErrNotConnected) {
				t.Fatalf("Publish: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case a := <-answers:
			return string(a)
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Fatalf("no answer to %q", data)
	return ""
}

// TestLinkRequestsAndMovesToAnotherBroker: a link dials the broker its
// membership callback lists, gets answers on the registered sender's
// channel only, reports its status; when that broker dies and another
// is listed, it dials the other by itself.
func TestLinkRequestsAndMovesToAnotherBroker(t *testing.T) {
	var bs brokers
	l, err := New(Config{Remote: "eu-west", Brokers: bs.get, Redial: 300 * time.Millisecond, Check: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Publish("repl.test", "x", nil); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Publish with no broker listed: %v, want ErrNotConnected", err)
	}
	if st := l.Status(); st.Connected || st.Remote != "eu-west" {
		t.Fatalf("status before any broker: %+v", st)
	}
	first := startBroker(t, "b1")
	bs.set(first.ClientURL())
	prefix, answers, unregister := l.Register()
	other, otherAnswers, unregisterOther := l.Register()
	defer unregisterOther()
	if prefix == other {
		t.Fatalf("two senders got the same reply prefix %q", prefix)
	}
	if got := request(t, l, prefix, answers, "one"); got != "ok:one" {
		t.Fatalf("answer %q", got)
	}
	select {
	case a := <-otherAnswers:
		t.Fatalf("another sender got %q", a)
	default:
	}
	if st := l.Status(); !st.Connected || st.URL == "" || st.Dials != 1 {
		t.Fatalf("status: %+v", st)
	}

	second := startBroker(t, "b2")
	bs.set(second.ClientURL())
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := request(t, l, prefix, answers, "two"); got != "ok:two" {
		t.Fatalf("answer after the move %q", got)
	}
	if st := l.Status(); !st.Connected || st.Dials < 2 {
		t.Fatalf("status after the move: %+v, want a second dial", st)
	}
	unregister()
	if err := l.Publish("repl.test", prefix+"1", []byte("three")); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-answers:
		t.Fatalf("an unregistered sender got %q", a)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestNewRequiresRemoteAndBrokers(t *testing.T) {
	if _, err := New(Config{Brokers: func() []string { return nil }}); err == nil {
		t.Fatal("New without Remote: no error")
	}
	if _, err := New(Config{Remote: "x"}); err == nil {
		t.Fatal("New without Brokers: no error")
	}
}
