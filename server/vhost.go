package server

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server/route"
)

// Method ids used in errors raised outside the channel's method switch.
var (
	methodExchangeDeclare = (&amqp.ExchangeDeclare{}).ID()
	methodExchangeDelete  = (&amqp.ExchangeDelete{}).ID()
	methodExchangeBind    = (&amqp.ExchangeBind{}).ID()
	methodExchangeUnbind  = (&amqp.ExchangeUnbind{}).ID()
	methodQueueDeclare    = (&amqp.QueueDeclare{}).ID()
	methodQueueBind       = (&amqp.QueueBind{}).ID()
	methodQueueUnbind     = (&amqp.QueueUnbind{}).ID()
	methodQueuePurge      = (&amqp.QueuePurge{}).ID()
	methodQueueDelete     = (&amqp.QueueDelete{}).ID()
	methodBasicPublish    = (&amqp.BasicPublish{}).ID()
	methodBasicConsume    = (&amqp.BasicConsume{}).ID()
	methodBasicGet        = (&amqp.BasicGet{}).ID()
)

// Vhost is a virtual host: a namespace of exchanges, queues and bindings.
type Vhost struct {
	name string
	// srv is the node the vhost belongs to, set when the server attaches it
	// (openVhostStorage, for both new and loaded vhosts).
	srv *Server
	// meta persists durable definitions and storage persistent messages; both
	// are nil when the server has no data directory.
	meta    *metaStore
	storage *vhostStorage
	// transient is where transient queues page to disk (see persist.go).
	transient *vhostStorage
	log       *slog.Logger

	mu        sync.RWMutex
	exchanges map[string]*Exchange
	queues    map[string]*Queue
	// busy holds the queue names whose declare or delete is doing its disk
	// work (index files, meta.db) outside mu; the channel closes when it is
	// done. Another declare or delete of the name waits for it.
	busy map[string]chan struct{}
	// declaring counts the busy names being declared, for the queue limit.
	declaring int
	// gone is set when the vhost is deleted, so a declare finishing its disk
	// work afterwards undoes it instead of installing the queue.
	gone bool
	// limits are the effective max-connections and max-queues (vhost_limits.go).
	limits vhostLimits

	adm vhostAdmin // metadata and policies (policy.go)

	streams streamTable // stream queues' logs (stream.go)
}

func newVhost(name string, meta *metaStore, log *slog.Logger) *Vhost {
	vh := &Vhost{name: name, meta: meta, log: log, exchanges: make(map[string]*Exchange), queues: make(map[string]*Queue),
		busy: make(map[string]chan struct{})}
	for _, d := range []struct{ name, kind string }{
		{"", kindDirect}, {"amq.direct", kindDirect}, {"amq.fanout", kindFanout},
		{"amq.topic", kindTopic}, {"amq.headers", kindHeaders}, {"amq.match", kindHeaders},
	} {
		ex, _ := newExchange(vh, d.name, d.kind, true, false, false, nil)
		vh.exchanges[d.name] = ex
	}
	return vh
}

// Name returns the vhost's name.
func (vh *Vhost) Name() string { return vh.name }

func (vh *Vhost) exchange(name string) *Exchange {
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	return vh.exchanges[name]
}

func (vh *Vhost) queue(name string) *Queue {
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	return vh.queues[name]
}

