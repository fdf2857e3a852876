package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Dead-letter reasons, as RabbitMQ writes them in x-death.
const (
	reasonRejected      = "rejected"
	reasonExpired       = "expired"
	reasonMaxLen        = "maxlen"
	reasonDeliveryLimit = "delivery_limit"
)

// deadLetter is a message leaving a queue for its dead-letter exchange.
type deadLetter struct {
	m      queued
	reason string
}

// takeDeadLocked hands the collected dead letters to the caller, who publishes
// them after releasing q.mu.
func (q *Queue) takeDeadLocked() []deadLetter {
	if len(q.dead) == 0 {
		return nil
	}
	d := q.dead
	q.dead = nil
	if q.journal != nil && q.journal.dlx != nil {
		d = q.journal.holdLocked(d) // at least once: quorum_dlx.go
	}
	return d
}

// publishDeadLetters republishes dead letters to the queue's dead-letter
// exchange with x-death recorded. Without a dead-letter exchange (or when it
// does not exist) they are dropped, as in RabbitMQ. Must not hold q.mu.
func (q *Queue) publishDeadLetters(dead []deadLetter) {
	if h, ok := q.h.(*quorumQueue); ok {
		h.kickDLX() // what takeDeadLocked held
	}
	if len(dead) == 0 {
		return
	}
	// A policy change (reconfigure) may replace q.qa meanwhile.
	q.mu.Lock()
	qa := q.qa
	q.mu.Unlock()
	if !qa.hasDLX {
		return
	}
	ex := q.vhost.exchange(qa.dlx)
	if ex == nil {
		return
	}
	p := publishing{r: newRouter(), ex: ex, ttl: -1}
	for _, d := range dead {
		m, err := q.deadLetterMessage(d, &qa)
		if err != nil {
			// The properties were validated at publish; only a broker bug gets here.
			q.vhost.log.Error("dead-lettering: undecodable properties; message dropped", "queue", q.name, "err", err)
			continue
		}
		p.m, p.keep = m, nil
		if d.reason != reasonRejected {
			p.keep = func(t *Queue) bool { return !isDeadLetterCycle(m, t.name) }
		}
		q.vhost.publish(&p)
		q.stats.deadLetterd.inc()
	}
}

// deadLetterMessage builds the republished copy of a dead letter: same body,
// properties with x-death updated, the expiration removed, and RabbitMQ's
// routing (the dead-letter routing key, or the original keys).
func (q *Queue) deadLetterMessage(d deadLetter, qa *queueArgs) (*Message, error) {
	orig := d.m.msg
	props, err := orig.sharedProperties() // a copy: changed below
	if err != nil {
		return nil, err
	}
	headers := make(amqp.Table, len(props.Headers)+4)
	for k, v := range props.Headers {
		headers[k] = v
	}
	keys := append([]any{orig.RoutingKey}, stringsToAny(orig.ccKeys)...)
	entry := amqp.Table{
		"count":        int64(1),
		"reason":       d.reason,
		"queue":        q.name,
		"time":         time.Now().Truncate(time.Second),
		"exchange":     orig.Exchange,
		"routing-keys": keys,
	}
	if props.Flags&amqp.FlagExpiration != 0 {
		entry["original-expiration"] = props.Expiration
		props.Flags &^= amqp.FlagExpiration
		props.Expiration = ""
	}
	deaths, _ := headers["x-death"].([]any)
	headers["x-death"] = mergeDeath(deaths, entry)
	if _, ok := headers["x-first-death-queue"]; !ok {
		headers["x-first-death-queue"] = q.name
		headers["x-first-death-reason"] = d.reason
		headers["x-first-death-exchange"] = orig.Exchange
	}
	props.Headers = headers
	props.Flags |= amqp.FlagHeaders
	key := orig.RoutingKey
	var cc []string
	if qa.hasDLRK {
		key = qa.dlrk
	} else {
		cc = orig.ccKeys
	}
	m := &Message{Exchange: qa.dlx, RoutingKey: key, Body: orig.Body, ccKeys: cc, ttl: -1}
	m.RawProps = props.AppendTo(nil)
	m.props = &props
	return m, nil
}

// mergeDeath puts entry at the front of x-death. An existing entry for the
// same queue and reason is folded in instead: its count grows, its time is
// refreshed and it moves to the front, as RabbitMQ does.
func mergeDeath(deaths []any, entry amqp.Table) []any {
	for i, d := range deaths {
		t, ok := d.(amqp.Table)
		if !ok || t["queue"] != entry["queue"] || t["reason"] != entry["reason"] {
			continue
		}
		merged := make(amqp.Table, len(t))
		for k, v := range t {
			merged[k] = v
		}
		n, _ := intArg(t["count"])
		merged["count"] = n + 1
		merged["time"] = entry["time"]
		out := make([]any, 0, len(deaths))
		out = append(out, merged)
		out = append(out, deaths[:i]...)
		return append(out, deaths[i+1:]...)
	}
	return append([]any{entry}, deaths...)
}

// isDeadLetterCycle reports whether republishing m to queue would close a
// dead-letter cycle with no rejection in it (RabbitMQ drops such messages).
func isDeadLetterCycle(m *Message, queue string) bool {
	// m is the copy deadLetterMessage built, so its properties are decoded.
	deaths, _ := m.props.Headers["x-death"].([]any)
	for _, d := range deaths {
		t, ok := d.(amqp.Table)
		if !ok {
			continue
		}
		if t["reason"] == reasonRejected {
			return false
		}
		if t["queue"] == queue {
			return true
		}
	}
	return false
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
