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
	// storage holds persistent messages; nil when the server has no data
	// directory. Definitions are stored by the server's apply.
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
	// limits are the effective max-connections and max-queues (vhost_limits.go).
	limits vhostLimits

	adm vhostAdmin // metadata and policies (policy.go)

	streams streamTable // stream queues' logs (stream.go)

	delays delayer // fires delayed messages (delayer.go)
}

func newVhost(name string, log *slog.Logger) *Vhost {
	vh := &Vhost{name: name, log: log, exchanges: make(map[string]*Exchange), queues: make(map[string]*Queue),
		busy: make(map[string]chan struct{})}
	vh.delays.vh = vh
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

// declareExchange implements exchange.declare: the checks that need the
// method (passive, reserved names), then the apply, which decides.
func (vh *Vhost) declareExchange(m *amqp.ExchangeDeclare) *amqp.Error {
	ex := vh.exchange(m.Exchange)
	if m.Passive {
		if ex == nil {
			if err := vh.catchUp(methodExchangeDeclare); err != nil {
				return err
			}
			ex = vh.exchange(m.Exchange)
		}
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
	}
	return asAMQP(vh.srv.apply(DeclareExchange{
		Vhost: vh.name, Name: m.Exchange, Type: m.Type, Durable: m.Durable, AutoDelete: m.AutoDelete, Internal: m.Internal,
		Arguments: tableBytes(m.Arguments),
	}), methodExchangeDeclare)
}

// erlangAtom prints an exchange type as RabbitMQ prints the type's atom
// (~p): quoted when it is not a plain atom, so x-delayed-message shows as
// 'x-delayed-message' (and the error text then has it in two pairs of quotes).
func erlangAtom(s string) string {
	plain := s != "" && s[0] >= 'a' && s[0] <= 'z'
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@'
	}
	if plain {
		return s
	}
	return "'" + s + "'"
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
	return asAMQP(vh.srv.apply(DeleteExchange{Vhost: vh.name, Name: name, IfUnused: ifUnused}), methodExchangeDelete)
}

// removeExchangeLocked deletes ex and every binding from or to it from
// memory, with the exchanges that auto-delete as a result (their records
// were worked out by autoDeletesLocked and stored before).
func (vh *Vhost) removeExchangeLocked(ex *Exchange) {
	delete(vh.exchanges, ex.name)
	if ex.delay != nil {
		ex.delay.drop()
	}
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
	if m, err := route.New(ex.match, ex.args, routeTableLess); err == nil {
		ex.bindings = m
	} else {
		vh.log.Error("emptying the bindings of a deleted exchange", "exchange", ex.name, "err", err)
	}
	ex.mu.Unlock()
	for k := range ex.incoming {
		k.source.mu.Lock()
		k.source.bindings.RemoveDest(ex)
		k.source.mu.Unlock()
		vh.maybeAutoDeleteExchangeLocked(k.source)
	}
	ex.incoming = nil
}

// maybeAutoDeleteExchangeLocked deletes an auto-delete exchange with no
// bindings left.
func (vh *Vhost) maybeAutoDeleteExchangeLocked(ex *Exchange) {
	if !ex.autoDelete || vh.exchanges[ex.name] != ex {
		return
	}
	ex.mu.RLock()
	empty := ex.bindings.Len() == 0
	ex.mu.RUnlock()
	if empty {
		vh.removeExchangeLocked(ex)
	}
}

// bindLocked adds a checked binding from source to dest to memory.
func (vh *Vhost) bindLocked(source *Exchange, dest destination, key string, args amqp.Table) {
	k := bindingKey{source: source, key: key, args: canonicalArgs(args)}
	source.mu.Lock()
	source.bindings.Add(bindingOf(dest, key, args))
	source.mu.Unlock()
	switch d := dest.(type) {
	case *Queue:
		d.bindings[k] = struct{}{}
	case *Exchange:
		d.incoming[k] = struct{}{}
	}
}

