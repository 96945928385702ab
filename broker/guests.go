package broker

import (
	"fmt"
	"net"
)

// Client failover (docs/architecture.md "Client failover"): besides its
// client listener, a broker may listen on one failover listener per other
// region of the mesh. A client of region R lists R's brokers first and then
// every other region's failover listener for R, in that order and without
// randomization (nats.go DontRandomize; the nats CLI has no such option). nats.go
// walks its list in order and, when a server closes the connection, tries
// the next one; so a client reaches a failover listener only when its own
// region's brokers did not answer, and a connection on the failover
// listener for R is a guest whose home is R. The broker never sends guests
// connect_urls (nats.go would add this region's own brokers to the list
// and could reconnect to them, staying away from home); when R is back
// and caught up, the region's driver closes R's guests (CloseGuests) and
// refuses new ones (Config.AdmitGuest), so that nats.go's walk, which goes
// on from the URL after the one it was on, passes the other failover
// listeners (refused too) and lands on R's brokers.

// GuestListener is one failover listener: where clients of Home connect
// when Home is lost to them.
type GuestListener struct {
	// Home is the region whose clients this listener serves. Required,
	// not this broker's region, unique.
	Home string
	// Addr is the host:port to listen on ("127.0.0.1:0" binds a free one).
	Addr string
	// Listener, when set, is used instead of binding Addr (the broker
	// closes it).
	Listener net.Listener
}

type guestListener struct {
	home string
	ln   net.Listener
}

// listenGuests binds every failover listener (before anything accepts).
func (s *Server) listenGuests() error {
	seen := map[string]bool{}
	for _, g := range s.cfg.Guests {
		if g.Home == "" || g.Home == s.cfg.Region || seen[g.Home] {
			s.closeGuestListeners()
			return fmt.Errorf("broker: failover listener for %q: want another region than %q, once each", g.Home, s.cfg.Region)
		}
		seen[g.Home] = true
		ln, err := g.Listener, error(nil)
		if ln == nil {
			ln, err = net.Listen("tcp", g.Addr)
		}
		if err != nil {
			s.closeGuestListeners()
			return fmt.Errorf("broker: listen for guests of %s on %s: %w", g.Home, g.Addr, err)
		}
		s.guestLns = append(s.guestLns, guestListener{home: g.Home, ln: ln})
	}
	for _, g := range s.guestLns {
		g := g
		s.goRun(func() { s.acceptClients(g.ln, g.home) })
	}
	return nil
}

func (s *Server) closeGuestListeners() {
	for _, g := range s.guestLns {
		g.ln.Close()
	}
	s.guestLns = nil
}

func (s *Server) admitGuest(home string) bool {
	return s.cfg.AdmitGuest == nil || s.cfg.AdmitGuest(home)
}

// guestAddr is the address of home's failover listener (nil-safe: the
// client listener's when there is none).
func (s *Server) guestAddr(home string) net.Addr {
	for _, g := range s.guestLns {
		if g.home == home {
			return g.ln.Addr()
		}
	}
	return s.ln.Addr()
}

// GuestURLs returns each failover listener's nats:// URL by home region.
func (s *Server) GuestURLs() map[string]string {
	out := make(map[string]string, len(s.guestLns))
	for _, g := range s.guestLns {
		out[g.home] = "nats://" + g.ln.Addr().String()
	}
	return out
}

// Guests counts the guest connections held now, by home region (homes
// with none are left out).
func (s *Server) Guests() map[string]int {
	out := map[string]int{}
	s.mu.Lock()
	for _, c := range s.clients {
		if c.home != "" {
			out[c.home]++
		}
	}
	s.mu.Unlock()
	return out
}

// CloseGuests closes every guest connection whose home is home, without
// an -ERR (nats.go closes for good on an -ERR it does not know; a closed
// socket makes it reconnect to the next URL of its list). It returns how
// many it closed.
func (s *Server) CloseGuests(home string) int {
	s.mu.Lock()
	var cs []*client
	for _, c := range s.clients {
		if c.home == home {
			cs = append(cs, c)
		}
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.out.closeAfter(nil)
		c.conn.Close()
	}
	s.guestsSentHome.Add(int64(len(cs)))
	return len(cs)
}

// GuestStats are the failover listeners' counters since start.
type GuestStats struct {
	// Refused counts connections to a failover listener closed at once
	// because their home was back (Config.AdmitGuest); SentHome guests
	// closed by CloseGuests.
	Refused, SentHome int64
}

// GuestStats returns the failover listeners' counters.
func (s *Server) GuestStats() GuestStats {
	return GuestStats{Refused: s.guestsRefused.Load(), SentHome: s.guestsSentHome.Load()}
}
