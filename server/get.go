package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
)

// get takes up to max ready messages for basic.get: the one implementation
// behind AMQP's basic.get and the management API's get. each runs for every
// message with q.mu held, so a caller writing it to a connection keeps the
// queue's order on the wire; it must not call into the queue. With noAck a
// message is gone once taken, else it is unacked until the caller settles it.
func (q *Queue) get(max int, noAck bool, each func(m outgoing, remaining int)) int {
	var clk lazyClock
	n := 0
	q.mu.Lock()
	q.lastUsed = time.Now()
	for n < max && !q.deleted {
		qm, ok := q.takeLocked(&clk)
		if !ok {
			break
		}
		q.stats.got.inc()
		if qm.redelivered {
			q.stats.redelivered.inc()
		}
		id := qm.seq // a no-ack get is never settled: any id will do
		if noAck {
			q.forgetLocked(&qm)
		} else {
			q.markDeliveredLocked(&qm)
			id = q.addPendingLocked(qm)
		}
		// remaining is RabbitMQ's message-count: the ready messages left
		// after this one, those paged out to disk included.
		each(q.outgoingLocked(qm, id), q.lengthLocked())
		n++
	}
	dead := q.takeDeadLocked()
	q.mu.Unlock()
	q.publishDeadLetters(dead)
	return n
}

func (ch *channel) basicGet(m *amqp.BasicGet) *amqp.Error {
	q, err := ch.readableQueue(m.Queue, m.ID())
	if err != nil {
		return err
	}
	o := ch.conn.out
	h := q.h
	n, err := h.get(1, m.NoAck, func(g outgoing, remaining int) {
		ch.stats.got(m.NoAck, g.redelivered)
		ch.umu.Lock()
		ch.nextTag++
		tag := ch.nextTag
		if !m.NoAck {
			ch.unacked.push(delivery{tag: tag, q: h, id: g.id, at: ch.conn.srv.clock()})
		}
		getOk := amqp.BasicGetOk{DeliveryTag: tag, Redelivered: g.redelivered, Exchange: g.msg.Exchange,
			RoutingKey: g.msg.RoutingKey, MessageCount: uint32(remaining)}
		o.mu.Lock()
		if start, ok := o.beginMethodLocked(ch.id); ok {
			o.buf = getOk.AppendTo(o.buf)
			o.endWithContentLocked(start, ch.id, ch.conn.frameMax, g.props, g.msg.Body)
		}
		o.mu.Unlock()
		ch.umu.Unlock()
	})
	switch {
	case err != nil:
		return err
	case n == 0:
		ch.stats.getEmpty.inc()
		o.sendMethod(ch.id, &amqp.BasicGetEmpty{})
	default:
		o.signal()
	}
	return nil
}
