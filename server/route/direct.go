package route

import "github.com/warrenmq/warren/amqp"

// Direct routes a message to the destinations bound with exactly its routing
// key. It is a map from key to the set of destinations bound with that key.
// The zero value is not usable; call NewDirect.
type Direct[D comparable] struct {
	reg  registry[D, struct{}]
	keys map[string]*destSet[D]
}

// NewDirect returns an empty direct-exchange matcher.
func NewDirect[D comparable]() *Direct[D] {
	m := &Direct[D]{keys: make(map[string]*destSet[D])}
	m.reg.init()
	return m
}

// Add adds b and reports whether it was new.
func (m *Direct[D]) Add(b Binding[D]) bool {
	if m.reg.find(b) != nil {
		return false
	}
	e := m.reg.insert(b, struct{}{})
	set := m.keys[b.Key]
	if set == nil {
		set = &destSet[D]{}
		m.keys[b.Key] = set
	}
	set.add(b.Dest, e.ds.id)
	return true
}

// Remove removes the binding identical to b and reports whether there was one.
func (m *Direct[D]) Remove(b Binding[D]) bool {
	e := m.reg.find(b)
	if e == nil {
		return false
	}
	m.unroute(e)
	m.reg.delete(e)
	return true
}

func (m *Direct[D]) unroute(e *entry[D, struct{}]) {
	set := m.keys[e.b.Key]
	set.remove(e.b.Dest)
	if set.empty() {
		delete(m.keys, e.b.Key)
	}
}

// Match calls visit for each destination bound with routingKey. Headers are
// ignored.
func (m *Direct[D]) Match(routingKey string, _ amqp.Table, visit func(D)) {
	set := m.keys[routingKey]
	if set == nil {
		return
	}
	for i := range set.items {
		visit(set.items[i].dest)
	}
}

// Len returns the number of bindings.
func (m *Direct[D]) Len() int { return m.reg.n }

// Bindings returns all bindings in the order they were added.
func (m *Direct[D]) Bindings() []Binding[D] { return m.reg.bindings() }

// HasDest reports whether any binding points at d.
func (m *Direct[D]) HasDest(d D) bool { return m.reg.hasDest(d) }

// RemoveDest removes every binding to d and returns how many it removed.
func (m *Direct[D]) RemoveDest(d D) int { return m.reg.removeDest(d, m.unroute) }
