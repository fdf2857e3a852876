package server

import (
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/amqp"
)

// channel is one AMQP channel. All fields without a noted lock are owned by the
// connection's reader goroutine.
type channel struct {
	id   uint16
	conn *conn
	// userSlot says the channel is counted against its user's max-channels
	// (user_limits.go); reader-owned.
	userSlot bool
	// closing is set after the server sent channel.close; frames are then
	// discarded until channel.close-ok.
	closing bool

	// Content assembly of the publish in progress.
	pub       amqp.BasicPublish // reused so decoding allocates nothing
	pubActive bool              // a basic.publish awaits its content
	pubHeader bool              // its header has arrived
	pubMsg    *Message
	pubSize   uint64
	pubEx     *Exchange // checked when the header arrived
	router    *router

	// pubReserved is what contentBuffer reserved for the body ahead of its
	// bytes, counted in conn.bodyReserved until the publish ends.
	pubReserved uint64

	// pubAllowed memoises the last exchange the user may publish to.
	pubAllowed struct {
		ok       bool
		gen      uint64
		exchange string
	}
	pubTopic pubTopicMemo // the last topic permission check on publish (topic_auth.go)

	confirm    bool
	publishSeq uint64         // sequence number of the last publish in confirm mode
	confirms   confirmTracker // confirms not yet sent, in publish order
	dirty      bool           // registered in conn.dirty

	tx *txState

	stats channelStats // management counters and mode mirrors (admin_channels.go)

	// replyTo is the direct reply-to consumer, if any (see replyto.go). Set by
	// the reader; read by publishers through the server's registry lock.
	replyTo *replyConsumer

	// lastQueue is the most recently declared queue, for empty-name shortcuts.
	lastQueue string

	cmu       sync.Mutex // guards consumers (queues cancel consumers from other goroutines)
	consumers map[string]*consumer

	consumerPrefetch uint16        // basic.qos global=false: limit for new consumers
	globalPrefetch   atomic.Uint32 // basic.qos global=true: limit for the channel
	globalUnacked    atomic.Int32  // unacked deliveries of consumers counted against globalPrefetch

	// umu guards the unacked list and nextTag. Lock order: Queue.mu → umu → outbox.mu.
	umu     sync.Mutex
	unacked unackedList
	nextTag uint64

	scratch []delivery // reader-owned buffer for acks
}

// delivery is a message handed to a consumer or basic.get and not yet
// settled: plain values, the queue's handle and the id it named the
// delivery by (queueHandle.settle).
type delivery struct {
	tag uint64
	q   queueHandle
	c   *consumer // nil for basic.get
	id  uint64
	at  int64 // unix ms of the delivery, for the consumer timeout
}

func newChannel(c *conn, id uint16) *channel {
	ch := &channel{id: id, conn: c, router: newRouter(), consumers: make(map[string]*consumer)}
	ch.confirms.init(c.out, id)
	return ch
}

// handleFrame processes one frame addressed to this channel.
func (ch *channel) handleFrame(f amqp.Frame) error {
	if ch.closing {
		if f.Type == amqp.TypeMethod {
			id, _ := amqp.MethodID(f.Payload)
			switch id {
			case (&amqp.ChannelCloseOk{}).ID():
				ch.conn.forgetChannel(ch)
			case (&amqp.ChannelClose{}).ID():
				ch.conn.out.sendMethod(ch.id, &amqp.ChannelCloseOk{})
			}
		}
		return nil
	}
	var err *amqp.Error
	switch f.Type {
	case amqp.TypeMethod:
		if ch.pubActive {
			return amqp.NewError(amqp.UnexpectedFrame, ch.pub.ID(), "expected content header for class 60, got non content header frame instead")
		}
		err = ch.handleMethod(f.Payload)
	case amqp.TypeHeader:
		if err = ch.headersTableError(f.Payload); err == nil {
			err = ch.handleHeader(f.Payload)
		}
	case amqp.TypeBody:
		err = ch.handleBody(f.Payload)
	}
	if err == nil {
		return nil
	}
	if err.Hard() {
		return err
	}
	ch.softClose(err)
	return nil
}

// softClose closes the channel for a channel exception.
func (ch *channel) softClose(e *amqp.Error) {
	ch.logChannelError(e)
	ch.shutdown()
	ch.closing = true
	ch.conn.out.sendMethod(ch.id, &amqp.ChannelClose{ReplyCode: e.Code, ReplyText: e.ReplyText(), ClassID: e.ClassID, MethodID: e.MethodID})
}

