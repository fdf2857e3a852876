package server

import "fmt"

// apply makes a validated definition change take effect: it writes the
// command's records (Command.writes) to meta.db in one transaction, then
// changes memory, in that order. Callers validate first — permissions,
// equivalence, limits, that what they change exists — so apply fails only
// when meta.db cannot be written (then memory is unchanged). Applies are
// sequential (Server.applyMu).
//
// This is the function the meta Raft FSM will call for each committed log
// entry (ApplyBatch: one transaction per batch, with applied_index), on
// every node; so it reads nothing but the command and the node's state.
//
// Topology commands (DeclareExchange, DeleteExchange, DeclareQueue,
// DeleteQueue, Bind, Unbind) and the creation of a vhost are not applied
// here yet: vhost.go and addVhost write their records through
// Vhost.commitCommands and change memory themselves.
func (s *Server) apply(c Command) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.meta != nil {
		var b metaBatch
		if err := c.writes(&b); err != nil {
			return err
		}
		if err := s.meta.commit(&b); err != nil {
			return fmt.Errorf("server: storing %s: %w", commandType(c), err)
		}
	}
	return s.applyMemory(c)
}

// applyMemory is the in-memory half of apply.
func (s *Server) applyMemory(c Command) error {
	switch c := c.(type) {
	case DeclareVhost:
		vh := s.Vhost(c.Name)
		if vh == nil {
			return fmt.Errorf("%w: %q", ErrNoSuchVhost, c.Name)
		}
		vh.adm.mu.Lock()
		vh.adm.meta = c.Meta
		vh.adm.mu.Unlock()
	case DeleteVhost:
		return s.dropVhost(c.Name)
	case PutUser:
		s.users.installUser(c)
	case DeleteUser:
		s.users.dropUser(c.Name)
	case SetPermission:
		return s.users.installPermission(c)
	case ClearPermission:
		s.users.dropPermission(c)
	case SetTopicPermission:
		return s.users.installTopic(c.TopicPermission)
	case ClearTopicPermissions:
		s.users.dropTopics(c)
	case SetPolicy:
		return s.installPolicy(c)
	case ClearPolicy:
		return s.dropPolicy(c)
	case SetParameter:
		s.installParameter(c.Parameter)
	case ClearParameter:
		s.dropParameter(paramKey{c.Component, c.Vhost, c.Name})
	case SetGlobalParameter:
		s.installGlobal(c.Name, c.Value)
	case ClearGlobalParameter:
		s.dropGlobal(c.Name)
	default:
		return fmt.Errorf("server: %s is not applied through Server.apply yet", commandType(c))
	}
	return nil
}

// commitCommands writes the records of commands in one transaction, for the
// paths that change memory themselves (see apply).
func (m *metaStore) commitCommands(cs ...Command) error {
	var b metaBatch
	for _, c := range cs {
		if err := c.writes(&b); err != nil {
			return err
		}
	}
	return m.commit(&b)
}
