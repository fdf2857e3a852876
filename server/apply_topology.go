package server

import (
	"errors"
	"fmt"
	"os"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server/route"
)

// The prepare step (apply.go) of vhost creation and of the topology
// commands: exchanges, queues, bindings. Each reads the vhost under its
// lock, decides from the command and that state alone, and returns the
// records to store and the change to make in memory; the auto-delete
// exchanges a removal leaves unbound are worked out here too, so their
// records go in the same transaction.

func (s *Server) applyVhost(name string, method uint32) (*Vhost, error) {
	if vh := s.Vhost(name); vh != nil {
		return vh, nil
	}
	return nil, refusef(amqp.NotFound, method, "no vhost '%s'", name)
}

// prepareDeclareVhost sets an existing vhost's metadata, or creates the
// vhost: its files now, so a vhost whose files cannot be made is never
// stored (the next start could not open it, and its name would be stuck).
func (s *Server) prepareDeclareVhost(c DeclareVhost) (prepared, error) {
	if vh := s.Vhost(c.Name); vh != nil {
		return prepared{records: []Command{c}, install: func() (any, error) {
			vh.adm.mu.Lock()
			vh.adm.meta = c.Meta
			vh.adm.mu.Unlock()
			return nil, nil
		}}, nil
	}
	vh := newVhost(c.Name, s.log.With("vhost", c.Name))
	vh.adm.meta = c.Meta
	s.resetVhostLimits(vh)
	existed := false
	if s.cfg.DataDir != "" {
		_, err := os.Lstat(vhostDir(s.cfg.DataDir, c.Name))
		existed = err == nil
	}
	if err := s.openVhostStorage(vh); err != nil {
		return noop, errors.Join(err, s.undoVhostFiles(vh, existed))
	}
	abort := func() {
		s.closeVhostStorage(vh)
		if err := s.undoVhostFiles(vh, existed); err != nil {
			s.log.Error("vhost not created", "vhost", c.Name, "err", err)
		}
	}
	return prepared{records: []Command{c}, abort: abort, install: func() (any, error) {
		s.mu.Lock()
		s.vhosts[c.Name] = vh
		s.mu.Unlock()
		return vh, nil
	}}, nil
}

func (s *Server) prepareDeclareExchange(c DeclareExchange) (prepared, error) {
	vh, err := s.applyVhost(c.Vhost, methodExchangeDeclare)
	if err != nil {
		return noop, err
	}
	args, err := bytesTable(c.Arguments)
	if err != nil {
		return noop, refusef(amqp.SyntaxError, methodExchangeDeclare, "exchange arguments: %v", err)
	}
	if ex := vh.exchange(c.Name); ex != nil {
		return noop, refusal(exchangeEquivalent(ex, c, args))
	}
	// Like RabbitMQ, a headers exchange checks x-match per binding, not at declare.
	nex, aerr := newExchange(vh, c.Name, c.Type, c.Durable, c.AutoDelete, c.Internal, args)
	if aerr != nil {
		return noop, refusal(aerr)
	}
	if aerr = configureExchange(nex, vh.name); aerr != nil {
		return noop, refusal(aerr)
	}
	return prepared{records: durableOnly(c.Durable, c), install: func() (any, error) {
		vh.mu.Lock()
		vh.applyExchangePolicyLocked(nex)
		vh.exchanges[c.Name] = nex
		vh.mu.Unlock()
		return nil, nil
	}}, nil
}

// exchangeEquivalent checks a redeclare of ex is equivalent (406 if not).
func exchangeEquivalent(ex *Exchange, c DeclareExchange, args amqp.Table) *amqp.Error {
	what := describeExchange(ex.name, ex.vhost.name)
	if ex.kind != c.Type {
		return amqp.NewError(amqp.PreconditionFailed, methodExchangeDeclare,
			"inequivalent arg 'type' for %s: received '%s' but current is '%s'", what, c.Type, erlangAtom(ex.kind))
	}
	if err := equivalentBool(methodExchangeDeclare, what, "durable", c.Durable, ex.durable); err != nil {
		return err
	}
	if err := equivalentBool(methodExchangeDeclare, what, "auto_delete", c.AutoDelete, ex.autoDelete); err != nil {
		return err
	}
	if err := equivalentBool(methodExchangeDeclare, what, "internal", c.Internal, ex.internal); err != nil {
		return err
	}
	return equivalentArgs(methodExchangeDeclare, what, exchangeEquivalenceArgs, args, ex.args)
}

