package server

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API (see admin.go): binding listings, bind and unbind.

// BindingInfo is a binding from an exchange to a queue or exchange.
type BindingInfo struct {
	Vhost, Source, Destination string
	// DestinationType is "queue" or "exchange".
	DestinationType string
	RoutingKey      string
	Arguments       amqp.Table
}

// Destination types of a binding.
const (
	DestQueue    = "queue"
	DestExchange = "exchange"
)

// Bindings returns the vhost's bindings, with the implicit binding of the
// default exchange to every queue, sorted by source, destination type,
// destination and routing key.
func (vh *Vhost) Bindings() []BindingInfo {
	var out []BindingInfo
	for _, q := range vh.Queues() {
		out = append(out, BindingInfo{Vhost: vh.name, Destination: q.name, DestinationType: DestQueue, RoutingKey: q.name})
	}
	for _, ex := range vh.Exchanges() {
		if ex.name != "" {
			out = append(out, ex.SourceBindings()...)
		}
	}
	sortBindings(out)
	return out
}

// SourceBindings returns the bindings from this exchange.
func (e *Exchange) SourceBindings() []BindingInfo {
	if e.name == "" {
		var out []BindingInfo
		for _, q := range e.vhost.Queues() {
			out = append(out, BindingInfo{Vhost: e.vhost.name, Destination: q.name, DestinationType: DestQueue, RoutingKey: q.name})
		}
		return out
	}
	e.mu.RLock()
	bs := e.bindings.Bindings()
	e.mu.RUnlock()
	out := make([]BindingInfo, 0, len(bs))
	for _, b := range bs {
		bi := BindingInfo{Vhost: e.vhost.name, Source: e.name, Destination: b.Dest.destName(), RoutingKey: b.Key, Arguments: b.Args}
		bi.DestinationType = DestQueue
		if _, ok := b.Dest.(*Exchange); ok {
			bi.DestinationType = DestExchange
		}
		out = append(out, bi)
	}
	sortBindings(out)
	return out
}

// DestinationBindings returns the bindings to this exchange.
func (e *Exchange) DestinationBindings() []BindingInfo {
	e.vhost.mu.RLock()
	keys := slices.Collect(maps.Keys(e.incoming))
	e.vhost.mu.RUnlock()
	return bindingsFromKeys(e.vhost.name, e.name, DestExchange, keys)
}

// Bindings returns the bindings to this queue, the default exchange's first.
func (q *Queue) Bindings() []BindingInfo {
	q.vhost.mu.RLock()
	keys := slices.Collect(maps.Keys(q.bindings))
	q.vhost.mu.RUnlock()
	out := bindingsFromKeys(q.vhost.name, q.name, DestQueue, keys)
	return append([]BindingInfo{{Vhost: q.vhost.name, Destination: q.name, DestinationType: DestQueue, RoutingKey: q.name}}, out...)
}

func bindingsFromKeys(vhost, dest, destType string, keys []bindingKey) []BindingInfo {
	out := make([]BindingInfo, 0, len(keys))
	for _, k := range keys {
		bi := BindingInfo{Vhost: vhost, Source: k.source.name, Destination: dest, DestinationType: destType, RoutingKey: k.key}
		if k.args != "" {
			// canonicalArgs is a length-prefixed encoded table.
			if t, err := amqp.DecodeTable([]byte(k.args)); err == nil {
				bi.Arguments = t
			}
		}
		out = append(out, bi)
	}
	sortBindings(out)
	return out
}

func sortBindings(bs []BindingInfo) {
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		switch {
		case a.Source != b.Source:
			return a.Source < b.Source
		case a.DestinationType != b.DestinationType:
			return a.DestinationType < b.DestinationType
		case a.Destination != b.Destination:
			return a.Destination < b.Destination
		case a.RoutingKey != b.RoutingKey:
			return a.RoutingKey < b.RoutingKey
		}
		return canonicalArgs(a.Arguments) < canonicalArgs(b.Arguments)
	})
}

// Bind adds a binding as queue.bind or exchange.bind does. AMQP failures are
// returned as *amqp.Error.
func (s *Server) Bind(b BindingInfo) error {
	vh, err := s.lookupVhost(b.Vhost)
	if err != nil {
		return err
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return vh.bindAdmin(b)
}

func (vh *Vhost) bindAdmin(b BindingInfo) error {
	var aerr *amqp.Error
	switch b.DestinationType {
	case DestQueue:
		aerr = vh.bindQueue(nil, &amqp.QueueBind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: b.Arguments})
	case DestExchange:
		aerr = vh.bindExchange(b.Destination, b.Source, b.RoutingKey, b.Arguments, false)
	default:
		return fmt.Errorf("%w: destination type %q", ErrInvalid, b.DestinationType)
	}
	if aerr != nil {
		return aerr
	}
	return nil
}

// Unbind removes a binding; one that does not exist is ErrNotFound.
func (s *Server) Unbind(b BindingInfo) error {
	vh, err := s.lookupVhost(b.Vhost)
	if err != nil {
		return err
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	src := vh.exchange(b.Source)
	if src == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, describeExchange(b.Source, b.Vhost))
	}
	want := canonicalArgs(b.Arguments)
	found := false
	for _, have := range src.SourceBindings() {
		if have.Destination == b.Destination && have.DestinationType == b.DestinationType &&
			have.RoutingKey == b.RoutingKey && canonicalArgs(have.Arguments) == want {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("%w: binding from %s", ErrNotFound, describeExchange(b.Source, b.Vhost))
	}
	var aerr *amqp.Error
	if b.DestinationType == DestQueue {
		aerr = vh.unbindQueue(nil, &amqp.QueueUnbind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: b.Arguments})
	} else {
		aerr = vh.bindExchange(b.Destination, b.Source, b.RoutingKey, b.Arguments, true)
	}
	if aerr != nil {
		return aerr
	}
	return nil
}
