package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/warrenmq/warren/amqp"
)

// A definitions import is all or nothing. Validation catches what it can
// before anything is applied; what only the apply can find out (a queue whose
// files cannot be created on a full disk, a meta.db write that fails, a race
// with an AMQP client) stops the import, and every step applied before it is
// taken back, newest first: created objects are deleted (from memory, meta.db
// and disk), overwritten ones get their previous value back. The answer names
// the object that failed.

// importUndo is the undo log of one import. It is used with adminState.mu
// held, so no other management change interleaves.
type importUndo struct {
	steps []func() error
	// Objects the import created: their bindings go with them.
	exchanges map[string]bool // vhost NUL name
	queues    map[string]bool
	// existing holds, per source exchange, the bindings it had before the
	// import, read once when the first binding from it is imported.
	existing map[*Exchange]map[string]bool
}

func newImportUndo() *importUndo {
	return &importUndo{exchanges: map[string]bool{}, queues: map[string]bool{}, existing: map[*Exchange]map[string]bool{}}
}

func (u *importUndo) add(step func() error) { u.steps = append(u.steps, step) }

// run undoes every recorded step, newest first, and returns what could not be
// undone.
func (u *importUndo) run() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// amqpErr turns a possibly nil *amqp.Error into an error without the typed
// nil trap.
func amqpErr(e *amqp.Error) error {
	if e == nil {
		return nil
	}
	return e
}

// importFailure names the object whose import failed. An AMQP error keeps its
// code (so the management API answers it as it would the same declare), with
// the object named in its text.
func importFailure(what string, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return &amqp.Error{Code: ae.Code, Text: "importing " + what + ": " + ae.Text, ClassID: ae.ClassID, MethodID: ae.MethodID}
	}
	return fmt.Errorf("server: importing %s: %w", what, err)
}

// applyDefinitions applies validated definitions with adminState.mu held.
// The first failure stops the import; everything applied before it is undone
// and the failure returned (joined with anything the undo could not take
// back, which is also logged).
func (s *Server) applyDefinitions(d *Definitions) error {
	u := newImportUndo()
	err := s.applyAccounts(d, u)
	if err == nil {
		err = s.applyPolicies(d, u)
	}
	if err == nil {
		err = s.applyTopology(d, u)
	}
	if err == nil {
		return nil
	}
	if uerr := u.run(); uerr != nil {
		s.log.Error("a failed definitions import could not be undone completely", "err", err, "undo_err", uerr)
		return errors.Join(err, fmt.Errorf("server: undoing the failed import: %w", uerr))
	}
	s.log.Warn("definitions import failed and was undone", "err", err)
	return err
}

// applyAccounts imports vhosts, users, permissions and topic permissions.
func (s *Server) applyAccounts(d *Definitions, u *importUndo) error {
	for _, v := range d.Vhosts {
		if err := s.importVhost(v, u); err != nil {
			return importFailure(fmt.Sprintf("vhost '%s'", v.Name), err)
		}
	}
	for _, ud := range d.Users {
		if err := s.importUser(ud, u); err != nil {
			return importFailure(fmt.Sprintf("user '%s'", ud.Name), err)
		}
	}
	for _, p := range d.Permissions {
		if err := s.importPermission(p, u); err != nil {
			return importFailure(fmt.Sprintf("permissions of '%s' on vhost '%s'", p.User, p.Vhost), err)
		}
	}
	for _, tp := range d.TopicPermissions {
		if err := s.importTopicPermission(tp, u); err != nil {
			return importFailure(fmt.Sprintf("topic permissions of '%s' on vhost '%s'", tp.User, tp.Vhost), err)
		}
	}
	return nil
}

func (s *Server) importVhost(v VhostDefinition, u *importUndo) error {
	var before VhostMeta
	if vh := s.Vhost(v.Name); vh != nil {
		before = vh.Meta()
	}
	created, err := s.putVhostLocked(v.Name, v.VhostMeta)
	if err != nil {
		return err
	}
	if created {
		u.add(func() error { return s.deleteVhostLocked(v.Name) })
	} else {
		u.add(func() error { _, err := s.putVhostLocked(v.Name, before); return err })
	}
	return nil
}

func (s *Server) importUser(ud UserDefinition, u *importUndo) error {
	before, existed := s.users.snapshot(ud.Name)
	if _, err := s.putUserLocked(ud.Name, ud.PasswordHash, ud.Tags); err != nil {
		return err
	}
	if ud.Limits != nil {
		limits := make(map[string]int64, len(ud.Limits))
		for k, v := range ud.Limits {
			limits[k], _ = intValue(v) // validated
		}
		if err := s.users.setLimits(ud.Name, limits); err != nil {
			return err
		}
	}
	u.add(func() error {
		if existed {
			if err := s.users.put(before.name, before.passwordHash, before.tags, before.loopbackOnly); err != nil {
				return err
			}
			return s.users.setLimits(before.name, before.limits)
		}
		_, err := s.users.remove(ud.Name)
		return err
	})
	return nil
}