// declareExchange implements exchange.declare.
func (vh *Vhost) declareExchange(m *amqp.ExchangeDeclare) *amqp.Error {
	vh.mu.Lock()
	defer vh.mu.Unlock()
	ex := vh.exchanges[m.Exchange]
	if m.Passive {
		if ex == nil {
			return amqp.NewError(amqp.NotFound, methodExchangeDeclare, "no %s", describeExchange(m.Exchange, vh.name))
		}
		return nil
	}
	if ex == nil {
		if m.Exchange == "" {
			return amqp.NewError(amqp.AccessRefused, methodExchangeDeclare, "operation not permitted on the default exchange")
		}
		if strings.HasPrefix(m.Exchange, "amq.") {
			return amqp.NewError(amqp.AccessRefused, methodExchangeDeclare, "exchange name '%s' contains reserved prefix 'amq.*'", m.Exchange)
		}
		// Like RabbitMQ, a headers exchange checks x-match per binding, not at declare.
		nex, aerr := newExchange(vh, m.Exchange, m.Type, m.Durable, m.AutoDelete, m.Internal, m.Arguments)
		if aerr != nil {
			return aerr
		}
		if err := configureExchange(nex, vh.name); err != nil {
			return err
		}
		vh.applyExchangePolicyLocked(nex)
		if nex.durable && vh.meta != nil {
			err := vh.meta.commitCommands(DeclareExchange{
				Vhost: vh.name, Name: nex.name, Type: nex.kind, Durable: true, AutoDelete: nex.autoDelete, Internal: nex.internal,
				Arguments: tableBytes(nex.args),
			})
			if err != nil {
				return metaFailure(methodExchangeDeclare, err)
			}
		}
		vh.exchanges[m.Exchange] = nex
		return nil
	}
	what := describeExchange(m.Exchange, vh.name)
	if ex.kind != m.Type {
		return amqp.NewError(amqp.PreconditionFailed, methodExchangeDeclare,
			"inequivalent arg 'type' for %s: received '%s' but current is '%s'", what, m.Type, ex.kind)
	}
	if err := equivalentBool(methodExchangeDeclare, what, "durable", m.Durable, ex.durable); err != nil {
		return err
	}
	if err := equivalentBool(methodExchangeDeclare, what, "auto_delete", m.AutoDelete, ex.autoDelete); err != nil {
		return err
	}
	if err := equivalentBool(methodExchangeDeclare, what, "internal", m.Internal, ex.internal); err != nil {
		return err
	}
	return equivalentArgs(methodExchangeDeclare, what, exchangeEquivalenceArgs, m.Arguments, ex.args)
}

func equivalentBool(method uint32, what, name string, got, have bool) *amqp.Error {
	if got == have {
		return nil
	}
	return amqp.NewError(amqp.PreconditionFailed, method,
		"inequivalent arg '%s' for %s: received '%t' but current is '%t'", name, what, got, have)
}

// deleteExchange implements exchange.delete.
func (vh *Vhost) deleteExchange(name string, ifUnused bool) *amqp.Error {
	if name == "" {
		return amqp.NewError(amqp.AccessRefused, methodExchangeDelete, "operation not permitted on the default exchange")
	}
	if strings.HasPrefix(name, "amq.") {
		return amqp.NewError(amqp.AccessRefused, methodExchangeDelete, "deletion of system %s not allowed", describeExchange(name, vh.name))
	}
	vh.mu.Lock()
	defer vh.mu.Unlock()
	ex := vh.exchanges[name]
	if ex == nil {
		// RabbitMQ 3.x answers delete-ok for an exchange that does not exist.
		return nil
	}
	ex.mu.RLock()
	inUse := ex.bindings.Len() > 0
	ex.mu.RUnlock()
	if ifUnused && (inUse || len(ex.incoming) > 0) {
		return amqp.NewError(amqp.PreconditionFailed, methodExchangeDelete, "%s in use", describeExchange(name, vh.name))
	}
	var b metaBatch
	vh.removeExchangeLocked(ex, &b)
	vh.commitBatch(&b)
	return nil
}

// removeExchangeLocked deletes ex and every binding from or to it, adding
// their removal from meta.db to b (with the exchanges that auto-delete as a
// result) so the caller commits them in one transaction.
func (vh *Vhost) removeExchangeLocked(ex *Exchange, b *metaBatch) {
	delete(vh.exchanges, ex.name)
	ex.mu.Lock()
	for _, b := range ex.bindings.Bindings() {
		k := bindingKey{source: ex, key: b.Key, args: canonicalArgs(b.Args)}
		switch d := b.Dest.(type) {
		case *Queue:
			delete(d.bindings, k)
		case *Exchange:
			delete(d.incoming, k)
		}
	}
	// Publishers still holding ex route nowhere. newExchange made ex with
	// this kind and these arguments, so route.New accepts them again.
	if m, err := route.New(ex.kind, ex.args, routeTableLess); err == nil {
		ex.bindings = m
	} else {
		vh.log.Error("emptying the bindings of a deleted exchange", "exchange", ex.name, "err", err)
	}
	ex.mu.Unlock()
	for k := range ex.incoming {
		k.source.mu.Lock()
		k.source.bindings.RemoveDest(ex)
		k.source.mu.Unlock()
		vh.maybeAutoDeleteExchangeLocked(k.source, b)
	}
	ex.incoming = nil
	if ex.durable && vh.meta != nil {
		// The command's writes remove the bindings from and to it too.
		if err := (DeleteExchange{Vhost: vh.name, Name: ex.name}).writes(b); err != nil {
			vh.log.Error("could not remove an exchange from the metadata store", "exchange", ex.name, "err", err)
		}
	}
}

