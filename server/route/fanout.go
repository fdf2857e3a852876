package route

import "github.com/warrenmq/warren/amqp"

// Fanout routes every message to every bound destination, ignoring the routing
// key and headers. The zero value is not usable; call NewFanout.
type Fanout[D comparable] struct {
	// The registry's destination list is exactly the fanout list: one element
	// per destination with at least one binding.
	reg registry[D, struct{}]
}

// NewFanout returns an empty fanout-exchange matcher.
func NewFanout[D comparable]() *Fanout[D] {
	m := &Fanout[D]{}
	m.reg.init()
	return m
}

// Add adds b and reports whether it was new.
func (m *Fanout[D]) Add(b Binding[D]) bool {
	if m.reg.find(b) != nil {
		return false
	}
	m.reg.insert(b, struct{}{})
	return true
}

// Remove removes the binding identical to b and reports whether there was one.
func (m *Fanout[D]) Remove(b Binding[D]) bool {
	e := m.reg.find(b)
	if e == nil {
		return false
	}
	m.reg.delete(e)
	return true
}

// Match calls visit for every bound destination.
func (m *Fanout[D]) Match(_ string, _ amqp.Table, visit func(D)) {
	for _, ds := range m.reg.destList {
		visit(ds.dest)
	}
}

// Len returns the number of bindings.
func (m *Fanout[D]) Len() int { return m.reg.n }

// Bindings returns all bindings in the order they were added.
func (m *Fanout[D]) Bindings() []Binding[D] { return m.reg.bindings() }

// HasDest reports whether any binding points at d.
func (m *Fanout[D]) HasDest(d D) bool { return m.reg.hasDest(d) }

// RemoveDest removes every binding to d and returns how many it removed.
func (m *Fanout[D]) RemoveDest(d D) int {
	return m.reg.removeDest(d, func(*entry[D, struct{}]) {})
}
