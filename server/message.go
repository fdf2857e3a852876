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

	// props is RawProps decoded, filled on first use by the publishing goroutine
	// before the message is shared. Embedded to save an allocation per message.
	props        amqp.Properties
	propsDecoded bool
}

// Properties decodes RawProps once. Call it only before the message is routed
// to queues (the result is then read-only).
func (m *Message) Properties() (*amqp.Properties, error) {
	if !m.propsDecoded {
		if err := m.props.Decode(m.RawProps); err != nil {
			return nil, err
		}
		m.propsDecoded = true
	}
	return &m.props, nil
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
