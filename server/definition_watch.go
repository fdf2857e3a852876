package server

// OnDefinitionChange registers f to be called after each batch of
// definition commands (exchanges, queues, bindings, policies, vhosts...)
// is applied, on this node, whether a local change or one committed by the
// cluster. f is called with applyMu held: it must return at once without
// calling into the server (the federation runner only wakes its own
// goroutine, which then reads the exchanges, bindings and policies).
func (s *Server) OnDefinitionChange(f func()) {
	s.admin.pmu.Lock()
	s.admin.defObservers = append(s.admin.defObservers, f)
	s.admin.pmu.Unlock()
}

func (s *Server) notifyDefinitions() {
	s.admin.pmu.RLock()
	observers := s.admin.defObservers
	s.admin.pmu.RUnlock()
	for _, f := range observers {
		f()
	}
}

// EffectivePolicy is the merged definition of the policy and operator
// policy applying to the queue (nil when none does), without the rest of
// Status, so a caller scanning every queue for one key stays cheap.
func (q *Queue) EffectivePolicy() map[string]any {
	_, _, def := q.vhost.policyNames(queueTarget(q.declaredArgs()), q.name)
	return def
}