func (s *Server) prepareDeleteExchange(c DeleteExchange) (prepared, error) {
	vh, err := s.applyVhost(c.Vhost, methodExchangeDelete)
	if err != nil {
		return noop, err
	}
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	ex := vh.exchanges[c.Name]
	if ex == nil {
		return noop, nil // RabbitMQ 3.x answers delete-ok for an exchange that does not exist
	}
	ex.mu.RLock()
	inUse := ex.bindings.Len() > 0
	ex.mu.RUnlock()
	if c.IfUnused && (inUse || len(ex.incoming) > 0) {
		return noop, refusef(amqp.PreconditionFailed, methodExchangeDelete, "%s in use", describeExchange(c.Name, vh.name))
	}
	records := durableOnly(ex.durable, DeleteExchange{Vhost: c.Vhost, Name: c.Name})
	records = append(records, vh.autoDeletesLocked(map[destination]bool{ex: true}, sourcesOf(ex.incoming), nil)...)
	return prepared{records: records, install: func() (any, error) {
		vh.mu.Lock()
		if vh.exchanges[ex.name] == ex {
			vh.removeExchangeLocked(ex)
		}
		vh.mu.Unlock()
		return nil, nil
	}}, nil
}

// autoDeletesLocked returns the DeleteExchange records of the auto-delete
// exchanges that the removal of the destinations in removed (and of one
// binding from each exchange in less) leaves without bindings, starting
// from sources and following exchange-to-exchange bindings: the exchanges
// removeQueueAndUnlock, removeExchangeLocked and unbindLocked then remove
// from memory. Non-durable ones have no records but are followed.
func (vh *Vhost) autoDeletesLocked(removed map[destination]bool, sources []*Exchange, less map[*Exchange]int) []Command {
	var out []Command
	var visit func(src *Exchange)
	visit = func(src *Exchange) {
		if removed[src] || !src.autoDelete || vh.exchanges[src.name] != src {
			return
		}
		src.mu.RLock()
		left := -less[src]
		for _, b := range src.bindings.Bindings() {
			if !removed[b.Dest] {
				left++
			}
		}
		src.mu.RUnlock()
		if left > 0 {
			return
		}
		removed[src] = true
		out = append(out, durableOnly(src.durable, DeleteExchange{Vhost: vh.name, Name: src.name})...)
		for _, next := range sourcesOf(src.incoming) {
			visit(next)
		}
	}
	for _, src := range sources {
		visit(src)
	}
	return out
}

// sourcesOf lists the source exchanges of a queue's or exchange's bindings.
func sourcesOf(keys map[bindingKey]struct{}) []*Exchange {
	var out []*Exchange
	seen := make(map[*Exchange]bool, len(keys))
	for k := range keys {
		if !seen[k.source] {
			seen[k.source] = true
			out = append(out, k.source)
		}
	}
	return out
}

// durableOnly is c when stored is set: only durable definitions have
// records.
func durableOnly(stored bool, c Command) []Command {
	if !stored {
		return nil
	}
	return []Command{c}
}

// bindEnds looks up a binding's ends for the apply, with RabbitMQ's 404s.
func (vh *Vhost) bindEndsForApply(c Bind, method uint32) (*Exchange, destination, error) {
	src := vh.exchanges[c.Source]
	if src == nil {
		return nil, nil, refusef(amqp.NotFound, method, "no %s", describeExchange(c.Source, vh.name))
	}
	if c.DestinationType == "exchange" {
		if d := vh.exchanges[c.Destination]; d != nil {
			return src, d, nil
		}
		return nil, nil, refusef(amqp.NotFound, method, "no %s", describeExchange(c.Destination, vh.name))
	}
	if q := vh.queues[c.Destination]; q != nil {
		return src, q, nil
	}
	return nil, nil, refusef(amqp.NotFound, method, "no %s", describeQueue(c.Destination, vh.name))
}