// unbindLocked removes a binding from memory and, when that leaves an
// auto-delete source unbound, the source.
func (vh *Vhost) unbindLocked(source *Exchange, dest destination, key string, args amqp.Table) {
	k := bindingKey{source: source, key: key, args: canonicalArgs(args)}
	source.mu.Lock()
	source.bindings.Remove(bindingOf(dest, key, args))
	source.mu.Unlock()
	switch d := dest.(type) {
	case *Queue:
		delete(d.bindings, k)
	case *Exchange:
		delete(d.incoming, k)
	}
	vh.maybeAutoDeleteExchangeLocked(source)
}

// bindCommand is the Bind command of a binding from source to dest.
func (vh *Vhost) bindCommand(source, dest, destType, key string, args amqp.Table) Bind {
	return Bind{Vhost: vh.name, Source: source, Destination: dest, DestinationType: destType,
		RoutingKey: key, Arguments: tableBytes(args)}
}

// bindQueue implements queue.bind.
func (vh *Vhost) bindQueue(c *conn, m *amqp.QueueBind) *amqp.Error {
	if err := vh.checkBindEnds(c, methodQueueBind, m.Queue, m.Exchange); err != nil {
		return err
	}
	return asAMQP(vh.srv.apply(vh.bindCommand(m.Exchange, m.Queue, "queue", m.RoutingKey, m.Arguments)), methodQueueBind)
}

// unbindQueue implements queue.unbind; unbinding what is not bound
// succeeds, also from a missing exchange or of a missing queue (RabbitMQ
// 3.10 answers unbind-ok to both).
func (vh *Vhost) unbindQueue(c *conn, m *amqp.QueueUnbind) *amqp.Error {
	if err := vh.checkUnbindEnds(c, m); err != nil {
		return err
	}
	return asAMQP(vh.srv.apply(Unbind(vh.bindCommand(m.Exchange, m.Queue, "queue", m.RoutingKey, m.Arguments))), methodQueueUnbind)
}

// checkBindEnds checks a queue binding's ends for the connection: RabbitMQ's
// 403 for the default exchange, 404s, and 405 for another connection's
// exclusive queue.
func (vh *Vhost) checkBindEnds(c *conn, method uint32, queue, exchange string) *amqp.Error {
	if exchange == "" {
		return amqp.NewError(amqp.AccessRefused, method, "operation not permitted on the default exchange")
	}
	err := vh.checkBindEndsOnce(c, method, queue, exchange)
	if err != nil && err.Code == amqp.NotFound {
		if cerr := vh.catchUp(method); cerr != nil {
			return cerr
		}
		err = vh.checkBindEndsOnce(c, method, queue, exchange)
	}
	return err
}

func (vh *Vhost) checkBindEndsOnce(c *conn, method uint32, queue, exchange string) *amqp.Error {
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	q := vh.queues[queue]
	if q == nil {
		return amqp.NewError(amqp.NotFound, method, "no %s", describeQueue(queue, vh.name))
	}
	if err := checkExclusive(c, q, method); err != nil {
		return err
	}
	if vh.exchanges[exchange] == nil {
		return amqp.NewError(amqp.NotFound, method, "no %s", describeExchange(exchange, vh.name))
	}
	return nil
}

// checkUnbindEnds is checkBindEnds for queue.unbind, as RabbitMQ 3.10
// answers it: a missing end is no error, and another connection's exclusive
// queue is refused only if the binding exists.
func (vh *Vhost) checkUnbindEnds(c *conn, m *amqp.QueueUnbind) *amqp.Error {
	if m.Exchange == "" {
		return amqp.NewError(amqp.AccessRefused, methodQueueUnbind, "operation not permitted on the default exchange")
	}
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	q, src := vh.queues[m.Queue], vh.exchanges[m.Exchange]
	if q == nil || src == nil || !hasBinding(q, bindingKey{source: src, key: m.RoutingKey, args: canonicalArgs(m.Arguments)}) {
		return nil
	}
	return checkExclusive(c, q, methodQueueUnbind)
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
	vh.mu.RLock()
	d, s := vh.exchanges[dest], vh.exchanges[source]
	vh.mu.RUnlock()
	if unbind && (d == nil || s == nil) {
		return nil // a missing end has no bindings: unbind-ok, as in RabbitMQ 3.10
	}
	if d == nil {
		return amqp.NewError(amqp.NotFound, method, "no %s", describeExchange(dest, vh.name))
	}
	if s == nil {
		return amqp.NewError(amqp.NotFound, method, "no %s", describeExchange(source, vh.name))
	}
	cmd := vh.bindCommand(source, dest, "exchange", key, args)
	if unbind {
		return asAMQP(vh.srv.apply(Unbind(cmd)), method)
	}
	return asAMQP(vh.srv.apply(cmd), method)
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
		return lockedQueueError(q, method)
	}
	return nil
}

