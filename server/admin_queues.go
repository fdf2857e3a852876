package server

import (
	"fmt"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API (see admin.go): queue snapshots, declare, delete,
// purge and get.

// depth returns the queue's ready and unacknowledged message counts.
func (q *Queue) depth() (ready, unacked int) {
	info := q.h.info()
	return info.Ready, info.Unacked
}

// LookupQueue returns the named queue or nil.
func (vh *Vhost) LookupQueue(name string) *Queue { return vh.queue(name) }

// QueueStatus is a queue snapshot with everything the management API lists.
type QueueStatus struct {
	QueueInfo
	Type                    string // "classic", or the declared x-queue-type
	Policy, OperatorPolicy  string
	EffectivePolicy         map[string]any
	ExclusiveConsumerTag    string
	SingleActiveConsumerTag string
	// Owner is the name of the connection owning an exclusive queue.
	Owner string
	// IdleSince is when the queue was last used while it has no consumers;
	// zero while it has consumers.
	IdleSince time.Time
	// ConsumerCapacity is RabbitMQ 3.10's consumer capacity (and
	// consumer_utilisation): 0 without consumers, else the share of time the
	// consumers could take the queue's messages, a moving average with a
	// one-second half-life (consumer_use.go).
	ConsumerCapacity float64
}

// Status returns a snapshot of the queue for the management API.
func (q *Queue) Status() QueueStatus {
	st := q.h.status()
	st.Type = q.h.typeName()
	// A declared type Warren serves with another kind's code (quorum)
	// is shown as declared.
	if t, ok := q.args["x-queue-type"].(string); ok && t != "" {
		st.Type = t
	}
	if q.owner != nil {
		st.Owner = q.owner.name
	}
	st.Policy, st.OperatorPolicy, st.EffectivePolicy = q.vhost.policyNames(queueTarget(q.declaredArgs()), q.name)
	return st
}

// localStatus is the queue-side half of Status for a queue whose consumers
// are the Queue's: its snapshot and its consumers' state.
func (q *Queue) localStatus() QueueStatus {
	st := QueueStatus{QueueInfo: q.localInfo()}
	q.mu.Lock()
	if q.exclusiveConsumer != nil {
		st.ExclusiveConsumerTag = q.exclusiveConsumer.tag
	}
	if q.qa.singleActive && len(q.consumers) > 0 {
		st.SingleActiveConsumerTag = q.consumers[0].tag
	}
	if len(q.consumers) == 0 {
		st.IdleSince = q.lastUsed
	}
	st.ConsumerCapacity = q.consumerCapacityLocked()
	q.mu.Unlock()
	return st
}

// consumerCapacityLocked is RabbitMQ's consumer capacity: 0 without
// consumers, else the time average of consumer_use.go.
func (q *Queue) consumerCapacityLocked() float64 {
	if len(q.consumers) == 0 {
		return 0
	}
	return q.use.capacity(time.Now())
}

// QueueSpec is a queue to declare through the management API.
type QueueSpec struct {
	Name       string
	Durable    bool
	AutoDelete bool
	Arguments  amqp.Table
}

// DeclareQueue declares a queue as queue.declare does (the same validation
// and equivalence checks) and reports whether it was created. AMQP failures
// are returned as *amqp.Error.
func (s *Server) DeclareQueue(vhost string, q QueueSpec) (created bool, err error) {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return false, err
	}
	if q.Name == "" {
		return false, fmt.Errorf("%w: queue name is empty", ErrInvalid)
	}
	vh.streams.bind(s) // a stream declared here is opened with this server
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return vh.declareQueueAdmin(q)
}

func (vh *Vhost) declareQueueAdmin(q QueueSpec) (bool, error) {
	created := vh.queue(q.Name) == nil
	_, aerr := vh.declareQueue(nil, &amqp.QueueDeclare{
		Queue: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: q.Arguments,
	})
	if aerr != nil {
		return false, aerr
	}
	return created, nil
}