func bindMethod(c Bind, unbind bool) uint32 {
	switch {
	case c.DestinationType == "exchange" && unbind:
		return methodExchangeUnbind
	case c.DestinationType == "exchange":
		return methodExchangeBind
	case unbind:
		return methodQueueUnbind
	}
	return methodQueueBind
}

// hasBinding reports whether dest has the binding k (vh.mu held).
func hasBinding(dest destination, k bindingKey) bool {
	switch d := dest.(type) {
	case *Queue:
		_, ok := d.bindings[k]
		return ok
	case *Exchange:
		_, ok := d.incoming[k]
		return ok
	}
	return false
}

// bindingCommand resolves what a Bind or Unbind names before its ends are
// looked up: the method it answers for, its vhost and its arguments.
func (s *Server) bindingCommand(c Bind, unbind bool) (uint32, *Vhost, amqp.Table, error) {
	method := bindMethod(c, unbind)
	vh, err := s.applyVhost(c.Vhost, method)
	if err != nil {
		return method, nil, nil, err
	}
	args, err := bytesTable(c.Arguments)
	if err != nil {
		return method, nil, nil, refusef(amqp.SyntaxError, method, "binding arguments: %v", err)
	}
	return method, vh, args, nil
}

func (s *Server) prepareBind(c Bind) (prepared, error) {
	method, vh, args, err := s.bindingCommand(c, false)
	if err != nil {
		return noop, err
	}
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	src, dest, err := vh.bindEndsForApply(c, method)
	if err != nil {
		return noop, err
	}
	if aerr := validateBinding(src, dest, c.RoutingKey, args); aerr != nil {
		aerr.ClassID, aerr.MethodID = uint16(method>>16), uint16(method)
		return noop, refusal(aerr)
	}
	if hasBinding(dest, bindingKey{source: src, key: c.RoutingKey, args: canonicalArgs(args)}) {
		return noop, nil
	}
	c.Durable = src.durable && isDurable(dest)
	return prepared{records: durableOnly(c.Durable, c), install: func() (any, error) {
		vh.mu.Lock()
		vh.bindLocked(src, dest, c.RoutingKey, args)
		vh.mu.Unlock()
		return nil, nil
	}}, nil
}

func (s *Server) prepareUnbind(c Unbind) (prepared, error) {
	method, vh, args, err := s.bindingCommand(Bind(c), true)
	if err != nil {
		return noop, err
	}
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	src, dest, err := vh.bindEndsForApply(Bind(c), method)
	var refused *CommandRefused
	if errors.As(err, &refused) && refused.Code == amqp.NotFound {
		return noop, nil // a missing end has no bindings: unbind-ok, as in RabbitMQ
	}
	if err != nil {
		return noop, err
	}
	if !hasBinding(dest, bindingKey{source: src, key: c.RoutingKey, args: canonicalArgs(args)}) {
		return noop, nil // unbinding what is not bound succeeds
	}
	c.Durable = src.durable && isDurable(dest)
	records := durableOnly(c.Durable, c)
	records = append(records, vh.autoDeletesLocked(map[destination]bool{}, []*Exchange{src}, map[*Exchange]int{src: 1})...)
	return prepared{records: records, install: func() (any, error) {
		vh.mu.Lock()
		vh.unbindLocked(src, dest, c.RoutingKey, args)
		vh.mu.Unlock()
		return nil, nil
	}}, nil
}

func sameOwner(a, b *OwnerRef) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// ownerConn is the local connection of an exclusive queue's owner: nil for
// a non-exclusive queue or an owner on another node.
func (s *Server) ownerConn(c DeclareQueue) (*conn, error) {
	if c.Owner == nil || c.Owner.Node != s.cfg.NodeName {
		return nil, nil
	}
	s.mu.RLock()
	oc := s.conns[c.Owner.Conn]
	s.mu.RUnlock()
	if oc == nil {
		return nil, refusef(amqp.ResourceLocked, methodQueueDeclare,
			"cannot obtain exclusive access to %s: its connection is closed", describeQueue(c.Name, c.Vhost))
	}
	return oc, nil
}

