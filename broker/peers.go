package broker

import (
	"time"
)

// peerRecheck is how often the broker re-reads its PeerSource even when
// it signalled no change, and the delay before redialling a peer whose
// route broke or could not be dialled.
const peerRecheck = 2 * time.Second

// peersChanged asks watchPeers to re-evaluate now (coalesced).
func (s *Server) peersChanged() {
	select {
	case s.kickPeers <- struct{}{}:
	default:
	}
}

// watchPeers keeps one route to every peer broker the PeerSource reports.
// Of two brokers, the one whose name sorts lower dials; the other accepts.
// A dial that fails is retried at the next re-check.
func (s *Server) watchPeers() {
	t := time.NewTicker(peerRecheck)
	defer t.Stop()
	for {
		s.ensureRoutes()
		select {
		case <-s.quit:
			return
		case <-s.cfg.Peers.Changed():
		case <-s.kickPeers:
		case <-t.C:
		}
	}
}

func (s *Server) ensureRoutes() {
	for _, p := range s.cfg.Peers.Peers() {
		if p.Name <= s.cfg.ServerName || p.RouteAddr == "" {
			continue
		}
		s.mu.Lock()
		_, up := s.routes[p.Name]
		busy := s.dialing[p.Name]
		if up || busy || s.closing {
			s.mu.Unlock()
			continue
		}
		s.dialing[p.Name] = true
		s.mu.Unlock()
		s.goRun(func() {
			err := s.dialRoute(p)
			s.mu.Lock()
			delete(s.dialing, p.Name)
			s.mu.Unlock()
			if err != nil {
				s.logger.Debug("route dial failed", "peer", p.Name, "addr", p.RouteAddr, "err", err)
			}
		})
	}
}