// shutdown cancels the channel's consumers and requeues its unacked messages.
// It runs on the reader goroutine when the channel or connection closes.
func (ch *channel) shutdown() {
	ch.conn.flushStores() // this channel's batched publishes reach their queues and confirms
	ch.conn.srv.admin.untrack(ch)
	ch.flushConfirms()
	ch.confirms.close()
	ch.conn.srv.unregisterReply(ch)
	ch.cmu.Lock()
	cs := make([]*consumer, 0, len(ch.consumers))
	for tag, c := range ch.consumers {
		cs = append(cs, c)
		delete(ch.consumers, tag)
	}
	ch.cmu.Unlock()
	for _, c := range cs {
		if c.q.cancel(c) {
			q := c.q.queue()
			q.vhost.removeQueue(q, "auto-delete")
		}
	}
	// An open transaction rolls back: its settlements return to the
	// unacked list (they left it at basic.ack) and are requeued with the
	// rest, as RabbitMQ requeues everything unacked at a channel's close.
	ch.umu.Lock()
	if ch.tx != nil {
		for _, s := range ch.tx.settles {
			for _, d := range s.ds {
				ch.unacked.insert(d)
			}
		}
		ch.tx = nil
	}
	ds := ch.unacked.takeAll(nil)
	ch.umu.Unlock()
	ch.requeueDeliveries(ds)
	ch.endContent()
}

// handleMethod decodes and runs one method.
func (ch *channel) handleMethod(payload []byte) *amqp.Error {
	id, err := amqp.MethodID(payload)
	if err != nil {
		return amqp.NewError(amqp.FrameError, 0, "%v", err)
	}
	// The publish fast path decodes into a reused struct.
	if id == methodBasicPublish {
		if err := ch.pub.Decode(payload[4:]); err != nil {
			return methodDecodeError(payload, err)
		}
		return ch.startPublish()
	}
	m, err := amqp.DecodeMethod(payload)
	if err != nil {
		return methodDecodeError(payload, err)
	}
	if err := ch.methodTableError(m); err != nil {
		return err
	}
	return ch.dispatch(m)
}

func (ch *channel) dispatch(m amqp.Method) *amqp.Error {
	switch m := m.(type) {
	case *amqp.ChannelOpen:
		return amqp.NewError(amqp.ChannelError, m.ID(), "second 'channel.open' seen")
	case *amqp.ChannelClose:
		ch.shutdown()
		ch.conn.forgetChannel(ch)
		ch.conn.out.sendMethod(ch.id, &amqp.ChannelCloseOk{})
		return nil
	case *amqp.ChannelCloseOk:
		return nil
	case *amqp.ChannelFlow:
		if !m.Active {
			return amqp.NewError(amqp.NotImplemented, m.ID(), "active=false")
		}
		ch.conn.out.sendMethod(ch.id, &amqp.ChannelFlowOk{Active: true})
		return nil
	case *amqp.AccessRequest:
		ch.conn.out.sendMethod(ch.id, &amqp.AccessRequestOk{Ticket: 1})
		return nil
	case *amqp.ExchangeDeclare:
		return ch.exchangeDeclare(m)
	case *amqp.ExchangeDelete:
		return ch.exchangeDelete(m)
	case *amqp.ExchangeBind:
		return ch.exchangeBind(m.Destination, m.Source, m.RoutingKey, m.Arguments, false, m.Nowait)
	case *amqp.ExchangeUnbind:
		return ch.exchangeBind(m.Destination, m.Source, m.RoutingKey, m.Arguments, true, m.Nowait)
	case *amqp.QueueDeclare:
		return ch.queueDeclare(m)
	case *amqp.QueueBind:
		return ch.queueBind(m)
	case *amqp.QueueUnbind:
		return ch.queueUnbind(m)
	case *amqp.QueuePurge:
		return ch.queuePurge(m)
	case *amqp.QueueDelete:
		return ch.queueDelete(m)
	case *amqp.BasicQos:
		return ch.basicQos(m)
	case *amqp.BasicConsume:
		if err := ch.consumerLimitError(); err != nil {
			return err
		}
		return ch.basicConsume(m)
	case *amqp.BasicCancel:
		return ch.basicCancel(m)
	case *amqp.BasicGet:
		return ch.basicGet(m)
	case *amqp.BasicAck:
		return ch.settle(m.ID(), m.DeliveryTag, m.Multiple, settleAck)
	case *amqp.BasicNack:
		kind := settleDrop
		if m.Requeue {
			kind = settleRequeue
		}
		return ch.settle(m.ID(), m.DeliveryTag, m.Multiple, kind)
	case *amqp.BasicReject:
		kind := settleDrop
		if m.Requeue {
			kind = settleRequeue
		}
		return ch.settle(m.ID(), m.DeliveryTag, false, kind)
	case *amqp.BasicRecover:
		return ch.recover(m.ID(), m.Requeue, true)
	case *amqp.BasicRecoverAsync:
		return ch.recover(m.ID(), m.Requeue, false)
	case *amqp.ConfirmSelect:
		return ch.confirmSelect(m)
	case *amqp.TxSelect:
		return ch.txSelect(m)
	case *amqp.TxCommit:
		return ch.txCommit(m)
	case *amqp.TxRollback:
		return ch.txRollback(m)
	}
	return amqp.NewError(amqp.CommandInvalid, m.ID(), "unexpected method %s on a channel", m.Name())
}