// testHookDeclareDiskWork, when set by a test, runs where a declare has
// released Vhost.mu to create the queue's files (applyMu is held).
var testHookDeclareDiskWork func(*Queue)

func (s *Server) prepareDeclareQueue(c DeclareQueue) (prepared, error) {
	vh, err := s.applyVhost(c.Vhost, methodQueueDeclare)
	if err != nil {
		return noop, err
	}
	args, err := bytesTable(c.Arguments)
	if err != nil {
		return noop, refusef(amqp.SyntaxError, methodQueueDeclare, "queue arguments: %v", err)
	}
	vh.mu.Lock()
	vh.waitIdleLocked(c.Name)
	if q := vh.queues[c.Name]; q != nil {
		vh.mu.Unlock()
		if err := redeclareQueue(q, c, args); err != nil {
			return noop, refusal(err)
		}
		// The queue as this command found it: a delete applied right after
		// must not turn the redeclare into a 404 (it did, looking it up
		// again).
		return prepared{install: func() (any, error) { return redeclaredQueue{q}, nil }}, nil
	}
	seen := vh.adm.policySet() // before the arguments are resolved with the policies
	q, aerr := vh.newQueueLocked(c, args)
	if aerr != nil {
		vh.mu.Unlock()
		return noop, refusal(aerr)
	}
	owner, err := s.ownerConn(c)
	if err != nil {
		vh.mu.Unlock()
		return noop, err
	}
	q.owner, q.ownerRef, q.instance = owner, c.Owner, c.Instance
	setQuorumPlacement(q, c.Placement)
	release := vh.reserveLocked(c.Name, true)
	vh.mu.Unlock()
	if hook := testHookDeclareDiskWork; hook != nil {
		hook(q)
	}
	home := s.queueHome(c.Node)
	if q.replicated {
		home = localHome{s} // every node: its replica, or a proxy (quorumQueue.openFiles)
	}
	if err := home.create(q); err != nil {
		vh.mu.Lock()
		release()
		vh.mu.Unlock()
		return noop, err
	}
	return prepared{
		records: durableOnly(isDurable(q), c),
		abort: func() {
			vh.mu.Lock()
			release()
			vh.mu.Unlock()
			home.undo(q)
		},
		install: func() (any, error) {
			vh.mu.Lock()
			release()
			vh.installQueueLocked(q)
			vh.mu.Unlock()
			// An x-expires timer that fired before the queue was installed
			// found nothing to remove; count the idle time from here.
			q.restartExpiry()
			vh.catchUpQueuePolicy(q, seen)
			return q, nil
		},
	}, nil
}

// newQueueLocked validates a new queue and builds it, not yet installed.
func (vh *Vhost) newQueueLocked(c DeclareQueue, args amqp.Table) (*Queue, *amqp.Error) {
	if err := vh.queueLimitError(c.Name); err != nil {
		return nil, err
	}
	qa, aerr := parseQueueArgs(c.Name, vh.name, args)
	if aerr != nil {
		return nil, aerr
	}
	qa = vh.policyQueueArgs(c.Name, args, qa)
	qa.mirrored = c.Placement != nil && qa.quorum == nil && qa.stream == nil
	m := &amqp.QueueDeclare{Queue: c.Name, Durable: c.Durable, Exclusive: c.Exclusive, AutoDelete: c.AutoDelete, Arguments: args}
	if err := kindOf(&qa).checkDeclare(vh, c.Name, m, &qa); err != nil {
		return nil, err
	}
	return newQueue(vh, c.Name, c.Durable, c.Exclusive, c.AutoDelete, args, qa, nil), nil
}

// redeclaredQueue is the result of an equivalent redeclare: the queue
// that was there.
type redeclaredQueue struct{ q *Queue }

