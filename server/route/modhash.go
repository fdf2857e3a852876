package route

import (
	"sort"

	"github.com/warrenmq/warren/amqp"
)

// ModulusHash is the rabbitmq_sharding plugin's x-modulus-hash exchange: a
// message goes to binding number phash2([RoutingKey | CC ++ BCC]) rem N of the
// N bindings, counted in the order RabbitMQ's route table holds them (sorted
// as Erlang terms: by binding key, then destination), so a destination bound
// twice takes two places. The zero value is not usable; call NewModulusHash.
type ModulusHash[D comparable] struct {
	reg    registry[D, struct{}]
	less   func(a, b Binding[D]) bool
	sorted []Binding[D]
}

// NewModulusHash returns an empty x-modulus-hash matcher whose bindings are
// counted in the order less sorts them.
func NewModulusHash[D comparable](less func(a, b Binding[D]) bool) *ModulusHash[D] {
	m := &ModulusHash[D]{less: less}
	m.reg.init()
	return m
}

// Add adds b and reports whether it was new.
func (m *ModulusHash[D]) Add(b Binding[D]) bool {
	if m.reg.find(b) != nil {
		return false
	}
	m.reg.insert(b, struct{}{})
	i := sort.Search(len(m.sorted), func(i int) bool { return m.less(b, m.sorted[i]) })
	m.sorted = append(m.sorted, Binding[D]{})
	copy(m.sorted[i+1:], m.sorted[i:])
	m.sorted[i] = b
	return true
}

// Remove removes the binding identical to b and reports whether there was one.
func (m *ModulusHash[D]) Remove(b Binding[D]) bool {
	e := m.reg.find(b)
	if e == nil {
		return false
	}
	m.reg.delete(e)
	m.unlist(e.b)
	return true
}

func (m *ModulusHash[D]) unlist(b Binding[D]) {
	for i := range m.sorted {
		if o := m.sorted[i]; o.Dest == b.Dest && o.Key == b.Key && argsEqual(o.Args, b.Args) {
			m.sorted = append(m.sorted[:i], m.sorted[i+1:]...)
			return
		}
	}
}

// Pick visits the destination of the binding the routing keys hash to.
func (m *ModulusHash[D]) Pick(d *Delivery, visit func(D)) {
	if len(m.sorted) == 0 {
		return
	}
	var t termHash
	t.binary(d.RoutingKey)
	for _, k := range d.CC {
		t.binary(k)
	}
	t.nil()
	visit(m.sorted[t.sum()%uint32(len(m.sorted))].Dest)
}

// Reads reports that Pick needs only the routing keys.
func (m *ModulusHash[D]) Reads() Reads { return 0 }

// Match picks for a message with just routingKey.
func (m *ModulusHash[D]) Match(routingKey string, _ amqp.Table, visit func(D)) {
	m.Pick(&Delivery{RoutingKey: routingKey}, visit)
}

// Len returns the number of bindings.
func (m *ModulusHash[D]) Len() int { return m.reg.n }

// Bindings returns all bindings in the order they were added.
func (m *ModulusHash[D]) Bindings() []Binding[D] { return m.reg.bindings() }

// HasDest reports whether any binding points at d.
func (m *ModulusHash[D]) HasDest(d D) bool { return m.reg.hasDest(d) }

// RemoveDest removes every binding to d and returns how many it removed.
func (m *ModulusHash[D]) RemoveDest(d D) int {
	return m.reg.removeDest(d, func(e *entry[D, struct{}]) { m.unlist(e.b) })
}

// sortBindings sorts bs stably by less.
func sortBindings[D comparable](bs []Binding[D], less func(a, b Binding[D]) bool) {
	sort.SliceStable(bs, func(i, j int) bool { return less(bs[i], bs[j]) })
}
