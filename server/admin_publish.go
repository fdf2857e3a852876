package server

import (
	"maps"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API (see admin.go): publishing a message.

// Publishing is a message published through the management API.
type Publishing struct {
	Exchange, RoutingKey string
	Properties           amqp.Properties
	Body                 []byte
}

// Publish routes a message as a mandatory basic.publish would and reports
// whether it reached a queue. AMQP failures are returned as *amqp.Error.
func (s *Server) Publish(vhost string, p Publishing) (routed bool, err error) {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return false, err
	}
	ex := vh.exchange(p.Exchange)
	if ex == nil {
		return false, amqp.NewError(amqp.NotFound, methodBasicPublish, "no %s", describeExchange(p.Exchange, vhost))
	}
	if ex.internal {
		return false, amqp.NewError(amqp.AccessRefused, methodBasicPublish, "cannot publish to internal %s", describeExchange(p.Exchange, vhost))
	}
	m, aerr := newAdminMessage(p)
	if aerr != nil {
		return false, aerr
	}
	stats := MessageCounters{Publish: 1}
	defer func() { s.admin.account(vhost, stats) }()
	res := vh.publish(&publishing{r: newRouter(), ex: ex, m: m, ttl: m.ttl, srv: s})
	if res.fault != nil {
		return false, res.fault
	}
	if res.duplicate {
		return false, nil
	}
	routed = res.routed
	if routed {
		ex.stats.publishOut.inc()
	} else {
		stats.ReturnUnroutable = 1
	}
	return routed, nil
}

// newAdminMessage builds a message from an API publish, applying what
// prepareMessage applies to AMQP publishes: the expiration and CC/BCC.
func newAdminMessage(p Publishing) (*Message, *amqp.Error) {
	props := p.Properties
	m := &Message{Exchange: p.Exchange, RoutingKey: p.RoutingKey, Body: p.Body, ttl: -1}
	if props.Flags&amqp.FlagExpiration != 0 {
		ttl, perr := parseExpiration(props.Expiration)
		if perr != "" {
			return nil, amqp.NewError(amqp.PreconditionFailed, methodBasicPublish, "invalid expiration '%s': %s", props.Expiration, perr)
		}
		m.ttl = ttl
	}
	if cc, ok := props.Headers["CC"].([]any); ok {
		m.ccKeys = appendKeys(m.ccKeys, cc)
	}
	if bcc, ok := props.Headers["BCC"].([]any); ok {
		m.ccKeys = appendKeys(m.ccKeys, bcc)
		props.Headers = maps.Clone(props.Headers)
		delete(props.Headers, "BCC")
	}
	m.RawProps = props.AppendTo(nil)
	m.props = &props
	return m, nil
}
