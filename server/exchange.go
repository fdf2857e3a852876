package server

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server/route"
)

// Exchange kinds.
const (
	kindDirect         = "direct"
	kindFanout         = "fanout"
	kindTopic          = "topic"
	kindHeaders        = "headers"
	kindConsistentHash = route.KindConsistentHash
	kindModulusHash    = route.KindModulusHash
	kindRandom         = route.KindRandom
	kindLocalRandom    = route.KindLocalRandom
)

// destination is what a binding points at: a *Queue or an *Exchange.
type destination interface{ destName() string }

func (q *Queue) destName() string    { return q.name }
func (e *Exchange) destName() string { return e.name }

// Exchange routes messages to queues and other exchanges.
//
// Lock order: vhost.mu → Exchange.mu. Routing holds only Exchange.mu for reading.
type Exchange struct {
	name       string
	kind       string
	vhost      *Vhost
	durable    bool
	autoDelete bool
	internal   bool
	args       amqp.Table

	// match is the type whose matcher routes: kind, or for x-delayed-message
	// its x-delayed-type.
	match string

	mu       sync.RWMutex
	bindings route.Matcher[destination]
	// picks is true for the kinds whose matcher is a route.Picker: they route
	// each message once, to at most one destination (see router.pick).
	picks bool

	// dedup is the x-message-deduplication cache, guarded by dedupMu.
	dedupMu sync.Mutex
	dedup   *dedupCache

	// policyAlternate is an alternate-exchange set by a policy; the declared
	// argument wins over it, as in RabbitMQ.
	policyAlternate atomic.Pointer[string]

	// delay holds the exchange's delayed messages when it delays them
	// (delayed.go); nil for the other exchanges.
	delay *delayStore

	// incoming are bindings where this exchange is the destination (guarded by vhost.mu).
	incoming map[bindingKey]struct{}

	stats exchangeStats
}

type exchangeStats struct {
	publishIn  counter
	publishOut counter
}

// newExchange makes an exchange of type kind with its binding structure, or
// refuses an unknown type (503 COMMAND_INVALID) or x-consistent-hash
// arguments the plugin refuses (406 PRECONDITION_FAILED), as
// exchange.declare answers them. An x-delayed-message exchange routes with
// the structure of its x-delayed-type, checked first with the plugin's errors.
func newExchange(vh *Vhost, name, kind string, durable, autoDelete, internal bool, args amqp.Table) (*Exchange, *amqp.Error) {
	if kind == kindDelayed {
		if err := checkDelayedType(args); err != nil {
			return nil, err
		}
	}
	match, _ := matchKind(kind, args)
	m, err := route.New(match, args, routeTableLess)
	switch {
	case errors.Is(err, route.ErrUnknownKind):
		return nil, amqp.NewError(amqp.CommandInvalid, methodExchangeDeclare, "unknown exchange type '%s'", match)
	case err != nil:
		return nil, amqp.NewError(amqp.PreconditionFailed, methodExchangeDeclare, "%v", err)
	}
	ex := &Exchange{
		name: name, kind: kind, match: match, vhost: vh, durable: durable, autoDelete: autoDelete,
		internal: internal, args: args, bindings: m, picks: route.IsPickerKind(match),
		incoming: make(map[bindingKey]struct{}),
	}
	if vh != nil && isDelayedExchange(kind, args) {
		ex.delay = newDelayStore(ex)
	}
	return ex, nil
}

// isDuplicate applies the exchange's x-message-deduplication cache.
func (e *Exchange) isDuplicate(m *Message) bool {
	if e.dedup == nil {
		return false
	}
	e.dedupMu.Lock()
	defer e.dedupMu.Unlock()
	return e.dedup.seenBefore(m, time.Now())
}

// Name returns the exchange's name ("" for the default exchange).
func (e *Exchange) Name() string { return e.name }

// alternate returns the alternate-exchange argument, if any.
func (e *Exchange) alternate() string {
	if s, ok := e.args["alternate-exchange"].(string); ok {
		return s
	}
	if p := e.policyAlternate.Load(); p != nil {
		return *p
	}
	return ""
}

// canonicalArgs encodes a table deterministically, for binding identity.
func canonicalArgs(t amqp.Table) string {
	if len(t) == 0 {
		return ""
	}
	return string(amqp.AppendTable(nil, t))
}

// describe renders an exchange name as RabbitMQ does in error texts.
func describeExchange(name, vhost string) string {
	return fmt.Sprintf("exchange '%s' in vhost '%s'", name, vhost)
}

func describeQueue(name, vhost string) string {
	return fmt.Sprintf("queue '%s' in vhost '%s'", name, vhost)
}