func (s *Server) importPermission(p PermissionInfo, u *importUndo) error {
	before := s.users.permission(p.User, p.Vhost)
	if _, err := s.setPermissionLocked(p.User, p.Vhost, p.Permission); err != nil {
		return err
	}
	u.add(func() error {
		if before != nil {
			return s.users.setPermission(p.User, p.Vhost, before.Permission)
		}
		return s.users.clearPermission(p.User, p.Vhost)
	})
	return nil
}

func (s *Server) importTopicPermission(tp TopicPermission, u *importUndo) error {
	before := s.users.topicPermission(tp.User, tp.Vhost, tp.Exchange)
	if _, err := s.setTopicPermissionLocked(tp); err != nil {
		return err
	}
	u.add(func() error {
		if before != nil {
			_, err := s.users.setTopicPermission(before.TopicPermission)
			return err
		}
		_, err := s.users.clearTopicPermissions(tp.User, tp.Vhost, tp.Exchange)
		return err
	})
	return nil
}

// applyPolicies imports runtime parameters, global parameters, policies and
// operator policies.
func (s *Server) applyPolicies(d *Definitions, u *importUndo) error {
	for _, p := range d.Parameters {
		if err := s.importParameter(p, u); err != nil {
			return importFailure(fmt.Sprintf("parameter '%s' of '%s' in vhost '%s'", p.Name, p.Component, p.Vhost), err)
		}
	}
	for _, p := range d.GlobalParameters {
		if err := s.importGlobal(p, u); err != nil {
			return importFailure(fmt.Sprintf("global parameter '%s'", p.Name), err)
		}
	}
	for i, ps := range [][]Policy{d.Policies, d.OperatorPolicies} {
		for _, p := range ps {
			if err := s.importPolicy(p, i == 1, u); err != nil {
				return importFailure(fmt.Sprintf("policy '%s' in vhost '%s'", p.Name, p.Vhost), err)
			}
		}
	}
	return nil
}

func (s *Server) importParameter(p Parameter, u *importUndo) error {
	k := paramKey{p.Component, p.Vhost, p.Name}
	s.admin.pmu.RLock()
	before, existed := s.admin.params[k]
	s.admin.pmu.RUnlock()
	if err := s.putParameter(p); err != nil {
		return err
	}
	u.add(func() error {
		if existed {
			return s.putParameter(Parameter{Component: k.component, Vhost: k.vhost, Name: k.name, Value: before})
		}
		return s.clearParameter(k)
	})
	return nil
}

func (s *Server) importGlobal(p Parameter, u *importUndo) error {
	s.admin.pmu.RLock()
	before, existed := s.admin.globals[p.Name]
	if p.Name == "cluster_name" {
		before, existed = s.admin.clusterName, s.admin.clusterName != ""
	}
	s.admin.pmu.RUnlock()
	if err := s.putGlobal(p.Name, p.Value); err != nil {
		return err
	}
	u.add(func() error {
		if existed {
			return s.putGlobal(p.Name, before)
		}
		return s.clearGlobal(p.Name)
	})
	return nil
}

func (s *Server) importPolicy(p Policy, operator bool, u *importUndo) error {
	before, berr := s.GetPolicy(p.Vhost, p.Name, operator)
	if _, err := s.PutPolicy(p, operator); err != nil {
		return err
	}
	u.add(func() error {
		if berr == nil {
			_, err := s.PutPolicy(before, operator)
			return err
		}
		return s.DeletePolicy(p.Vhost, p.Name, operator)
	})
	return nil
}

// applyTopology declares the file's exchanges, queues and bindings, keeping
// the ones that exist.
func (s *Server) applyTopology(d *Definitions, u *importUndo) error {
	for _, x := range d.Exchanges {
		if err := s.importExchange(x, u); err != nil {
			return importFailure(describeExchange(x.Name, x.Vhost), err)
		}
	}
	for _, q := range d.Queues {
		if err := s.importQueue(q, u); err != nil {
			return importFailure(describeQueue(q.Name, q.Vhost), err)
		}
	}
	for _, b := range d.Bindings {
		if err := s.importBinding(b, u); err != nil {
			return importFailure("a binding from "+describeExchange(b.Source, b.Vhost), err)
		}
	}
	return nil
}

func (s *Server) importExchange(x ExchangeDefinition, u *importUndo) error {
	vh := s.Vhost(x.Vhost)
	if vh == nil || vh.exchange(x.Name) != nil {
		return nil
	}
	if _, err := vh.declareExchangeAdmin(x.ExchangeSpec); err != nil {
		return err
	}
	u.exchanges[defKey(x.Vhost, x.Name)] = true
	u.add(func() error { return amqpErr(vh.deleteExchange(x.Name, false)) })
	return nil
}

