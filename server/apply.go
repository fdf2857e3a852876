package server

import (
	"errors"
	"fmt"

	"github.com/warrenmq/warren/amqp"
)

// Every definition change — vhosts, users, permissions, topic permissions,
// policies, parameters, exchanges, queues, bindings, and the side effects
// (auto-delete, exclusive-owner cleanup, x-expires, the configuration's
// users and vhosts, definitions import, the management API) — takes effect
// through applyLocked, in three steps per command:
//
//  1. prepare checks the command against the node's state and refuses it
//     with a CommandRefused (the AMQP reply the caller reports) or returns
//     its records and its in-memory change. Callers validate first (with the
//     connection: permissions, exclusive access, passive declares), but in a
//     cluster two nodes may race and a caller's check may be stale, so the
//     check that decides is this one: deterministic from the command and the
//     state, idempotent (an equivalent redeclare is a no-op success). A new
//     queue's local storage (index or stream log) is created here, outside
//     Vhost.mu.
//  2. The records of every command of the batch (and, for a committed Raft
//     entry, its applied_index) are written to meta.db in one transaction.
//  3. Memory changes, command by command, in order.
//
// Applies are sequential (Server.applyMu), as a Raft FSM applies entries: the
// order of changes in memory is their order in meta.db. Server.apply (the
// standalone node) is a batch of one with no index; ApplyCommitted is the
// entry point for the meta Raft FSM.
//
// A batch of several commands installs each command's change in memory
// right after preparing it, so a later command of the batch sees the earlier
// ones (a binding to a queue declared just before); its records are still
// written in one transaction, after. A storage failure (errStorage) is
// fatal for a replicated node, which must stop: meta.db, without the
// batch's applied_index, and the log replay rebuild the state. A single
// command is stored before memory changes, so a standalone node that cannot
// write meta.db answers the client and changes nothing.

// CommandRefused is a command's deterministic refusal: the AMQP reply code
// and text (and the method that caused it) every node computes from the
// command and the state, so a caller on another node reports it exactly.
type CommandRefused struct {
	Code     uint16 `json:"code"`
	Text     string `json:"text"`
	ClassID  uint16 `json:"class_id"`
	MethodID uint16 `json:"method_id"`
}

func (e *CommandRefused) Error() string { return e.AMQP().ReplyText() }

// AMQP returns the refusal as the exception a client gets.
func (e *CommandRefused) AMQP() *amqp.Error {
	return &amqp.Error{Code: e.Code, Text: e.Text, ClassID: e.ClassID, MethodID: e.MethodID}
}

// refusal turns an AMQP exception into a CommandRefused; nil stays nil.
func refusal(e *amqp.Error) error {
	if e == nil {
		return nil
	}
	return &CommandRefused{Code: e.Code, Text: e.Text, ClassID: e.ClassID, MethodID: e.MethodID}
}

func refusef(code uint16, method uint32, format string, args ...any) error {
	return refusal(amqp.NewError(code, method, format, args...))
}

// StorageError is a failed meta.db write of an apply: the node's state
// could not be stored. For a replicated node it is fatal.
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return "server: storing definitions: " + e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }

// asAMQP is the exception a client gets for an apply's error: the refusal
// itself, or 541 for a failed meta.db write.
func asAMQP(err error, method uint32) *amqp.Error {
	if err == nil {
		return nil
	}
	var r *CommandRefused
	if errors.As(err, &r) {
		return r.AMQP()
	}
	var cu *ClusterUnavailableError
	if errors.As(err, &cu) {
		// A connection error, as RabbitMQ's for a metadata store timeout.
		return amqp.NewError(amqp.InternalError, method, "%s", cu.Reason())
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae
	}
	return metaFailure(method, err)
}

// prepared is a checked command: the records it stores and the change it
// makes in memory once they are stored.
type prepared struct {
	records []Command
	// install changes memory; its value is the command's result for the
	// local caller (the ready messages a queue delete dropped).
	install func() (any, error)
	// abort undoes prepare's local work (a reserved name, created files)
	// when the records are not stored.
	abort func()
}

// noop is a command that changes nothing: an equivalent redeclare, a
// delete of what is gone.
var noop = prepared{}

