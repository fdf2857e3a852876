package shovel

import (
	"github.com/warrenmq/warren/internal/paramvalue"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// publishing is the message as the destination gets it: the source's
// properties and body, then dest-publish-properties, then the x-shovelled
// and x-shovelled-timestamp headers when asked for.
func (l *link) publishing(dl amqp.Delivery) amqp.Publishing {
	p := amqp.Publishing{
		Headers: dl.Headers, ContentType: dl.ContentType, ContentEncoding: dl.ContentEncoding,
		DeliveryMode: dl.DeliveryMode, Priority: dl.Priority, CorrelationId: dl.CorrelationId,
		ReplyTo: dl.ReplyTo, Expiration: dl.Expiration, MessageId: dl.MessageId, Timestamp: dl.Timestamp,
		Type: dl.Type, UserId: dl.UserId, AppId: dl.AppId, Body: dl.Body,
	}
	applyProperties(&p, l.w.def.publishProps)
	if l.headers != nil || l.w.def.timestampHdr {
		h := make(amqp.Table, len(p.Headers)+2)
		for k, v := range p.Headers {
			h[k] = v
		}
		if l.headers != nil {
			prev, _ := h["x-shovelled"].([]any)
			h["x-shovelled"] = append([]any{l.headers}, prev...)
		}
		if l.w.def.timestampHdr {
			h["x-shovelled-timestamp"] = time.Now().Unix()
		}
		p.Headers = h
	}
	return p
}

// applyProperties sets dest-publish-properties over the message's own.
func applyProperties(p *amqp.Publishing, props map[string]any) {
	for k, v := range props {
		s, _ := v.(string)
		n, _ := paramvalue.Number(v)
		switch k {
		case "content_type":
			p.ContentType = s
		case "content_encoding":
			p.ContentEncoding = s
		case "delivery_mode":
			p.DeliveryMode = uint8(n)
		case "priority":
			p.Priority = uint8(n)
		case "correlation_id":
			p.CorrelationId = s
		case "reply_to":
			p.ReplyTo = s
		case "expiration":
			p.Expiration = s
		case "message_id":
			p.MessageId = s
		case "timestamp":
			p.Timestamp = time.Unix(int64(n), 0)
		case "type":
			p.Type = s
		case "user_id":
			p.UserId = s
		case "app_id":
			p.AppId = s
		}
	}
}

// forwardHeaders is the x-shovelled entry of a dynamic shovel
// (rabbit_shovel_parameters): who moved the message and from where to
// where, with the URIs' credentials left out.
func (l *link) forwardHeaders(destURI string) amqp.Table {
	d := l.w.def
	t := amqp.Table{
		"shovelled-by": l.w.m.clusterName(), "shovel-type": "dynamic",
		"shovel-name": l.w.param.Name, "shovel-vhost": l.w.param.Vhost,
		"src-uri": redactURI(l.srcURI), "dest-uri": redactURI(destURI),
	}
	if d.srcQueue != "" {
		t["src-queue"] = d.srcQueue
	} else {
		t["src-exchange"], t["src-exchange-key"] = d.srcExchange, d.srcExchangeKey
	}
	if d.destQueue != "" {
		t["dest-queue"] = d.destQueue
	} else if d.destExchange != "" {
		t["dest-exchange"] = d.destExchange
		if d.destExchangeKey != nil {
			t["dest-exchange-key"] = *d.destExchangeKey
		}
	}
	return t
}

func (m *Manager) clusterName() string {
	if m.cfg.ClusterName != nil {
		return m.cfg.ClusterName()
	}
	return m.cfg.Node
}