// commitBatch removes definitions in one transaction; a failure is logged
// (the objects are gone from the running broker either way and would be
// re-created only after a restart, all of them or none).
func (vh *Vhost) commitBatch(b *metaBatch) {
	if vh.meta == nil {
		return
	}
	if err := vh.meta.commit(b); err != nil {
		vh.log.Error("could not remove definitions from the metadata store", "err", err)
	}
}

// commitDeletes is commitBatch of the writes of commands.
func (vh *Vhost) commitDeletes(cs ...Command) {
	if vh.meta == nil {
		return
	}
	if err := vh.meta.commitCommands(cs...); err != nil {
		vh.log.Error("could not remove definitions from the metadata store", "err", err)
	}
}

// maybeAutoDeleteExchangeLocked deletes an auto-delete exchange with no
// bindings left, adding its removal from meta.db to b.
func (vh *Vhost) maybeAutoDeleteExchangeLocked(ex *Exchange, b *metaBatch) {
	if !ex.autoDelete || vh.exchanges[ex.name] != ex {
		return
	}
	ex.mu.RLock()
	empty := ex.bindings.Len() == 0
	ex.mu.RUnlock()
	if empty {
		vh.removeExchangeLocked(ex, b)
	}
}

// bind adds a binding from source to dest.
func (vh *Vhost) bindLocked(source *Exchange, dest destination, key string, args amqp.Table) *amqp.Error {
	if err := validateBinding(source, dest, key, args); err != nil {
		return err
	}
	k := bindingKey{source: source, key: key, args: canonicalArgs(args)}
	b := route.Binding[destination]{Dest: dest, Key: key, Args: args}
	source.mu.Lock()
	added := source.bindings.Add(b)
	source.mu.Unlock()
	if added && vh.meta != nil && source.durable && isDurable(dest) {
		err := vh.meta.commitCommands(vh.bindCommand(source, dest, key, args))
		if err != nil {
			source.mu.Lock()
			source.bindings.Remove(b)
			source.mu.Unlock()
			return metaFailure(methodQueueBind, err)
		}
	}
	switch d := dest.(type) {
	case *Queue:
		d.bindings[k] = struct{}{}
	case *Exchange:
		d.incoming[k] = struct{}{}
	}
	return nil
}

// unbindLocked removes a binding and, when that leaves an auto-delete source
// unbound, the source, with their definitions in one transaction.
func (vh *Vhost) unbindLocked(source *Exchange, dest destination, key string, args amqp.Table) {
	var b metaBatch
	k := bindingKey{source: source, key: key, args: canonicalArgs(args)}
	source.mu.Lock()
	removed := source.bindings.Remove(route.Binding[destination]{Dest: dest, Key: key, Args: args})
	source.mu.Unlock()
	if removed && vh.meta != nil && source.durable && isDurable(dest) {
		if err := Unbind(vh.bindCommand(source, dest, key, args)).writes(&b); err != nil {
			vh.log.Error("could not remove a binding from the metadata store", "err", err)
		}
	}
	switch d := dest.(type) {
	case *Queue:
		delete(d.bindings, k)
	case *Exchange:
		delete(d.incoming, k)
	}
	vh.maybeAutoDeleteExchangeLocked(source, &b)
	vh.commitBatch(&b)
}

