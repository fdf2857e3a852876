package federation

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// mover republishes upstream deliveries downstream and settles them at the
// upstream by ack-mode (rabbit_federation_link_util:forward): on-confirm
// acks once the downstream confirms, on-publish once published, no-ack
// never.
type mover struct {
	ackMode   string
	trustUser bool
	upCh      *amqp.Channel
	downCh    *amqp.Channel
	confirms  chan amqp.Confirmation
	pending   map[uint64]uint64 // downstream publish sequence → upstream delivery tag
	nextSeq   uint64
}

func newMover(u upstream) *mover {
	return &mover{ackMode: u.ackMode, trustUser: u.trustUserID, pending: make(map[uint64]uint64), nextSeq: 1}
}

// openDown opens the downstream channel, in confirm mode for on-confirm.
func (mv *mover) openDown(down *amqp.Connection, prefetch int) (chan *amqp.Error, error) {
	var err error
	if mv.downCh, err = down.Channel(); err != nil {
		return nil, err
	}
	closed := mv.downCh.NotifyClose(make(chan *amqp.Error, 1))
	if mv.ackMode == "on-confirm" {
		// Room for every unconfirmed message (at most the prefetch), so
		// amqp091-go never blocks handing a confirm over.
		mv.confirms = mv.downCh.NotifyPublish(make(chan amqp.Confirmation, prefetch+1))
		return closed, mv.downCh.Confirm(false)
	}
	return closed, nil
}

// forward publishes dl to exchange with key and headers.
func (mv *mover) forward(dl amqp.Delivery, exchange, key string, headers amqp.Table) error {
	p := amqp.Publishing{
		Headers: headers, ContentType: dl.ContentType, ContentEncoding: dl.ContentEncoding,
		DeliveryMode: dl.DeliveryMode, Priority: dl.Priority, CorrelationId: dl.CorrelationId,
		ReplyTo: dl.ReplyTo, Expiration: dl.Expiration, MessageId: dl.MessageId, Timestamp: dl.Timestamp,
		Type: dl.Type, AppId: dl.AppId, Body: dl.Body,
	}
	if mv.trustUser {
		p.UserId = dl.UserId
	}
	// Not the link's context: a publish made must be seen through to its
	// confirm (drain), not abandoned half-way by a stop.
	if err := mv.downCh.PublishWithContext(context.Background(), exchange, key, false, false, p); err != nil {
		return err
	}
	switch mv.ackMode {
	case "on-confirm":
		mv.pending[mv.nextSeq] = dl.DeliveryTag
		mv.nextSeq++
		return nil
	case "on-publish":
		return dl.Ack(false)
	}
	return nil
}

// full reports whether the downstream owes as many confirms as the
// confirm channel holds: the link then takes no delivery until some come
// in, so amqp091-go never blocks handing one over (an upstream sending
// past the prefetch would otherwise wedge both connections).
func (mv *mover) full() bool {
	return mv.confirms != nil && len(mv.pending) >= cap(mv.confirms)-1
}

// intake is deliveries, or nil (never ready) while the mover is full.
func (mv *mover) intake(deliveries <-chan amqp.Delivery) <-chan amqp.Delivery {
	if mv.full() {
		return nil
	}
	return deliveries
}

// drop settles a delivery not forwarded (max-hops or a loop).
func (mv *mover) drop(dl amqp.Delivery) error {
	if mv.ackMode == "no-ack" {
		return nil
	}
	return dl.Ack(false)
}

// settle acks the upstream for a confirmed message or returns a nacked
// one to its queue.
func (mv *mover) settle(c amqp.Confirmation) error {
	tag, ok := mv.pending[c.DeliveryTag]
	if !ok {
		return nil
	}
	delete(mv.pending, c.DeliveryTag)
	if c.Ack {
		return mv.upCh.Ack(tag, false)
	}
	return mv.upCh.Nack(tag, false, true)
}

// drainTimeout bounds how long a stopping link waits for the downstream
// to confirm what it already published.
const drainTimeout = 5 * time.Second

// drain waits (a bounded time) for the confirms of what was published, so
// a stopped link acks upstream what reached the downstream; deliveries not
// forwarded go back to the upstream queue when the channel closes.
func (mv *mover) drain(c *conns) error {
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	for len(mv.pending) > 0 {
		select {
		case <-t.C:
			return fmt.Errorf("stopped with %d messages unconfirmed downstream", len(mv.pending))
		case e := <-c.upClosed:
			return sideError("upstream", e)
		case e := <-c.downClosed:
			return sideError("downstream", e)
		case cf := <-mv.confirms:
			if err := mv.settle(cf); err != nil {
				return err
			}
		}
	}
	return nil
}

// receivedFrom is the header a federated message carries, newest hop
// first (rabbit_federation_util ?ROUTING_HEADER).
const receivedFrom = "x-received-from"

// shouldForward is rabbit_federation_util:should_forward/4: a message
// that has made max-hops hops already, or has been through this broker's
// vhost, goes no further.
func shouldForward(h amqp.Table, maxHops int, cluster, vhost string) bool {
	hops, ok := h[receivedFrom].([]any)
	if !ok {
		return true
	}
	return len(hops) < maxHops && !alreadySeen(hops, cluster, vhost)
}

// alreadySeen reports whether a hop of list (x-received-from or
// x-bound-from) names cluster and vhost.
func alreadySeen(list []any, cluster, vhost string) bool {
	for _, e := range list {
		if t, ok := e.(amqp.Table); ok && t["cluster-name"] == cluster && t["vhost"] == vhost {
			return true
		}
	}
	return false
}

// prepend is h with entry put first in its array header name
// (rabbit_basic:prepend_table_header); h is not modified.
func prepend(h amqp.Table, name string, entry amqp.Table) amqp.Table {
	out := make(amqp.Table, len(h)+1)
	for k, v := range h {
		out[k] = v
	}
	prev, _ := h[name].([]any)
	out[name] = append([]any{entry}, prev...)
	return out
}