func lockedQueueError(q *Queue, method uint32) *amqp.Error {
	return amqp.NewError(amqp.ResourceLocked, method,
		"cannot obtain exclusive access to locked %s. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.",
		describeQueue(q.name, q.vhost.name))
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
	m = vh.withDefaultQueueType(m)
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

// declareQueueNamed is declareQueue with the name already chosen by
// serverQueueName, so the channel can check permission on a generated name.
// The checks that need the connection and the method (passive, exclusive
// access, reserved names) are made here; the apply decides the rest and
// creates the queue's files outside Vhost.mu (prepareDeclareQueue).
func (vh *Vhost) declareQueueNamed(c *conn, m *amqp.QueueDeclare, name string) (*Queue, *amqp.Error) {
	// Counted as RabbitMQ's channel counts them: every non-passive declare
	// (refused ones too), and those that created the queue. Definitions
	// imports call applyQueueDeclare and count in neither, as in RabbitMQ.
	if !m.Passive {
		vh.countQueue(queuesDeclared)
	}
	q, created, err := vh.applyQueueDeclare(c, m, name)
	if created {
		vh.countQueue(queuesCreated)
	}
	return q, err
}

// applyQueueDeclare is declareQueueNamed without the counting; created
// reports whether it made the queue.
func (vh *Vhost) applyQueueDeclare(c *conn, m *amqp.QueueDeclare, name string) (q *Queue, created bool, aerr *amqp.Error) {
	q = vh.queue(name)
	if m.Passive {
		if q == nil {
			if err := vh.catchUp(methodQueueDeclare); err != nil {
				return nil, false, err
			}
			q = vh.queue(name)
		}
		if q == nil {
			return nil, false, amqp.NewError(amqp.NotFound, methodQueueDeclare, "no %s", describeQueue(name, vh.name))
		}
		return q, false, checkExclusive(c, q, methodQueueDeclare)
	}
	if q != nil {
		if err := checkExclusive(c, q, methodQueueDeclare); err != nil {
			return nil, false, err
		}
	} else if strings.HasPrefix(name, "amq.") && m.Queue != "" {
		return nil, false, amqp.NewError(amqp.AccessRefused, methodQueueDeclare, "queue name '%s' contains reserved prefix 'amq.*'", name)
	}
	cmd := DeclareQueue{Vhost: vh.name, Name: name, Durable: m.Durable, Exclusive: m.Exclusive, AutoDelete: m.AutoDelete,
		Arguments: tableBytes(m.Arguments), Node: vh.srv.cfg.NodeName}
	if m.Exclusive && c != nil {
		cmd.Owner = &OwnerRef{Node: vh.srv.cfg.NodeName, Conn: c.id}
	}
	v, err := vh.srv.applyValue(cmd)
	if err != nil {
		return nil, false, asAMQP(err, methodQueueDeclare)
	}
	if nq, ok := v.(*Queue); ok {
		return nq, true, nil
	}
	if r, ok := v.(redeclaredQueue); ok {
		return r.q, false, nil
	}
	// An equivalent redeclare whose result did not come back to this
	// node: the queue as it is now.
	if q = vh.queue(name); q == nil {
		return nil, false, amqp.NewError(amqp.NotFound, methodQueueDeclare, "no %s", describeQueue(name, vh.name))
	}
	return q, false, nil
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
	q := vh.queue(name)
	if q == nil {
		if err := vh.catchUp(methodQueueDelete); err != nil {
			return 0, err
		}
		q = vh.queue(name)
	}
	if q == nil {
		// RabbitMQ 3.x answers delete-ok with 0 for a queue that does not exist.
		return 0, nil
	}
	if err := checkExclusive(c, q, methodQueueDelete); err != nil {
		return 0, err
	}
	atHome, aerr := deleteAtHome(q, ifUnused, ifEmpty)
	if aerr != nil {
		return 0, aerr
	}
	v, err := vh.srv.applyValue(DeleteQueue{Vhost: vh.name, Name: name, IfUnused: ifUnused, IfEmpty: ifEmpty})
	if err != nil {
		return 0, asAMQP(err, methodQueueDelete)
	}
	n, _ := v.(int)
	if atHome >= 0 {
		n = atHome
	}
	return n, nil
}

// deleteAtHome deletes q on its home node first when it is homed on
// another node, with queue.delete's flags, which the home checks against
// its own counts, and returns the ready messages the home dropped; -1 for a
// queue homed here. The definition here goes after it; in a cluster the
// home only checks and counts, and this definition delete, through Raft,
// is the one that removes the queue everywhere, its home included. It
// waits for the home, so it runs without Vhost.mu.
func deleteAtHome(q *Queue, ifUnused, ifEmpty bool) (int, *amqp.Error) {
	rq, ok := q.h.(*remoteQueue)
	if !ok {
		return -1, nil
	}
	return rq.deleteAtHome(ifUnused, ifEmpty)
}

// removeQueueAndUnlock, called with vh.mu held, unbinds and stops q and
// releases vh.mu, returning its consumers for the caller to notify and the
// ready messages it held. Its records (and those of the exchanges that
// auto-delete with it) are already stored. The name stays busy while the
// queue's files are removed outside vh.mu.
func (vh *Vhost) removeQueueAndUnlock(q *Queue) ([]*consumer, int) {
	if vh.queues[q.name] != q {
		vh.mu.Unlock()
		return nil, 0
	}
	delete(vh.queues, q.name)
	vh.countQueue(queuesDeleted)
	for k := range q.bindings {
		k.source.mu.Lock()
		k.source.bindings.RemoveDest(q)
		k.source.mu.Unlock()
		vh.maybeAutoDeleteExchangeLocked(k.source)
	}
	q.bindings = nil
	if q.owner != nil {
		q.owner.removeExclusive(q)
	}
	release := vh.reserveLocked(q.name, false)
	vh.mu.Unlock()
	cs, n := q.h.delete()
	vh.mu.Lock()
	release()
	vh.mu.Unlock()
	return cs, n
}

// removeQueue deletes q, if it is still the vhost's queue of that name,
// through the apply: auto-delete (its last consumer went), exclusive
// cleanup (its connection closed) and x-expires.
func (vh *Vhost) removeQueue(q *Queue, why string) {
	s := vh.srv
	if s.cluster != nil {
		vh.removeQueueInCluster(q, why)
		return
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if vh.queue(q.name) != q {
		return
	}
	if _, err := s.applyOneLocked(DeleteQueue{Vhost: vh.name, Name: q.name, Owner: q.ownerRef}); err != nil {
		vh.log.Error("could not delete a queue", "queue", q.name, "reason", why, "err", err)
	}
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

// catchUp makes a cluster member apply every definition change committed
// before it (a barrier through the metadata log) before it answers from
// its own definitions that something is missing: without it a node behind
// the log would answer 404 for a queue another node declared and
// answered before this request began (or delete-ok for one it has not
// seen), which is not linearizable. Only the not-found answers wait; what
// the node has it answers at once. A standalone node has nothing to
// catch up with.
func (vh *Vhost) catchUp(method uint32) *amqp.Error {
	if vh.srv.cluster == nil {
		return nil
	}
	return asAMQP(vh.srv.logBarrier(), method)
}