// redeclareQueue checks a declare of an existing queue is equivalent: 405
// for another owner's exclusive queue, 406 for different properties.
func redeclareQueue(q *Queue, c DeclareQueue, args amqp.Table) *amqp.Error {
	if q.exclusive && c.Owner != nil && !sameOwner(q.ownerRef, c.Owner) {
		return lockedQueueError(q, methodQueueDeclare)
	}
	q.h.touch()
	what := describeQueue(q.name, q.vhost.name)
	if err := equivalentBool(methodQueueDeclare, what, "durable", c.Durable, q.durable); err != nil {
		return err
	}
	if err := equivalentBool(methodQueueDeclare, what, "auto_delete", c.AutoDelete, q.autoDelete); err != nil {
		return err
	}
	if err := equivalentBool(methodQueueDeclare, what, "exclusive", c.Exclusive, q.exclusive); err != nil {
		return err
	}
	return equivalentArgs(methodQueueDeclare, what, queueEquivalenceArgs(q.args), args, q.args)
}

func (s *Server) prepareDeleteQueue(c DeleteQueue) (prepared, error) {
	vh, err := s.applyVhost(c.Vhost, methodQueueDelete)
	if err != nil {
		return noop, err
	}
	vh.mu.Lock()
	defer vh.mu.Unlock()
	vh.waitIdleLocked(c.Name)
	q := vh.queues[c.Name]
	if q == nil || (c.Owner != nil && !sameOwner(q.ownerRef, c.Owner)) || (c.Instance != "" && c.Instance != q.instance) {
		// RabbitMQ 3.x answers delete-ok with 0 for a queue that does not exist.
		return prepared{install: func() (any, error) { return 0, nil }}, nil
	}
	if aerr := queueDeletable(q, c.IfUnused, c.IfEmpty); aerr != nil {
		return noop, refusal(aerr)
	}
	// The queue, its bindings and the exchanges that auto-delete with them
	// leave meta.db in one transaction: a crash between them would leave
	// bindings to a missing queue, which the loader refuses.
	records := durableOnly(isDurable(q), DeleteQueue{Vhost: c.Vhost, Name: c.Name})
	records = append(records, vh.autoDeletesLocked(map[destination]bool{q: true}, sourcesOf(q.bindings), nil)...)
	return prepared{records: records, install: func() (any, error) {
		vh.mu.Lock()
		cs, n := vh.removeQueueAndUnlock(q)
		notifyCancelled(cs)
		return n, nil
	}}, nil
}

// queueHome makes and removes a new queue's storage on its home node.
// prepareDeclareQueue chooses it in this one place: today a queue homed
// here; in a cluster a queue homed elsewhere gets a proxy to its node.
type queueHome interface {
	create(q *Queue) error
	undo(q *Queue)
}

func (s *Server) queueHome(node string) queueHome {
	if node == "" || node == s.cfg.NodeName {
		return localHome{s}
	}
	return remoteHome{s, node}
}

// localHome creates a queue's index (or a stream's log) in this node's
// data directory, for a durable queue or a stream; others need none.
type localHome struct{ s *Server }

func (h localHome) create(q *Queue) error {
	if !q.h.hasFiles() {
		return nil
	}
	if err := q.h.openFiles(h.s); err != nil {
		return &StorageError{Err: fmt.Errorf("creating the index of %s: %w", describeQueue(q.name, q.vhost.name), err)}
	}
	return nil
}

func (localHome) undo(q *Queue) { q.h.delete() }

// remoteHome is a queue homed on another node: every node has the queue in
// its definitions (and routes to it), only the home node has its storage.
// Its handle here is made by makeRemote (cluster_queues.go): the proxy that
// forwards its operations to the home (remote_queue.go) where this node
// serves remote queues. It must not refuse: every node applies the same
// declare.
type remoteHome struct {
	s    *Server
	node string
}

func (h remoteHome) create(q *Queue) error {
	h.s.makeRemote(q, h.node)
	return nil
}

func (remoteHome) undo(*Queue) {}

// bindingOf is a binding's route entry.
func bindingOf(dest destination, key string, args amqp.Table) route.Binding[destination] {
	return route.Binding[destination]{Dest: dest, Key: key, Args: args}
}
