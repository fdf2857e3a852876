package server

import "github.com/warrenmq/warren/amqp"

// A channel is the consumerSink of its consumers: queues reserve credit
// from it, deliver to it and tell it when they cancel a consumer.

// reserve takes room for one delivery to c: the connection's write buffer
// has room (else wake is woken once it drained) and, unless c is no-ack, the
// channel-wide prefetch has credit.
func (ch *channel) reserve(c *consumer, wake queueHandle) bool {
	if !ch.conn.out.reserve(wake) {
		return false
	}
	return c.noAck || ch.acquireGlobalCredit()
}

// refund returns credit reserve took for a delivery that did not happen.
func (ch *channel) refund(c *consumer) {
	if !c.noAck {
		ch.globalUnacked.Add(-1)
	}
}

// charge counts a delivery against the channel-wide prefetch without a
// limit check; releaseGlobal gives it back on settle.
func (ch *channel) charge(*consumer) { ch.globalUnacked.Add(1) }

// acquireGlobalCredit takes one unit of the channel-wide prefetch, if set.
func (ch *channel) acquireGlobalCredit() bool {
	limit := int32(ch.globalPrefetch.Load())
	for {
		cur := ch.globalUnacked.Load()
		if limit != 0 && cur >= limit {
			return false
		}
		if ch.globalUnacked.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

// deliver writes a delivery to the consumer's connection. A classic queue
// calls it with Queue.mu held; the tag is assigned and the frames appended
// under umu so tags reach the wire in order.
func (ch *channel) deliver(c *consumer, m outgoing) {
	o := ch.conn.out
	ch.stats.delivered(c.noAck, m.redelivered)
	ch.umu.Lock()
	ch.nextTag++
	tag := ch.nextTag
	if !c.noAck {
		ch.unacked.push(delivery{tag: tag, q: c.q, c: c, id: m.id, at: ch.conn.srv.clock()})
	}
	d := amqp.BasicDeliver{ConsumerTag: c.tag, DeliveryTag: tag, Redelivered: m.redelivered, Exchange: m.msg.Exchange, RoutingKey: m.msg.RoutingKey}
	o.mu.Lock()
	if start, ok := o.beginMethodLocked(ch.id); ok {
		o.buf = d.AppendTo(o.buf)
		o.endWithContentLocked(start, ch.id, ch.conn.frameMax, m.props, m.msg.Body)
	}
	o.mu.Unlock()
	ch.umu.Unlock()
	o.signal()
}

// cancelled tells the client that the server cancelled c (its queue was
// deleted). Safe from any goroutine.
func (ch *channel) cancelled(c *consumer) {
	ch.cmu.Lock()
	_, ok := ch.consumers[c.tag]
	if ok && ch.consumers[c.tag] == c {
		delete(ch.consumers, c.tag)
	}
	ch.cmu.Unlock()
	if ok && ch.conn.supportsCap("consumer_cancel_notify") {
		ch.conn.out.sendMethod(ch.id, &amqp.BasicCancel{ConsumerTag: c.tag, Nowait: true})
	}
}

// subscribed reports whether c is still one of the channel's consumers.
func (ch *channel) subscribed(c *consumer) bool {
	ch.cmu.Lock()
	defer ch.cmu.Unlock()
	return ch.consumers[c.tag] == c
}

// owner describes the channel for the management API's consumer list.
func (ch *channel) owner() consumerOwner {
	c := ch.conn
	return consumerOwner{ConnID: c.id, ConnName: c.name, User: c.user.name, Peer: c.nc.RemoteAddr().String(),
		Channel: ch.id, DefaultTimeout: c.srv.cfg.ConsumerTimeout}
}