// bindCommand is the Bind command of a binding from source to dest.
func (vh *Vhost) bindCommand(source *Exchange, dest destination, key string, args amqp.Table) Bind {
	return Bind{Vhost: vh.name, Source: source.name, Destination: dest.destName(), DestinationType: destType(dest),
		Durable: source.durable && isDurable(dest), RoutingKey: key, Arguments: tableBytes(args)}
}

// bindQueue implements queue.bind.
func (vh *Vhost) bindQueue(c *conn, m *amqp.QueueBind) *amqp.Error {
	vh.mu.Lock()
	defer vh.mu.Unlock()
	q, src, err := vh.bindEndsLocked(c, methodQueueBind, m.Queue, m.Exchange)
	if err != nil {
		return err
	}
	return vh.bindLocked(src, q, m.RoutingKey, m.Arguments)
}

// unbindQueue implements queue.unbind; unbinding what is not bound succeeds.
func (vh *Vhost) unbindQueue(c *conn, m *amqp.QueueUnbind) *amqp.Error {
	vh.mu.Lock()
	defer vh.mu.Unlock()
	q, src, err := vh.bindEndsLocked(c, methodQueueUnbind, m.Queue, m.Exchange)
	if err != nil {
		return err
	}
	vh.unbindLocked(src, q, m.RoutingKey, m.Arguments)
	return nil
}

func (vh *Vhost) bindEndsLocked(c *conn, method uint32, queue, exchange string) (*Queue, *Exchange, *amqp.Error) {
	if exchange == "" {
		return nil, nil, amqp.NewError(amqp.AccessRefused, method, "operation not permitted on the default exchange")
	}
	q := vh.queues[queue]
	if q == nil {
		return nil, nil, amqp.NewError(amqp.NotFound, method, "no %s", describeQueue(queue, vh.name))
	}
	if err := checkExclusive(c, q, method); err != nil {
		return nil, nil, err
	}
	src := vh.exchanges[exchange]
	if src == nil {
		return nil, nil, amqp.NewError(amqp.NotFound, method, "no %s", describeExchange(exchange, vh.name))
	}
	return q, src, nil
}

// bindExchange implements exchange.bind and exchange.unbind.
func (vh *Vhost) bindExchange(dest, source, key string, args amqp.Table, unbind bool) *amqp.Error {
	method := methodExchangeBind
	if unbind {
		method = methodExchangeUnbind
	}
	if dest == "" || source == "" {
		return amqp.NewError(amqp.AccessRefused, method, "operation not permitted on the default exchange")
	}
	vh.mu.Lock()
	defer vh.mu.Unlock()
	d := vh.exchanges[dest]
	if d == nil {
		return amqp.NewError(amqp.NotFound, method, "no %s", describeExchange(dest, vh.name))
	}
	s := vh.exchanges[source]
	if s == nil {
		return amqp.NewError(amqp.NotFound, method, "no %s", describeExchange(source, vh.name))
	}
	if unbind {
		vh.unbindLocked(s, d, key, args)
		return nil
	}
	return vh.bindLocked(s, d, key, args)
}

func destType(d destination) string {
	if _, ok := d.(*Exchange); ok {
		return "exchange"
	}
	return "queue"
}

// checkExclusive refuses access to another connection's exclusive queue.
func checkExclusive(c *conn, q *Queue, method uint32) *amqp.Error {
	if q.exclusive && q.owner != c {
		return amqp.NewError(amqp.ResourceLocked, method,
			"cannot obtain exclusive access to locked %s. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.",
			describeQueue(q.name, q.vhost.name))
	}
	return nil
}

// lookupQueue finds a queue for a method, with RabbitMQ's 404 and 405 errors.
func (vh *Vhost) lookupQueue(c *conn, name string, method uint32) (*Queue, *amqp.Error) {
	q := vh.queue(name)
	if q == nil {
		return nil, amqp.NewError(amqp.NotFound, method, "no %s", describeQueue(name, vh.name))
	}
	if err := checkExclusive(c, q, method); err != nil {
		return nil, err
	}
	return q, nil
}

