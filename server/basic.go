package server

import (
	"github.com/warrenmq/warren/amqp"
)

// startPublish validates basic.publish; the message completes with its content.
func (ch *channel) startPublish() *amqp.Error {
	if ch.pub.Immediate {
		return amqp.NewError(amqp.NotImplemented, methodBasicPublish, "immediate=true")
	}
	ch.pubActive, ch.pubHeader = true, false
	ch.conn.publisher = true
	return nil
}

func (ch *channel) handleHeader(p []byte) *amqp.Error {
	if !ch.pubActive || ch.pubHeader {
		return amqp.NewError(amqp.UnexpectedFrame, 0, "content header frame on channel %d without a preceding basic.publish", ch.id)
	}
	h, err := amqp.ParseContentHeader(p)
	if err != nil {
		return amqp.NewError(amqp.FrameError, methodBasicPublish, "%v", err)
	}
	if h.ClassID != amqp.ClassBasic {
		return amqp.NewError(amqp.FrameError, methodBasicPublish, "content header for class %d, expected 60", h.ClassID)
	}
	if max := ch.conn.srv.cfg.MaxMessageSize; h.BodySize > max {
		ch.pubActive = false
		return amqp.NewError(amqp.PreconditionFailed, methodBasicPublish, "message size %d is larger than configured max size %d", h.BodySize, max)
	}
	// RabbitMQ checks the target only once the whole body is in; checking it
	// here means a user who may not publish never makes the broker hold a
	// body. Its order is kept: size, write permission, exchange, topic
	// permission, and the properties (reply-to, user-id, expiration) once
	// the body is in.
	ex, aerr := ch.publishTarget()
	if aerr != nil {
		ch.pubActive = false
		return aerr
	}
	ch.pubHeader, ch.pubSize, ch.pubEx = true, h.BodySize, ex
	props, body := ch.contentBuffer(h.Props, h.BodySize)
	ch.pubMsg = &Message{Exchange: ch.pub.Exchange, RoutingKey: ch.pub.RoutingKey, RawProps: props, Body: body}
	if h.BodySize == 0 {
		return ch.completePublish()
	}
	return nil
}

// publishTarget checks the write permission on basic.publish's exchange, the
// exchange itself and the topic permission on the routing key, and returns
// the exchange, with RabbitMQ's errors.
func (ch *channel) publishTarget() (*Exchange, *amqp.Error) {
	name := ch.pub.Exchange
	if err := ch.authorizePublish(name); err != nil {
		return nil, err
	}
	ex := ch.conn.vhost.exchange(name)
	if ex == nil {
		return nil, amqp.NewError(amqp.NotFound, methodBasicPublish, "no %s", describeExchange(name, ch.conn.vhost.name))
	}
	if ex.internal {
		return nil, amqp.NewError(amqp.AccessRefused, methodBasicPublish, "cannot publish to internal %s", describeExchange(name, ch.conn.vhost.name))
	}
	if err := ch.authorizeTopicPublish(ex, ch.pub.RoutingKey); err != nil {
		return nil, err
	}
	return ex, nil
}

func (ch *channel) handleBody(p []byte) *amqp.Error {
	if !ch.pubHeader {
		return amqp.NewError(amqp.UnexpectedFrame, 0, "content body frame on channel %d without a preceding content header", ch.id)
	}
	m := ch.pubMsg
	if uint64(len(m.Body))+uint64(len(p)) > ch.pubSize {
		return amqp.NewError(amqp.FrameError, methodBasicPublish, "content body larger than the %d bytes the header announced", ch.pubSize)
	}
	ch.appendBody(p)
	if uint64(len(m.Body)) == ch.pubSize {
		return ch.completePublish()
	}
	return nil
}

// completePublish routes a fully received message to the exchange checked
// at its header (a transaction routes at commit the same way).
func (ch *channel) completePublish() *amqp.Error {
	m, ex := ch.pubMsg, ch.pubEx
	ch.endContent()
	if err := ch.prepareMessage(m); err != nil {
		return err
	}
	mandatory := ch.pub.Mandatory
	if ch.tx != nil {
		ch.tx.publishes = append(ch.tx.publishes, txPublish{ex: ex, msg: m, mandatory: mandatory})
		return nil
	}
	return ch.route(ex, m, mandatory)
}

