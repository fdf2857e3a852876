package federation

import (
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// qsession is one connected queue link (rabbit_federation_queue_link): it
// consumes from the upstream queue only while the downstream queue runs
// dry with consumers of its own waiting.
type qsession struct {
	l          *link
	c          *conns
	mv         *mover
	upQueue    string
	deliveries <-chan amqp.Delivery // nil while paused
	cancelling bool                 // cancelled; deliveries drains to its close
	upChClosed chan *amqp.Error
	downClosed chan *amqp.Error
}

// errNoPriorities is the plugin's upstream_lacks_consumer_priorities: the
// link consumes at priority -1 so the upstream's own consumers come first.
var errNoPriorities = errors.New("upstream lacks consumer priorities")

func (l *link) queueSession() error {
	c, err := l.connect()
	defer c.close()
	if err != nil {
		return err
	}
	t, u := l.spec.target, l.spec.up
	caps, _ := c.up.Properties["capabilities"].(amqp.Table)
	if caps["consumer_priorities"] != true {
		return errNoPriorities
	}
	s := &qsession{l: l, c: c, mv: newMover(u), upQueue: orDefault(u.queue, t.Name)}
	if s.downClosed, err = s.mv.openDown(c.down, u.prefetch); err != nil {
		return fmt.Errorf("downstream: %w", err)
	}
	ch, err := c.up.Channel()
	if err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	s.mv.upCh = ch
	s.upChClosed = ch.NotifyClose(make(chan *amqp.Error, 1))
	if _, err := ch.QueueDeclare(s.upQueue, t.Durable, t.AutoDelete, false, false, table(t.Args)); err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	if u.ackMode != "no-ack" {
		if err := ch.Qos(u.prefetch, 0, false); err != nil {
			return fmt.Errorf("upstream: %w", err)
		}
	}
	l.running(c.down)
	return s.move()
}

// move forwards deliveries, starting and stopping the upstream consumer as
// the downstream queue's state changes, until a side fails or the link is
// halted.
func (s *qsession) move() error {
	l, mv := s.l, s.mv
	tick := time.NewTicker(l.m.cfg.PollInterval)
	defer tick.Stop()
	if err := s.check(); err != nil {
		return err
	}
	for {
		select {
		case <-l.ctx.Done():
			return mv.drain(s.c)
		case e := <-s.c.upClosed:
			return sideError("upstream", e)
		case e := <-s.c.downClosed:
			return sideError("downstream", e)
		case e := <-s.upChClosed:
			return sideError("upstream channel", e)
		case e := <-s.downClosed:
			return sideError("downstream channel", e)
		case <-tick.C:
			if err := s.check(); err != nil {
				return err
			}
		case c := <-mv.confirms:
			if err := mv.settle(c); err != nil {
				return err
			}
		case dl, ok := <-mv.intake(s.deliveries):
			if !ok {
				if !s.cancelling {
					// The upstream cancelled the consumer (its queue
					// was deleted): the plugin restarts the link.
					return sideError("upstream consumer", nil)
				}
				s.deliveries, s.cancelling = nil, false
				continue
			}
			if err := s.forward(dl); err != nil {
				return err
			}
		}
	}
}

// check runs or pauses the upstream consumer (consumer_state_changed/3:
// run when the downstream queue is empty and has a consumer of priority 0
// or more).
func (s *qsession) check() error {
	t, u := s.l.spec.target, s.l.spec.up
	active := s.l.m.cfg.QueueActive(t.Vhost, t.Name)
	switch {
	case active && s.deliveries == nil:
		d, err := s.mv.upCh.Consume(s.upQueue, u.consumerTag, u.ackMode == "no-ack", false, false, false,
			amqp.Table{"x-priority": int32(-1)})
		if err != nil {
			return fmt.Errorf("upstream consume: %w", err)
		}
		s.deliveries = d
	case !active && s.deliveries != nil && !s.cancelling:
		// What was delivered before the cancel still arrives (amqp091-go
		// hands over its buffer before closing the channel) and is
		// forwarded.
		if err := s.mv.upCh.Cancel(u.consumerTag, false); err != nil {
			return fmt.Errorf("upstream cancel: %w", err)
		}
		s.cancelling = true
	}
	return nil
}

// forward republishes one message to the downstream queue through the
// default exchange, with x-received-from counting its visits
// (update_headers/5).
func (s *qsession) forward(dl amqp.Delivery) error {
	t := s.l.spec.target
	hop := amqp.Table{"uri": redactURI(s.c.uri), "queue": s.upQueue}
	h := make(amqp.Table, len(dl.Headers)+3)
	for k, v := range dl.Headers {
		if k == "CC" {
			k = "x-original-cc"
		}
		h[k] = v
	}
	count := int64(0)
	if been, ok := dl.Headers[receivedFrom].([]any); ok {
		var rest []any
		for _, e := range been {
			if et, ok := e.(amqp.Table); ok && et["uri"] == hop["uri"] && et["queue"] == hop["queue"] && et["virtual_host"] == hop["virtual_host"] {
				count = int64(intOf(et["visit-count"]))
				continue
			}
			rest = append(rest, e)
		}
		h[receivedFrom] = rest
	} else {
		// Only the first hop records where the message was published;
		// after it, that is the default exchange and the queue's name.
		h["x-original-exchange"], h["x-original-routing-key"] = dl.Exchange, dl.RoutingKey
		delete(h, receivedFrom)
	}
	hop["redelivered"], hop["visit-count"] = dl.Redelivered, count+1
	return s.mv.forward(dl, "", t.Name, prepend(h, receivedFrom, hop))
}