// declareQueue implements queue.declare. It returns the queue and its counts.
func (vh *Vhost) declareQueue(c *conn, m *amqp.QueueDeclare) (*Queue, *amqp.Error) {
	name, err := serverQueueName(m)
	if err != nil {
		return nil, err
	}
	return vh.declareQueueNamed(c, m, name)
}

// serverQueueName is the name a queue.declare declares: its queue name or,
// when that is empty and the declare not passive, a new amq.gen- name.
func serverQueueName(m *amqp.QueueDeclare) (string, *amqp.Error) {
	if m.Queue != "" || m.Passive {
		return m.Queue, nil
	}
	if t, ok := m.Arguments["x-queue-type"].(string); ok && (t == "stream" || t == "quorum") {
		// RabbitMQ's replicated queue types have no server-named queues.
		return "", amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare,
			"Cannot declare a server-named queue for type rabbit_%s_queue", t)
	}
	return generateName("amq.gen-"), nil
}

// testHookDeclareDiskWork, when set by a test, runs where a durable declare
// has released Vhost.mu to create the queue's files.
var testHookDeclareDiskWork func(*Queue)

// declareQueueNamed is declareQueue with the name already chosen by
// serverQueueName, so the channel can check permission on a generated name.
// A queue with files (durable or a stream) is created in three steps so no
// disk I/O happens under Vhost.mu, which every publisher of the vhost reads:
// the name is reserved under the lock, the index and the meta.db record are
// written outside it, and the queue is installed under it.
func (vh *Vhost) declareQueueNamed(c *conn, m *amqp.QueueDeclare, name string) (*Queue, *amqp.Error) {
	vh.mu.Lock()
	vh.waitIdleLocked(name)
	seen := vh.adm.policySet() // before prepare resolves the arguments
	q, isNew, err := vh.prepareQueueLocked(c, m, name)
	if err != nil || !isNew {
		vh.mu.Unlock()
		return q, err
	}
	if !q.h.hasFiles() {
		vh.installQueueLocked(q)
		vh.mu.Unlock()
		return q, nil
	}
	release := vh.reserveLocked(name, true)
	vh.mu.Unlock()
	if hook := testHookDeclareDiskWork; hook != nil {
		hook(q)
	}
	err = vh.createQueueFiles(c, q)
	vh.mu.Lock()
	release()
	if err == nil && vh.gone {
		err = amqp.NewError(amqp.NotFound, methodQueueDeclare, "no vhost '%s'", vh.name)
		vh.mu.Unlock()
		vh.undoQueueFiles(q)
		return nil, err
	}
	if err == nil {
		vh.installQueueLocked(q)
		// An x-expires timer that fired before the queue was installed
		// found nothing to remove; count the idle time from here.
		q.restartExpiry()
	}
	vh.mu.Unlock()
	if err != nil {
		return nil, err
	}
	vh.catchUpQueuePolicy(q, seen)
	return q, nil
}

// waitIdleLocked waits, releasing vh.mu meanwhile, until no declare or
// delete of name is doing its disk work.
func (vh *Vhost) waitIdleLocked(name string) {
	for wait := vh.busy[name]; wait != nil; wait = vh.busy[name] {
		vh.mu.Unlock()
		<-wait
		vh.mu.Lock()
	}
}

// reserveLocked marks name busy and returns the function, to be called with
// vh.mu held, that marks it idle again.
func (vh *Vhost) reserveLocked(name string, declaring bool) func() {
	done := make(chan struct{})
	vh.busy[name] = done
	if declaring {
		vh.declaring++
	}
	return func() {
		delete(vh.busy, name)
		if declaring {
			vh.declaring--
		}
		close(done)
	}
}

