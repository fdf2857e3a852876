package server

import (
	"fmt"
	"maps"

	"github.com/warrenmq/warren/amqp"
)

// A vhost's default queue type (its default_queue_type metadata, RabbitMQ
// 3.11+) is the type of the queues declared in it without x-queue-type.

// defaultQueueTypes are the values default_queue_type may take; "" is none.
var defaultQueueTypes = []string{"", "classic", "quorum", "stream"}

// checkDefaultQueueType refuses a default queue type Warren has no queues of.
func checkDefaultQueueType(t string) error {
	for _, ok := range defaultQueueTypes {
		if t == ok {
			return nil
		}
	}
	return fmt.Errorf("%w: default queue type '%s' is not one of classic, quorum, stream", ErrInvalid, t)
}

// withDefaultQueueType returns the declare m with the vhost's default queue
// type as x-queue-type, as rabbit_amqqueue:augment_declare_args does (3.11):
// only when m has no x-queue-type and the type fits the declare (quorum
// queues and streams are durable, neither exclusive nor auto-delete; other
// declares stay classic). The redeclare of an existing queue is augmented
// the same way before the equivalence check, so in a vhost whose default is
// quorum, redeclaring a classic queue made before the default was set fails
// with 406 "inequivalent arg 'x-queue-type'", as in RabbitMQ. m itself is
// not changed (its arguments may be the client's).
func (vh *Vhost) withDefaultQueueType(m *amqp.QueueDeclare) *amqp.QueueDeclare {
	vh.adm.mu.RLock()
	dqt := vh.adm.meta.DefaultQueueType
	vh.adm.mu.RUnlock()
	if dqt == "" {
		return m
	}
	if _, has := m.Arguments["x-queue-type"]; has {
		return m
	}
	if dqt != "classic" && (!m.Durable || m.Exclusive || m.AutoDelete) {
		return m
	}
	c := *m
	c.Arguments = maps.Clone(m.Arguments)
	if c.Arguments == nil {
		c.Arguments = make(amqp.Table, 1)
	}
	c.Arguments["x-queue-type"] = dqt
	return &c
}
