package jetstream

import "github.com/stratamesh/strata/tenancy"

// Test hooks for the external tests (package jetstream_test).

// BacklogVerdict is the backlog quota verdict of topic n at this broker
// (its owner): the refusal's text, "" when no subscription is over (or
// n is not served here).
func (s *Service) BacklogVerdict(n tenancy.Name) string {
	if t := s.served(n); t != nil {
		if ex := t.backlog.over.Load(); ex != nil {
			return ex.Error()
		}
	}
	return ""
}

// HeldPublishes is how many publishes of topic n are held here.
func (s *Service) HeldPublishes(n tenancy.Name) int {
	if t := s.served(n); t != nil {
		return int(t.backlog.busy.Load())
	}
	return -1
}

// StorageRefused is a publish on subject (replies to reply) of topic n,
// served here, that the tenant's storage quota refused with err, as the
// publish admission hands it to storageHold: whether it was held.
func (s *Service) StorageRefused(n tenancy.Name, subject, reply string, data []byte, err error) bool {
	t := s.served(n)
	return t != nil && t.storageHold(message{origin: s.cfg.Name, subject: subject, reply: reply, data: data}, err)
}

// BacklogChecks is how many measuring rounds topic n's backlog quota
// has had here.
func (s *Service) BacklogChecks(n tenancy.Name) uint64 {
	if t := s.served(n); t != nil {
		return t.backlog.checks.Load()
	}
	return 0
}

func (s *Service) served(n tenancy.Name) *topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.topics[n]; t.isReady() {
		return t
	}
	return nil
}