// prepareQueueLocked answers a declare of an existing queue (isNew false),
// or validates a new one and returns it, not yet installed.
func (vh *Vhost) prepareQueueLocked(c *conn, m *amqp.QueueDeclare, name string) (q *Queue, isNew bool, err *amqp.Error) {
	q = vh.queues[name]
	if m.Passive {
		if q == nil {
			return nil, false, amqp.NewError(amqp.NotFound, methodQueueDeclare, "no %s", describeQueue(name, vh.name))
		}
		return q, false, checkExclusive(c, q, methodQueueDeclare)
	}
	if q != nil {
		return q, false, redeclareQueue(c, m, q)
	}
	if strings.HasPrefix(name, "amq.") && m.Queue != "" {
		return nil, false, amqp.NewError(amqp.AccessRefused, methodQueueDeclare, "queue name '%s' contains reserved prefix 'amq.*'", name)
	}
	if err := vh.queueLimitError(name); err != nil {
		return nil, false, err
	}
	qa, aerr := parseQueueArgs(name, vh.name, m.Arguments)
	if aerr != nil {
		return nil, false, aerr
	}
	qa = vh.policyQueueArgs(name, m.Arguments, qa)
	var owner *conn
	if m.Exclusive {
		owner = c
	}
	if err := kindOf(&qa).checkDeclare(vh, name, m, &qa); err != nil {
		return nil, false, err
	}
	return newQueue(vh, name, m.Durable, m.Exclusive, m.AutoDelete, m.Arguments, qa, owner), true, nil
}

// redeclareQueue checks a declare of an existing queue is equivalent.
func redeclareQueue(c *conn, m *amqp.QueueDeclare, q *Queue) *amqp.Error {
	if err := checkExclusive(c, q, methodQueueDeclare); err != nil {
		return err
	}
	q.h.touch()
	what := describeQueue(q.name, q.vhost.name)
	if err := equivalentBool(methodQueueDeclare, what, "durable", m.Durable, q.durable); err != nil {
		return err
	}
	if err := equivalentBool(methodQueueDeclare, what, "auto_delete", m.AutoDelete, q.autoDelete); err != nil {
		return err
	}
	if err := equivalentBool(methodQueueDeclare, what, "exclusive", m.Exclusive, q.exclusive); err != nil {
		return err
	}
	return equivalentArgs(methodQueueDeclare, what, queueEquivalenceArgs(q.args), m.Arguments, q.args)
}

// createQueueFiles creates a new queue's index (or stream log) and its
// meta.db record; called without vh.mu.
func (vh *Vhost) createQueueFiles(c *conn, q *Queue) *amqp.Error {
	var srv *Server
	if c != nil {
		srv = c.srv
	}
	if err := q.h.openFiles(srv); err != nil {
		return amqp.NewError(amqp.InternalError, methodQueueDeclare, "could not create the queue's index: %v", err)
	}
	if isDurable(q) && vh.meta != nil {
		err := vh.meta.commitCommands(DeclareQueue{
			Vhost: vh.name, Name: q.name, Durable: q.durable, AutoDelete: q.autoDelete, Arguments: tableBytes(q.args),
		})
		if err != nil {
			q.h.delete()
			return metaFailure(methodQueueDeclare, err)
		}
	}
	return nil
}

// undoQueueFiles removes what createQueueFiles made, for a queue whose vhost
// was deleted meanwhile.
func (vh *Vhost) undoQueueFiles(q *Queue) {
	if isDurable(q) && vh.meta != nil {
		vh.commitDeletes(DeleteQueue{Vhost: vh.name, Name: q.name})
	}
	q.h.delete()
}

// installQueueLocked makes a created queue visible.
func (vh *Vhost) installQueueLocked(q *Queue) {
	vh.queues[q.name] = q
	if q.owner != nil {
		q.owner.addExclusive(q)
	}
	// Every queue is bound to the default exchange by its name; that binding is
	// implicit (routeOne looks queues up by name).
}

// deleteQueue implements queue.delete and returns the ready messages dropped.
func (vh *Vhost) deleteQueue(c *conn, name string, ifUnused, ifEmpty bool) (int, *amqp.Error) {
	vh.mu.Lock()
	vh.waitIdleLocked(name)
	q := vh.queues[name]
	if q == nil {
		vh.mu.Unlock()
		// RabbitMQ 3.x answers delete-ok with 0 for a queue that does not exist.
		return 0, nil
	}
	if err := checkExclusive(c, q, methodQueueDelete); err != nil {
		vh.mu.Unlock()
		return 0, err
	}
	if err := q.h.deletable(ifUnused, ifEmpty); err != nil {
		vh.mu.Unlock()
		return 0, err
	}
	var b metaBatch
	cs, n := vh.removeQueueAndUnlock(q, &b, true)
	notifyCancelled(cs)
	return n, nil
}