// reply sends a method unless the client asked for nowait.
func (ch *channel) reply(nowait bool, m amqp.Method) {
	if !nowait {
		ch.conn.out.sendMethod(ch.id, m)
	}
}

// authorize checks the user's permission on a resource.
func (ch *channel) authorize(kind access, resource, name string, method uint32) *amqp.Error {
	c := ch.conn
	p := c.srv.users.permission(c.user.name, c.vhost.name)
	if p != nil && p.allows(kind, name) {
		return nil
	}
	return amqp.NewError(amqp.AccessRefused, method, "access to %s '%s' in vhost '%s' refused for user '%s'",
		resource, name, c.vhost.name, c.user.name)
}

// authorizePublish checks write permission on an exchange, remembering the
// last exchange allowed so steady publishing does not run a regexp per message.
// The memo is dropped whenever any permission changes.
func (ch *channel) authorizePublish(exchange string) *amqp.Error {
	gen := ch.conn.srv.users.generation.Load()
	if ch.pubAllowed.ok && ch.pubAllowed.gen == gen && ch.pubAllowed.exchange == exchange {
		return nil
	}
	if err := ch.authorize(accessWrite, "exchange", exchange, methodBasicPublish); err != nil {
		return err
	}
	ch.pubAllowed.ok, ch.pubAllowed.gen, ch.pubAllowed.exchange = true, gen, exchange
	return nil
}

// queueName expands the empty-name shortcut to the last declared queue.
func (ch *channel) queueName(name string, method uint32) (string, *amqp.Error) {
	if name != "" {
		return name, nil
	}
	if ch.lastQueue == "" {
		return "", amqp.NewError(amqp.NotFound, method, "no previously declared queue")
	}
	return ch.lastQueue, nil
}

func (ch *channel) exchangeDeclare(m *amqp.ExchangeDeclare) *amqp.Error {
	if err := ch.authorize(accessConfigure, "exchange", m.Exchange, m.ID()); err != nil {
		return err
	}
	if err := ch.conn.vhost.declareExchange(m); err != nil {
		return err
	}
	ch.reply(m.Nowait, &amqp.ExchangeDeclareOk{})
	return nil
}

func (ch *channel) exchangeDelete(m *amqp.ExchangeDelete) *amqp.Error {
	if err := ch.authorize(accessConfigure, "exchange", m.Exchange, m.ID()); err != nil {
		return err
	}
	if err := ch.conn.vhost.deleteExchange(m.Exchange, m.IfUnused); err != nil {
		return err
	}
	ch.reply(m.Nowait, &amqp.ExchangeDeleteOk{})
	return nil
}

func (ch *channel) exchangeBind(dest, source, key string, args amqp.Table, unbind, nowait bool) *amqp.Error {
	method := methodExchangeBind
	if unbind {
		method = methodExchangeUnbind
	}
	if err := ch.authorize(accessWrite, "exchange", dest, method); err != nil {
		return err
	}
	if err := ch.authorize(accessRead, "exchange", source, method); err != nil {
		return err
	}
	if err := ch.authorizeTopic(ch.conn.vhost.exchange(source), key, accessRead, method); err != nil {
		return err
	}
	if err := ch.conn.vhost.bindExchange(dest, source, key, args, unbind); err != nil {
		return err
	}
	if unbind {
		ch.reply(nowait, &amqp.ExchangeUnbindOk{})
	} else {
		ch.reply(nowait, &amqp.ExchangeBindOk{})
	}
	return nil
}