// route delivers m to the queues ex routes it to (and to a direct reply-to
// consumer), returns it when mandatory and unroutable, and confirms it in
// confirm mode: nack when a queue refused it at its length limit. An error
// is one the connection closes with (an x-delay RabbitMQ crashes on).
func (ch *channel) route(ex *Exchange, m *Message, mandatory bool) *amqp.Error {
	ch.stats.publish.inc()
	var seq uint64
	if ch.confirm {
		ch.stats.publishConfirm.inc()
		ch.publishSeq++
		seq = ch.publishSeq
	}
	p := publishing{r: ch.router, ex: ex, m: m, ttl: m.ttl, srv: ch.conn.srv, batch: ch}
	res := ch.conn.vhost.publish(&p)
	clear(ch.router.queues)
	if res.fault != nil {
		return res.fault
	}
	if res.duplicate { // confirmed but not enqueued
		if ch.confirm {
			ch.settleConfirm(seq, true)
		}
		return nil
	}
	if res.routed {
		ex.stats.publishOut.inc()
	} else if mandatory {
		ch.sendReturn(m, amqp.NoRoute, "NO_ROUTE")
	}
	ch.stats.unroutable(res.routed, mandatory)
	if !res.deferred { // a held publish is confirmed when the batch flushes
		ch.confirmRouted(seq, &res)
	}
	return nil
}

// confirmRouted settles publish seq (in confirm mode) by what its queues did:
// nack when one refused it or a write failed; when stored copies or
// accepted copies (a stream's append) are still to become durable, one
// completion that each of them completes (the vhost's commit round, each
// pending destination), acked when all are done; else ack.
func (ch *channel) confirmRouted(seq uint64, res *routeResult) {
	if !ch.confirm {
		return
	}
	n := res.pending.count()
	if res.stored {
		n++
	}
	switch {
	case res.rejected, res.pending.failed:
		ch.settleConfirm(seq, false)
	case n == 0:
		ch.settleConfirm(seq, true)
	default:
		c := ch.confirms.expect(seq, n)
		res.pending.completeWhenDurable(c)
		if res.stored {
			ch.conn.vhost.storage.await(c)
		}
	}
}

func (ch *channel) sendReturn(m *Message, code uint16, text string) {
	o := ch.conn.out
	ret := amqp.BasicReturn{ReplyCode: code, ReplyText: text, Exchange: m.Exchange, RoutingKey: m.RoutingKey}
	o.mu.Lock()
	if start, ok := o.beginMethodLocked(ch.id); ok {
		o.buf = ret.AppendTo(o.buf)
		o.endWithContentLocked(start, ch.id, ch.conn.frameMax, m.RawProps, m.Body)
	}
	o.mu.Unlock()
	o.signal()
}

// settleConfirm records the outcome of publish seq, known at once; the
// confirm goes out at the end of the read batch, coalesced.
func (ch *channel) settleConfirm(seq uint64, ack bool) {
	ch.confirms.settled(seq, ack)
	if !ch.dirty {
		ch.dirty = true
		ch.conn.dirty = append(ch.conn.dirty, ch)
	}
}

// flushConfirms sends the confirms that are ready, in order.
func (ch *channel) flushConfirms() {
	ch.dirty = false
	if ch.confirm {
		ch.confirms.flush()
	}
}

func (ch *channel) confirmSelect(m *amqp.ConfirmSelect) *amqp.Error {
	if ch.tx != nil {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(), "cannot switch from tx to confirm mode")
	}
	ch.confirm = true
	ch.stats.enterConfirm()
	ch.reply(m.Nowait, &amqp.ConfirmSelectOk{})
	return nil
}

func (ch *channel) basicQos(m *amqp.BasicQos) *amqp.Error {
	if m.PrefetchSize != 0 {
		return amqp.NewError(amqp.NotImplemented, m.ID(), "prefetch_size!=0 (%d)", m.PrefetchSize)
	}
	if m.Global {
		ch.globalPrefetch.Store(uint32(m.PrefetchCount))
		ch.kickQueues()
	} else {
		ch.consumerPrefetch = m.PrefetchCount
		ch.stats.prefetch.Store(uint32(m.PrefetchCount))
	}
	ch.conn.out.sendMethod(ch.id, &amqp.BasicQosOk{})
	return nil
}

// kickQueues lets every queue this channel consumes from deliver again.
func (ch *channel) kickQueues() {
	ch.cmu.Lock()
	qs := make([]queueHandle, 0, len(ch.consumers))
	for _, c := range ch.consumers {
		qs = append(qs, c.q)
	}
	ch.cmu.Unlock()
	for _, q := range qs {
		q.redispatch()
	}
}

