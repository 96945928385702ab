package jetstream

// DropHookLeft is what is left of the decom-fail test hook's count
// (negative once deletions pass; 0 when the hook is off).
func (s *Service) DropHookLeft() int64 {
	if h := s.dropHook(); h != nil {
		return h.Load()
	}
	return 0
}

// SetFinalPersistHook makes every stopping replicator cursor call h with
// the write of its last position (h must call it, at a time of its
// choosing).
func (s *Service) SetFinalPersistHook(h func(persist func())) { s.finalPersistHook.Store(&h) }