// adminQueue finds a queue for an administrative call through the same
// lookup AMQP methods use (Vhost.lookupQueue, with its 405 for another
// connection's exclusive queue), mapping a missing vhost or queue to
// ErrNoSuchVhost or ErrNotFound, which the management API answers with
// RabbitMQ's 404 body.
func (s *Server) adminQueue(vhost, name string, method uint32) (*Vhost, *Queue, error) {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return nil, nil, err
	}
	q, aerr := vh.lookupQueue(nil, name, method)
	switch {
	case aerr == nil:
		return vh, q, nil
	case aerr.Code == amqp.NotFound:
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, describeQueue(name, vhost))
	}
	return nil, nil, aerr
}

// DeleteQueue deletes a queue as queue.delete does, with if-unused and
// if-empty; a missing queue is ErrNotFound.
func (s *Server) DeleteQueue(vhost, name string, ifUnused, ifEmpty bool) error {
	vh, _, err := s.adminQueue(vhost, name, methodQueueDelete)
	if err != nil {
		return err
	}
	if _, aerr := vh.deleteQueue(nil, name, ifUnused, ifEmpty); aerr != nil {
		return aerr
	}
	return nil
}

// PurgeQueue drops a queue's ready messages and returns how many there were.
func (s *Server) PurgeQueue(vhost, name string) (int, error) {
	_, q, err := s.adminQueue(vhost, name, methodQueuePurge)
	if err != nil {
		return 0, err
	}
	n, aerr := q.h.purge(methodQueuePurge)
	if aerr != nil {
		return 0, aerr
	}
	return n, nil
}

// GetMode says what happens to messages fetched with GetMessages.
type GetMode int

// Get modes, as the management API's ackmode values.
const (
	GetAckRequeue    GetMode = iota // ack_requeue_true: returned to the queue, marked redelivered
	GetAck                          // ack_requeue_false: acknowledged, gone
	GetRejectRequeue                // reject_requeue_true: rejected with requeue
	GetReject                       // reject_requeue_false: rejected, dead-lettered if configured
)

// GotMessage is a message fetched with GetMessages.
type GotMessage struct {
	Exchange, RoutingKey string
	Redelivered          bool
	// MessageCount is the number of ready messages left after this one.
	MessageCount int
	Properties   amqp.Properties
	Body         []byte
}

// maxGetCount bounds one GetMessages call.
const maxGetCount = 10000

// GetMessages fetches up to count messages from a queue, as basic.get would,
// and then settles them all according to mode.
func (s *Server) GetMessages(vhost, name string, count int, mode GetMode) ([]GotMessage, error) {
	_, q, err := s.adminQueue(vhost, name, methodBasicGet)
	if err != nil {
		return nil, err
	}
	count = min(max(count, 0), maxGetCount)
	now := nowMillis()
	var ds []delivery
	var out []GotMessage
	var raw [][]byte
	var stats MessageCounters
	h := q.h
	_, aerr := h.get(count, false, func(g outgoing, remaining int) {
		if g.redelivered {
			stats.Redeliver++
		}
		ds = append(ds, delivery{q: h, id: g.id, at: now})
		raw = append(raw, g.props)
		out = append(out, GotMessage{
			Exchange: g.msg.Exchange, RoutingKey: g.msg.RoutingKey, Redelivered: g.redelivered,
			MessageCount: remaining, Body: g.msg.Body,
		})
	})
	if aerr != nil {
		return nil, aerr
	}
	if len(ds) > 0 {
		switch mode {
		case GetAckRequeue, GetRejectRequeue:
			h.settle(ds, settleRequeue)
		case GetAck:
			h.settle(ds, settleAck)
			stats.Ack = uint64(len(ds))
		default:
			h.settle(ds, settleDrop)
		}
	}
	stats.Get = uint64(len(ds))
	if len(ds) < count {
		stats.GetEmpty = 1
	}
	s.admin.account(vhost, stats)
	for i := range out {
		if err := out[i].Properties.Decode(raw[i]); err != nil {
			return nil, fmt.Errorf("server: properties of a message in %s: %w", describeQueue(name, vhost), err)
		}
	}
	return out, nil
}