// router collects a message's destination queues. One lives on each channel and
// is reused, so routing allocates nothing in steady state.
type router struct {
	queues   []*Queue
	pending  []*Exchange
	visited  []*Exchange
	visitFn  func(destination)
	headers  amqp.Table
	needHdrs func() amqp.Table
	delivery route.Delivery // reused by pick

	// noDelay routes through delaying exchanges as through their
	// x-delayed-type: set when a delayed message's time has come.
	noDelay bool
	// delays are the delaying exchanges that hold the message (delayed.go),
	// delay its delay (known once delayRead is set), delayErr a delay the
	// plugin would crash on.
	delays    []*Exchange
	delay     int64
	delayRead bool
	delayErr  *amqp.Error
}

func newRouter() *router {
	r := &router{}
	r.visitFn = r.visit
	return r
}

func (r *router) visit(d destination) {
	switch d := d.(type) {
	case *Queue:
		for _, q := range r.queues {
			if q == d {
				return
			}
		}
		r.queues = append(r.queues, d)
	case *Exchange:
		for _, e := range r.visited {
			if e == d {
				return // exchange-to-exchange loop
			}
		}
		r.visited = append(r.visited, d)
		r.pending = append(r.pending, d)
	}
}

// route returns the queues m reaches from ex, following exchange-to-exchange
// bindings (each exchange visited once) and alternate exchanges.
func (r *router) route(ex *Exchange, m *Message) []*Queue {
	r.queues = r.queues[:0]
	r.pending = r.pending[:0]
	r.visited = append(r.visited[:0], ex)
	r.headers = nil
	r.delays, r.delayRead, r.delayErr = r.delays[:0], false, nil
	r.routeOne(ex, m)
	for len(r.pending) > 0 {
		next := r.pending[len(r.pending)-1]
		r.pending = r.pending[:len(r.pending)-1]
		r.routeOne(next, m)
	}
	return r.queues
}

func (r *router) routeOne(ex *Exchange, m *Message) {
	before := len(r.queues) + len(r.pending)
	if ex.name == "" {
		if q := ex.vhost.queue(m.RoutingKey); q != nil {
			r.visit(q)
		}
		for _, k := range m.ccKeys {
			if q := ex.vhost.queue(k); q != nil {
				r.visit(q)
			}
		}
	} else if ex.delay != nil && r.holdsDelayed(ex, m) {
		// Held for later: no queue now, so an alternate exchange gets
		// it as when nothing matched (the plugin's route returns []).
	} else if ex.picks {
		r.pick(ex, m)
	} else {
		var hdrs amqp.Table
		if ex.match == kindHeaders {
			if p, err := m.Properties(); err == nil { // validated at publish
				hdrs = p.Headers
			}
		}
		ex.mu.RLock()
		ex.bindings.Match(m.RoutingKey, hdrs, r.visitFn)
		for _, k := range m.ccKeys {
			ex.bindings.Match(k, hdrs, r.visitFn)
		}
		ex.mu.RUnlock()
	}
	if !r.noDelay { // a fired delayed message was counted when published
		ex.stats.publishIn.inc()
	}
	if len(r.queues)+len(r.pending) == before {
		if alt := ex.alternate(); alt != "" {
			if ae := ex.vhost.exchange(alt); ae != nil {
				r.visit(ae)
			}
		}
	}
}

// holdsDelayed reports whether the delaying exchange ex holds m for later
// (a valid x-delay), and records it in r.delays.
func (r *router) holdsDelayed(ex *Exchange, m *Message) bool {
	if r.noDelay {
		return false
	}
	if !r.delayRead {
		r.delay, r.delayErr = messageDelay(m)
		r.delayRead = true
	}
	if r.delay <= 0 {
		return false
	}
	r.delays = append(r.delays, ex)
	return true
}

// pick routes m through an exchange that chooses at most one destination per
// message (x-consistent-hash, x-modulus-hash, x-random, x-local-random).
// RabbitMQ asks such a type once per message, with all its routing keys, so
// the CC and BCC keys do not add destinations as they do for the other types.
func (r *router) pick(ex *Exchange, m *Message) {
	ex.mu.RLock()
	defer ex.mu.RUnlock()
	p, ok := ex.bindings.(route.Picker[destination])
	if !ok {
		return
	}
	d := &r.delivery
	*d = route.Delivery{RoutingKey: m.RoutingKey, CC: m.ccKeys}
	if p.Reads() != 0 {
		if props, err := m.Properties(); err == nil { // validated at publish
			d.Headers, d.Properties = props.Headers, props
		}
	}
	p.Pick(d, r.visitFn)
	*d = route.Delivery{} // drop the references to m
}