func (p prepared) run() (any, error) {
	if p.install == nil {
		return nil, nil
	}
	return p.install()
}

// apply makes a validated definition change take effect (see above).
func (s *Server) apply(c Command) error {
	_, err := s.applyValue(c)
	return err
}

// applyValue is apply returning the command's local result.
func (s *Server) applyValue(c Command) (any, error) {
	c = s.placeQuorum(c)
	if s.cluster != nil {
		c, err := s.proposable(c)
		if err != nil {
			return nil, err
		}
		return s.propose(c)
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.applyOneLocked(c)
}

// applyOneLocked applies one command with applyMu held.
func (s *Server) applyOneLocked(c Command) (any, error) {
	vals, errs, fatal := s.applyLocked(0, []Command{c})
	if fatal != nil {
		return nil, fatal
	}
	return vals[0], errs[0]
}

// applyLocked applies a batch with applyMu held: prepare each, store all
// records (with applied_index when index is not 0) in one transaction, then
// change memory. It returns each command's value and error, and the
// storage failure, which leaves the batch unapplied.
func (s *Server) applyLocked(index uint64, cmds []Command) ([]any, []error, error) {
	vals, errs := make([]any, len(cmds)), make([]error, len(cmds))
	var b metaBatch
	var pend []int
	preps := make([]prepared, len(cmds))
	installNow := len(cmds) > 1
	for i, c := range cmds {
		p, err := s.prepare(c)
		if err == nil {
			err = stageRecords(&b, p.records)
			if err != nil && p.abort != nil {
				p.abort()
			}
		}
		if err != nil {
			errs[i] = err
			continue
		}
		preps[i] = p
		if installNow {
			vals[i], errs[i] = p.run()
		} else {
			pend = append(pend, i)
		}
	}
	if index != 0 {
		seeded := s.seeded
		if err := b.put(bucketState, keyAppliedIndex, appliedIndexRecord{Index: index, Seeded: &seeded}); err != nil {
			return nil, nil, &StorageError{Err: err}
		}
	}
	if err := s.storeBatch(&b); err != nil {
		for _, i := range pend {
			if preps[i].abort != nil {
				preps[i].abort()
			}
		}
		return nil, nil, err
	}
	if index != 0 {
		s.appliedIndex = index
	}
	for _, i := range pend {
		vals[i], errs[i] = preps[i].run()
	}
	s.notifyDefinitions()
	return vals, errs, nil
}

func stageRecords(b *metaBatch, cs []Command) error {
	for _, c := range cs {
		if err := c.writes(b); err != nil {
			return err
		}
	}
	return nil
}

// storeBatch commits b; a node without a data directory stores nothing.
func (s *Server) storeBatch(b *metaBatch) error {
	if s.meta == nil {
		return nil
	}
	if err := s.meta.commit(b); err != nil {
		return &StorageError{Err: err}
	}
	return nil
}

// prepare checks a command against the state and returns what applying it
// does (see the top of this file).
func (s *Server) prepare(c Command) (prepared, error) {
	switch c := c.(type) {
	case DeclareVhost:
		return s.prepareDeclareVhost(c)
	case DeclareExchange:
		return s.prepareDeclareExchange(c)
	case DeleteExchange:
		return s.prepareDeleteExchange(c)
	case DeclareQueue:
		return s.prepareDeclareQueue(c)
	case DeleteQueue:
		return s.prepareDeleteQueue(c)
	case Bind:
		return s.prepareBind(c)
	case Unbind:
		return s.prepareUnbind(c)
	case AlterQueueISR, ElectQueueLeader, ChangeQueueReplicas:
		return s.prepareQuorumPlacement(c)
	}
	return prepared{records: []Command{c}, install: func() (any, error) { return nil, s.applyMemory(c) }}, nil
}

// applyMemory is the in-memory half of the commands whose records are the
// command's own and whose checks are the callers' (accounts, policies,
// parameters, vhost metadata and delete).
func (s *Server) applyMemory(c Command) error {
	switch c := c.(type) {
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
		return fmt.Errorf("server: %s has no in-memory change", commandType(c))
	}
	return nil
}
