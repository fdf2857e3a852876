package server

import (
	"slices"
	"strconv"

	"github.com/warrenmq/warren/amqp"
)

// prepareMessage decodes and checks a received message's properties once,
// before it is shared: the user-id, the expiration, sender-selected
// distribution (CC and BCC headers, BCC removed) and direct reply-to.
func (ch *channel) prepareMessage(m *Message) *amqp.Error {
	m.ttl = -1
	flags, err := amqp.CheckProperties(m.RawProps)
	if err != nil {
		return amqp.NewError(amqp.SyntaxError, methodBasicPublish, "malformed content properties: %v", err)
	}
	if flags&(amqp.FlagExpiration|amqp.FlagHeaders|amqp.FlagReplyTo|amqp.FlagUserID) == 0 {
		return nil // nothing to act on: leave the properties undecoded
	}
	p, err := m.Properties()
	if err != nil {
		return amqp.NewError(amqp.SyntaxError, methodBasicPublish, "malformed content properties: %v", err)
	}
	if p.ReplyTo == replyToQueue && ch.replyTo == nil {
		return amqp.NewError(amqp.PreconditionFailed, methodBasicPublish, "fast reply consumer does not exist")
	}
	if p.Flags&amqp.FlagUserID != 0 {
		if err := ch.conn.srv.users.checkUserID(ch.conn.user.name, p.UserID); err != nil {
			return err
		}
	}
	if p.Flags&amqp.FlagExpiration != 0 {
		ttl, perr := parseExpiration(p.Expiration)
		if perr != "" {
			return amqp.NewError(amqp.PreconditionFailed, methodBasicPublish, "invalid expiration '%s': %s", p.Expiration, perr)
		}
		m.ttl = ttl
	}
	rewrite := false
	if len(p.Headers) > 0 {
		if cc, ok := p.Headers["CC"].([]any); ok {
			m.ccKeys = appendKeys(m.ccKeys, cc)
		}
		if bcc, ok := p.Headers["BCC"].([]any); ok {
			m.ccKeys = appendKeys(m.ccKeys, bcc)
			headers := make(amqp.Table, len(p.Headers))
			for k, v := range p.Headers {
				if k != "BCC" {
					headers[k] = v
				}
			}
			p.Headers = headers
			rewrite = true
		}
	}
	if p.ReplyTo == replyToQueue {
		p.ReplyTo = replyToPrefix + ch.replyTo.suffix
		rewrite = true
	}
	if rewrite {
		m.RawProps = p.AppendTo(make([]byte, 0, len(m.RawProps)+32))
	}
	return nil
}

// CheckUserID checks a user-id property of a message user publishes, as
// basic.publish does: nil, or RabbitMQ's 406.
func (s *Server) CheckUserID(user, claimed string) *amqp.Error {
	return s.users.checkUserID(user, claimed)
}

// checkUserID enforces RabbitMQ's rule for the user-id property: it must
// name the publishing user unless that user is tagged impersonator (read at
// publish time, so a tag change applies at once).
func (u *users) checkUserID(user, claimed string) *amqp.Error {
	if claimed == user {
		return nil
	}
	u.mu.RLock()
	a := u.accounts[user]
	impersonator := a != nil && slices.Contains(a.tags, "impersonator")
	u.mu.RUnlock()
	if impersonator {
		return nil
	}
	return amqp.NewError(amqp.PreconditionFailed, methodBasicPublish, "user_id property set to '%s' but authenticated user was '%s'", claimed, user)
}

func appendKeys(dst []string, keys []any) []string {
	for _, k := range keys {
		if s, ok := k.(string); ok {
			dst = append(dst, s)
		}
	}
	return dst
}

// parseExpiration reads the expiration property (milliseconds as a decimal
// string); the error string is RabbitMQ's reason term.
func parseExpiration(s string) (int64, string) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, "no_integer"
	}
	if n < 0 {
		return 0, "{value_negative," + s + "}"
	}
	return n, ""
}

// deliveryProps returns the properties to send with a delivery: the
// publisher's bytes, or for a redelivery on a queue with a delivery limit a
// copy with the x-delivery-count header.
func (q *Queue) deliveryProps(m queued) []byte {
	// A quorum queue sets the header on every redelivery, limit or not
	// (rabbit_fifo_client:add_delivery_count_header).
	if m.deliveries == 0 || (q.qa.deliveryLimit < 0 && !q.quorum) {
		return m.msg.RawProps
	}
	p, err := m.msg.sharedProperties()
	if err != nil { // validated at publish: deliver what the publisher sent
		q.vhost.log.Error("redelivery: undecodable properties", "queue", q.name, "err", err)
		return m.msg.RawProps
	}
	headers := make(amqp.Table, len(p.Headers)+1)
	for k, v := range p.Headers {
		headers[k] = v
	}
	headers["x-delivery-count"] = int64(m.deliveries)
	p.Headers = headers
	p.Flags |= amqp.FlagHeaders
	return p.AppendTo(nil)
}

// consumerPriority reads x-priority from basic.consume arguments.
func consumerPriority(m *amqp.BasicConsume) (int64, *amqp.Error) {
	v, ok := m.Arguments["x-priority"]
	if !ok {
		return 0, nil
	}
	n, isInt := intArg(v)
	if !isInt {
		return 0, amqp.NewError(amqp.PreconditionFailed, m.ID(), "invalid arg 'x-priority' for consumer: {unacceptable_type,%s}", argTypeName(v))
	}
	return n, nil
}
