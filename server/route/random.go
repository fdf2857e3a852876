package route

import (
	"math/rand/v2"

	"github.com/warrenmq/warren/amqp"
)

// Random is the x-random exchange (rabbitmq_random_exchange) and, on a single
// node, x-local-random (RabbitMQ 4.0): each message goes to one binding's
// destination, chosen uniformly among all bindings, so a destination bound
// twice is twice as likely, as in RabbitMQ. The routing key and headers are
// ignored. The zero value is not usable; call NewRandom.
type Random[D comparable] struct {
	// reg's per-entry data is the entry's index in all.
	reg registry[D, int]
	all []*entry[D, int]
}

// NewRandom returns an empty x-random matcher.
func NewRandom[D comparable]() *Random[D] {
	m := &Random[D]{}
	m.reg.init()
	return m
}

// Add adds b and reports whether it was new.
func (m *Random[D]) Add(b Binding[D]) bool {
	if m.reg.find(b) != nil {
		return false
	}
	e := m.reg.insert(b, len(m.all))
	m.all = append(m.all, e)
	return true
}

// Remove removes the binding identical to b and reports whether there was one.
func (m *Random[D]) Remove(b Binding[D]) bool {
	e := m.reg.find(b)
	if e == nil {
		return false
	}
	m.unlist(e)
	m.reg.delete(e)
	return true
}

func (m *Random[D]) unlist(e *entry[D, int]) {
	last := len(m.all) - 1
	if i := e.x; i != last {
		m.all[i] = m.all[last]
		m.all[i].x = i
	}
	m.all[last] = nil
	m.all = m.all[:last]
}

// Pick visits one binding's destination chosen at random.
func (m *Random[D]) Pick(_ *Delivery, visit func(D)) {
	switch n := len(m.all); n {
	case 0:
	case 1:
		visit(m.all[0].b.Dest)
	default:
		visit(m.all[rand.IntN(n)].b.Dest)
	}
}

// Reads reports that Pick needs nothing but the message's existence.
func (m *Random[D]) Reads() Reads { return 0 }

// Match picks as Pick does.
func (m *Random[D]) Match(_ string, _ amqp.Table, visit func(D)) { m.Pick(nil, visit) }

// Len returns the number of bindings.
func (m *Random[D]) Len() int { return m.reg.n }

// Bindings returns all bindings in the order they were added.
func (m *Random[D]) Bindings() []Binding[D] { return m.reg.bindings() }

// HasDest reports whether any binding points at d.
func (m *Random[D]) HasDest(d D) bool { return m.reg.hasDest(d) }

// RemoveDest removes every binding to d and returns how many it removed.
func (m *Random[D]) RemoveDest(d D) int { return m.reg.removeDest(d, m.unlist) }