func (ch *channel) basicConsume(m *amqp.BasicConsume) *amqp.Error {
	if m.Queue == replyToQueue {
		return ch.consumeReplyTo(m)
	}
	q, err := ch.readableQueue(m.Queue, m.ID())
	if err != nil {
		return err
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = generateName("amq.ctag-")
	}
	ch.cmu.Lock()
	_, dup := ch.consumers[tag]
	ch.cmu.Unlock()
	if dup {
		return amqp.NewError(amqp.NotAllowed, m.ID(), "attempt to reuse consumer tag '%s'", tag)
	}
	prio, perr := consumerPriority(m)
	if perr != nil {
		return perr
	}
	if q.quorum {
		if err := checkQuorumConsume(q, m.Arguments, ch.globalPrefetch.Load() != 0); err != nil {
			return err
		}
	}
	c := &consumer{tag: tag, sink: ch, q: q.h, noAck: m.NoAck, exclusive: m.Exclusive, prefetch: ch.consumerPrefetch, args: m.Arguments, priority: prio}
	ch.cmu.Lock()
	ch.consumers[tag] = c
	ch.cmu.Unlock()
	// consume-ok must reach the client before the first delivery, so the queue
	// sends it before it delivers to c.
	if err := c.q.consume(c, func() { ch.reply(m.Nowait, &amqp.BasicConsumeOk{ConsumerTag: tag}) }); err != nil {
		ch.cmu.Lock()
		delete(ch.consumers, tag)
		ch.cmu.Unlock()
		return err
	}
	return nil
}

func (ch *channel) basicCancel(m *amqp.BasicCancel) *amqp.Error {
	if ch.replyTo != nil && ch.replyTo.tag == m.ConsumerTag {
		ch.conn.srv.unregisterReply(ch)
		ch.reply(m.Nowait, &amqp.BasicCancelOk{ConsumerTag: m.ConsumerTag})
		return nil
	}
	ch.cmu.Lock()
	c := ch.consumers[m.ConsumerTag]
	delete(ch.consumers, m.ConsumerTag)
	ch.cmu.Unlock()
	if c != nil {
		if c.q.cancel(c) {
			q := c.q.queue()
			q.vhost.removeQueue(q, "auto-delete")
		}
		c.q.touch()
	}
	// The spec requires cancel-ok even for an unknown tag.
	ch.reply(m.Nowait, &amqp.BasicCancelOk{ConsumerTag: m.ConsumerTag})
	return nil
}

// How settle finishes deliveries.
type settleKind int

const (
	settleAck settleKind = iota
	settleRequeue
	settleDrop
)

// settle implements ack, nack and reject.
func (ch *channel) settle(method uint32, tag uint64, multiple bool, kind settleKind) *amqp.Error {
	ch.umu.Lock()
	ds, ok := ch.unacked.take(ch.scratch[:0], tag, multiple)
	ch.umu.Unlock()
	if !ok {
		return amqp.NewError(amqp.PreconditionFailed, method, "unknown delivery tag %d", tag)
	}
	ch.stats.settled(kind, len(ds))
	ch.scratch = ds
	if err := checkSettle(ds, kind, method); err != nil {
		ch.applySettle(ds, kind) // returns the credit; the channel is closing
		return err
	}
	if ch.tx != nil {
		ch.tx.settles = append(ch.tx.settles, txSettle{kind: kind, ds: append([]delivery(nil), ds...)})
		return nil
	}
	ch.applySettle(ds, kind)
	clear(ch.scratch)
	return nil
}

// applySettle hands settled deliveries back to their queues, one call per run
// of deliveries from the same queue.
func (ch *channel) applySettle(ds []delivery, kind settleKind) {
	for i := 0; i < len(ds); {
		j := i + 1
		for j < len(ds) && ds[j].q == ds[i].q {
			j++
		}
		run := ds[i:j]
		ch.releaseGlobal(run)
		run[0].q.settle(run, kind)
		i = j
	}
	if ch.globalPrefetch.Load() != 0 {
		ch.kickQueues()
	}
}

// checkSettle refuses a settlement one of ds's queues does not support.
func checkSettle(ds []delivery, kind settleKind, method uint32) *amqp.Error {
	for i := range ds {
		if i > 0 && ds[i].q == ds[i-1].q {
			continue
		}
		if err := ds[i].q.checkSettle(kind, method); err != nil {
			return err
		}
	}
	return nil
}

func (ch *channel) releaseGlobal(ds []delivery) {
	n := 0
	for i := range ds {
		if ds[i].c != nil {
			n++
		}
	}
	ch.globalUnacked.Add(int32(-n))
}

func (ch *channel) requeueDeliveries(ds []delivery) {
	if len(ds) > 0 {
		ch.applySettle(ds, settleRequeue)
	}
}

func (ch *channel) recover(method uint32, requeue, sync bool) *amqp.Error {
	if !requeue {
		return amqp.NewError(amqp.NotImplemented, method, "requeue=false")
	}
	ch.umu.Lock()
	ds := ch.unacked.takeAll(nil)
	ch.umu.Unlock()
	ch.requeueDeliveries(ds)
	if sync {
		ch.conn.out.sendMethod(ch.id, &amqp.BasicRecoverOk{})
	}
	return nil
}
