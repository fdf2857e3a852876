package server

import (
	"strings"
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// Direct reply-to: a client consumes from the pseudo-queue
// amq.rabbitmq.reply-to (no-ack), publishes requests with that reply-to, and
// replies published to the default exchange with the rewritten key
// amq.rabbitmq.reply-to.<suffix> go straight to its channel, with no queue.
const (
	replyToQueue  = "amq.rabbitmq.reply-to"
	replyToPrefix = "amq.rabbitmq.reply-to."
)

// replyConsumer is a channel's direct reply-to subscription.
type replyConsumer struct {
	tag    string
	suffix string
}

// replyRegistry maps reply-to suffixes to channels. Its lock is a leaf.
type replyRegistry struct {
	mu       sync.RWMutex
	channels map[string]*channel
}

func (ch *channel) consumeReplyTo(m *amqp.BasicConsume) *amqp.Error {
	if !m.NoAck {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(), "reply consumer cannot acknowledge")
	}
	if ch.replyTo != nil {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(), "reply consumer already set")
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = generateName("amq.ctag-")
	}
	rc := &replyConsumer{tag: tag, suffix: generateName("")}
	s := ch.conn.srv
	s.replies.mu.Lock()
	if s.replies.channels == nil {
		s.replies.channels = make(map[string]*channel)
	}
	s.replies.channels[rc.suffix] = ch
	s.replies.mu.Unlock()
	ch.replyTo = rc
	ch.reply(m.Nowait, &amqp.BasicConsumeOk{ConsumerTag: tag})
	return nil
}

func (s *Server) unregisterReply(ch *channel) {
	if ch.replyTo == nil {
		return
	}
	s.replies.mu.Lock()
	delete(s.replies.channels, ch.replyTo.suffix)
	s.replies.mu.Unlock()
	ch.replyTo = nil
}

// deliverReply delivers a message published to the default exchange with a
// reply-to routing key to the waiting channel. It reports whether it did.
func (s *Server) deliverReply(m *Message) bool {
	if !strings.HasPrefix(m.RoutingKey, replyToPrefix) {
		return false
	}
	s.replies.mu.RLock()
	ch := s.replies.channels[strings.TrimPrefix(m.RoutingKey, replyToPrefix)]
	var tag string
	if ch != nil {
		tag = ch.replyTo.tag
	}
	s.replies.mu.RUnlock()
	if ch == nil {
		return false
	}
	o := ch.conn.out
	ch.umu.Lock()
	ch.nextTag++
	d := amqp.BasicDeliver{ConsumerTag: tag, DeliveryTag: ch.nextTag, Exchange: m.Exchange, RoutingKey: m.RoutingKey}
	o.mu.Lock()
	if start, ok := o.beginMethodLocked(ch.id); ok {
		o.buf = d.AppendTo(o.buf)
		o.endWithContentLocked(start, ch.id, ch.conn.frameMax, m.RawProps, m.Body)
	}
	o.mu.Unlock()
	ch.umu.Unlock()
	o.signal()
	return true
}