// removeQueueAndUnlock, called with vh.mu held, unbinds and stops q and releases vh.mu, returning its
// consumers for the caller to notify. The removal of the queue, its
// bindings and the exchanges that auto-delete with them is added to b and
// committed in one transaction when commit is set: a crash between them
// would leave bindings to a missing queue, which the loader refuses. The
// name stays busy while the transaction and the removal of the queue's
// files run outside vh.mu.
func (vh *Vhost) removeQueueAndUnlock(q *Queue, b *metaBatch, commit bool) ([]*consumer, int) {
	if vh.queues[q.name] != q {
		vh.mu.Unlock()
		return nil, 0
	}
	delete(vh.queues, q.name)
	ops := len(b.ops)
	for k := range q.bindings {
		k.source.mu.Lock()
		k.source.bindings.RemoveDest(q)
		k.source.mu.Unlock()
		vh.maybeAutoDeleteExchangeLocked(k.source, b)
	}
	// An exchange that auto-deleted may be declared again as soon as vh.mu
	// is released: its removal must be stored before, so it is committed
	// under the lock (rare); the queue's name stays busy, so the common
	// case commits outside it.
	underLock := commit && len(b.ops) > ops
	q.bindings = nil
	if q.owner != nil {
		q.owner.removeExclusive(q)
	}
	if isDurable(q) && vh.meta != nil {
		// The command's writes remove the bindings to it too.
		if err := (DeleteQueue{Vhost: vh.name, Name: q.name}).writes(b); err != nil {
			vh.log.Error("could not remove a queue from the metadata store", "queue", q.name, "err", err)
		}
	}
	if underLock {
		vh.commitBatch(b)
	}
	release := vh.reserveLocked(q.name, false)
	vh.mu.Unlock()
	if commit && !underLock {
		vh.commitBatch(b)
	}
	cs, n := q.h.delete()
	vh.mu.Lock()
	release()
	vh.mu.Unlock()
	return cs, n
}

// removeQueue deletes q if it is still registered (auto-delete, exclusive cleanup).
func (vh *Vhost) removeQueue(q *Queue) {
	vh.mu.Lock()
	var b metaBatch
	cs, _ := vh.removeQueueAndUnlock(q, &b, true)
	notifyCancelled(cs)
}

// notifyCancelled tells each consumer's channel that the server cancelled it.
func notifyCancelled(cs []*consumer) {
	for _, c := range cs {
		c.sink.cancelled(c)
	}
}

// Queues returns the vhost's queues sorted by name.
func (vh *Vhost) Queues() []*Queue {
	vh.mu.RLock()
	out := make([]*Queue, 0, len(vh.queues))
	for _, q := range vh.queues {
		out = append(out, q)
	}
	vh.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// generateName returns prefix followed by 22 random URL-safe characters, like
// RabbitMQ's amq.gen- and amq.ctag- names.
func generateName(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("server: crypto/rand failed: %v", err))
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// configureExchangeDedup sets up x-message-deduplication on a new exchange.
func configureExchangeDedup(ex *Exchange, vhost string) *amqp.Error {
	v, ok := ex.args["x-message-deduplication"]
	if !ok {
		return nil
	}
	fail := func(arg, reason string, a ...any) *amqp.Error {
		return amqp.NewError(amqp.PreconditionFailed, methodExchangeDeclare, "invalid arg '%s' for %s: %s",
			arg, describeExchange(ex.name, vhost), fmt.Sprintf(reason, a...))
	}
	on, isBool := v.(bool)
	if !isBool {
		return fail("x-message-deduplication", "{unacceptable_type,%s}", argTypeName(v))
	}
	if !on {
		return nil
	}
	size, ttl, err := parseDedupArgs(ex.args, fail)
	if err != nil {
		return err
	}
	ex.dedup = newDedupCache(size, ttl)
	return nil
}