func (ch *channel) queueDeclare(m *amqp.QueueDeclare) *amqp.Error {
	// A server-named queue needs configure permission on the name chosen
	// for it, as in RabbitMQ (which first refuses server-named streams).
	m = ch.conn.vhost.withDefaultQueueType(m)
	name, err := serverQueueName(m)
	if err != nil {
		return err
	}
	if name != "" {
		if err := ch.authorize(accessConfigure, "queue", name, m.ID()); err != nil {
			return err
		}
	}
	q, err := ch.conn.vhost.declareQueueNamed(ch.conn, m, name)
	if err != nil {
		return err
	}
	ch.lastQueue = q.name
	ready, consumers, err := declaredCounts(q, m.ID())
	if err != nil {
		return err
	}
	ch.reply(m.Nowait, &amqp.QueueDeclareOk{Queue: q.name, MessageCount: uint32(ready), ConsumerCount: uint32(consumers)})
	return nil
}

// declaredCounts are the counts queue.declare-ok reports; a queue homed on
// a node that does not answer is 404, as in RabbitMQ.
func declaredCounts(q *Queue, method uint32) (int, int, *amqp.Error) {
	if rq, ok := q.h.(*remoteQueue); ok {
		return rq.checkedCounts(method)
	}
	ready, consumers := q.h.counts()
	return ready, consumers, nil
}

func (ch *channel) queueBind(m *amqp.QueueBind) *amqp.Error {
	if err := ch.bindingEnds(&m.Queue, &m.RoutingKey, m.Exchange, m.ID()); err != nil {
		return err
	}
	if err := ch.conn.vhost.bindQueue(ch.conn, m); err != nil {
		return err
	}
	ch.reply(m.Nowait, &amqp.QueueBindOk{})
	return nil
}

func (ch *channel) queueUnbind(m *amqp.QueueUnbind) *amqp.Error {
	if err := ch.bindingEnds(&m.Queue, &m.RoutingKey, m.Exchange, m.ID()); err != nil {
		return err
	}
	if err := ch.conn.vhost.unbindQueue(ch.conn, m); err != nil {
		return err
	}
	ch.reply(false, &amqp.QueueUnbindOk{})
	return nil
}

// bindingEnds applies RabbitMQ's shortcuts to a queue binding (an empty queue
// name is the last declared queue; with an empty key too, the key is that
// queue's name) and checks write permission on the queue, read permission
// on the exchange and, on a topic exchange, topic permission for the key.
func (ch *channel) bindingEnds(queue, key *string, exchange string, method uint32) *amqp.Error {
	if *queue == "" && *key == "" {
		*key = ch.lastQueue
	}
	name, err := ch.queueName(*queue, method)
	if err != nil {
		return err
	}
	*queue = name
	if err := ch.authorize(accessWrite, "queue", name, method); err != nil {
		return err
	}
	if err := ch.authorize(accessRead, "exchange", exchange, method); err != nil {
		return err
	}
	return ch.authorizeTopic(ch.conn.vhost.exchange(exchange), *key, accessRead, method)
}

// readableQueue resolves a queue name (with the empty-name shortcut) that
// the user must have read permission on, for purge, get and consume.
func (ch *channel) readableQueue(queue string, method uint32) (*Queue, *amqp.Error) {
	name, err := ch.queueName(queue, method)
	if err != nil {
		return nil, err
	}
	if err := ch.authorize(accessRead, "queue", name, method); err != nil {
		return nil, err
	}
	return ch.conn.vhost.lookupQueue(ch.conn, name, method)
}

func (ch *channel) queuePurge(m *amqp.QueuePurge) *amqp.Error {
	q, err := ch.readableQueue(m.Queue, m.ID())
	if err != nil {
		return err
	}
	n, err := q.h.purge(m.ID())
	if err != nil {
		return err
	}
	ch.reply(m.Nowait, &amqp.QueuePurgeOk{MessageCount: uint32(n)})
	return nil
}

func (ch *channel) queueDelete(m *amqp.QueueDelete) *amqp.Error {
	name, err := ch.queueName(m.Queue, m.ID())
	if err != nil {
		return err
	}
	if err := ch.authorize(accessConfigure, "queue", name, m.ID()); err != nil {
		return err
	}
	n, err := ch.conn.vhost.deleteQueue(ch.conn, name, m.IfUnused, m.IfEmpty)
	if err != nil {
		return err
	}
	ch.reply(m.Nowait, &amqp.QueueDeleteOk{MessageCount: uint32(n)})
	return nil
}
