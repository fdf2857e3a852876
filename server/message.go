package server

import (
	"sync/atomic"

	"github.com/warrenmq/warren/amqp"
)

// Message is one published message. It is immutable once routed: several queues
// and deliveries share it, and its body is never copied inside the broker.
type Message struct {
	Exchange   string
	RoutingKey string
	// RawProps are the property flags and list exactly as the publisher sent them;
	// deliveries forward them unchanged.
	RawProps []byte
	Body     []byte

	// ccKeys are the CC and BCC header routing keys (sender-selected
	// distribution), routed in addition to RoutingKey.
	ccKeys []string
	// ttl is the per-message expiration in milliseconds, or -1.
	ttl int64

	// props is RawProps decoded, or nil. Only the goroutine that owns the
	// message before it is routed sets it (Properties); messages whose
	// properties no feature reads are never decoded, which keeps the plain
	// publish path free of the decode and Message small.
	props *amqp.Properties
}

// Properties decodes RawProps once and keeps the result. Call it only before
// the message is routed to queues (the result is then read-only); afterwards
// use sharedProperties.
func (m *Message) Properties() (*amqp.Properties, error) {
	if m.props == nil {
		p := new(amqp.Properties)
		if err := p.Decode(m.RawProps); err != nil {
			return nil, err
		}
		m.props = p
	}
	return m.props, nil
}

// sharedProperties returns a copy of the decoded properties of a message that
// queues may share: the cached decode when the publisher made one, else a
// fresh decode that is not kept (no goroutine may write a shared message).
// The copy's Headers table is the shared one: replace it, never modify it.
func (m *Message) sharedProperties() (amqp.Properties, error) {
	if m.props != nil {
		return *m.props, nil
	}
	var p amqp.Properties
	err := p.Decode(m.RawProps)
	return p, err
}

// Persistent reports whether the publisher set delivery-mode 2.
func (m *Message) Persistent() bool { return amqp.PeekDeliveryMode(m.RawProps) == 2 }

// size is the accounting size of a message: its body.
func (m *Message) size() int { return len(m.Body) }

// counter is a monotonically increasing statistic kept in the object it counts.
type counter struct{ atomic.Uint64 }

func (c *counter) inc()          { c.Add(1) }
func (c *counter) add(n int)     { c.Add(uint64(n)) }
func (c *counter) value() uint64 { return c.Load() }