func (s *Server) importQueue(q QueueDefinition, u *importUndo) error {
	vh := s.Vhost(q.Vhost)
	if vh == nil || vh.queue(q.Name) != nil {
		return nil
	}
	// Not through declareQueueAdmin: an import declares without counting in
	// rabbitmq_queues_declared/created_total, as RabbitMQ's import does.
	m := vh.withDefaultQueueType(&amqp.QueueDeclare{Queue: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: q.Arguments})
	if _, _, aerr := vh.applyQueueDeclare(nil, m, q.Name); aerr != nil {
		return aerr
	}
	u.queues[defKey(q.Vhost, q.Name)] = true
	u.add(func() error { _, err := vh.deleteQueue(nil, q.Name, false, false); return amqpErr(err) })
	return nil
}

// importBinding binds b. A binding from or to an object the import created
// goes when that object is deleted; one between existing objects that did
// not exist before is unbound by the undo.
func (s *Server) importBinding(b BindingInfo, u *importUndo) error {
	vh := s.Vhost(b.Vhost)
	if vh == nil {
		return nil
	}
	created := u.exchanges[defKey(b.Vhost, b.Source)]
	switch b.DestinationType {
	case DestQueue:
		created = created || u.queues[defKey(b.Vhost, b.Destination)]
	case DestExchange:
		created = created || u.exchanges[defKey(b.Vhost, b.Destination)]
	}
	isNew := false
	if src := vh.exchange(b.Source); src != nil && !created {
		isNew = !u.bindingsOf(src)[bindingKeyOf(b)]
	}
	if err := vh.bindAdmin(b); err != nil {
		return err
	}
	if isNew {
		u.add(func() error { return vh.unbindAdmin(b) })
	}
	return nil
}

// bindingsOf returns the bindings src had before the import.
func (u *importUndo) bindingsOf(src *Exchange) map[string]bool {
	if m, ok := u.existing[src]; ok {
		return m
	}
	m := map[string]bool{}
	for _, have := range src.SourceBindings() {
		m[bindingKeyOf(have)] = true
	}
	u.existing[src] = m
	return m
}

// bindingKeyOf identifies a binding among its source's, as the tail of its
// meta.db key, which no two bindings share.
func bindingKeyOf(b BindingInfo) string {
	return string(metaKey(b.DestinationType, b.Destination, b.RoutingKey, canonicalArgs(b.Arguments)))
}

// unbindAdmin removes binding b (nothing if it is gone already).
func (vh *Vhost) unbindAdmin(b BindingInfo) error {
	if b.DestinationType == DestQueue {
		return amqpErr(vh.unbindQueue(nil, &amqp.QueueUnbind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: b.Arguments}))
	}
	return amqpErr(vh.bindExchange(b.Destination, b.Source, b.RoutingKey, b.Arguments, true))
}

// snapshot returns a copy of the account name (without its permissions) and
// whether it exists.
func (u *users) snapshot(name string) (account, bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	a := u.accounts[name]
	if a == nil {
		return account{}, false
	}
	return account{name: a.name, passwordHash: a.passwordHash, tags: slices.Clone(a.tags), loopbackOnly: a.loopbackOnly,
		limits: maps.Clone(a.limits)}, true
}

// validateQueueLimits refuses, before anything is applied, an import that
// would take a vhost past its queue limit, with RabbitMQ's reason. Queues
// that exist already do not count; a vhost-limits parameter in the file
// applies, as RabbitMQ imports parameters before queues.
func (s *Server) validateQueueLimits(d *Definitions) error {
	adding := map[string]map[string]bool{}
	for _, q := range d.Queues {
		if vh := s.Vhost(q.Vhost); vh != nil && vh.queue(q.Name) != nil {
			continue
		}
		if adding[q.Vhost] == nil {
			adding[q.Vhost] = map[string]bool{}
		}
		adding[q.Vhost][q.Name] = true
	}
	for name, qs := range adding {
		have, limit := 0, importQueueLimit(s, d, name)
		if vh := s.Vhost(name); vh != nil {
			have = len(vh.Queues())
		}
		if limit != noLimit && int64(have+len(qs)) > limit {
			return fmt.Errorf("%w: Adding %d queue(s) to virtual host \"%s\" would exceed the limit of %d queue(s).\n\n"+
				"This virtual host currently has %d queue(s) defined.\n\nImport aborted!", ErrInvalid, len(qs), name, limit, have)
		}
	}
	return nil
}

// importQueueLimit is the queue limit a vhost will have when the import's
// queues are declared: the file's vhost-limits, else the vhost's, else (a
// vhost the import creates) the node's.
func importQueueLimit(s *Server, d *Definitions, vhost string) int64 {
	for _, p := range d.Parameters {
		if p.Component == vhostLimitsComponent && p.Vhost == vhost && p.Name == vhostLimitsName {
			m, _ := p.Value.(map[string]any)
			if n, ok := limitValue(m["max-queues"]); ok {
				return n
			}
			return configLimit(s.cfg.MaxQueuesPerVhost) // the file's limits replace the vhost's
		}
	}
	if vh := s.Vhost(vhost); vh != nil {
		return vh.limits.maxQueues.Load()
	}
	return configLimit(s.cfg.MaxQueuesPerVhost)
}
