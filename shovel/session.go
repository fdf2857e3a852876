package shovel

import (
	"context"
	"errors"
	"fmt"
	"github.com/warrenmq/warren/internal/paramvalue"
	"sort"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// link is one connected session: the source consumer and the destination
// publisher, with the messages published but not yet confirmed.
type link struct {
	w          *worker
	src, dest  *amqp.Connection
	srcCh      *amqp.Channel
	destCh     *amqp.Channel
	deliveries <-chan amqp.Delivery
	confirms   chan amqp.Confirmation
	// Each side's connection and channel closing (amqp091-go closes each
	// channel it is given, so each needs its own).
	srcClosed, destClosed, srcChClosed, destChClosed chan *amqp.Error
	pending                                          map[uint64]uint64 // destination publish sequence → source delivery tag
	nextSeq                                          uint64            // the destination's next publish sequence number
	left                                             int64             // messages still to move before delete-after; <0: unbounded
	srcURI                                           string
	headers                                          amqp.Table // the x-shovelled entry, when forward headers are on
	unackedFrom                                      uint64     // no-ack mode: the first delivery tag not yet acked at the source
	lastTag                                          uint64     // no-ack mode: the last delivery tag forwarded
}

// session connects both sides and moves messages until one fails, the
// worker is halted (nil) or delete-after is reached (errDone).
func (w *worker) session() error {
	l := &link{w: w, pending: make(map[uint64]uint64), nextSeq: 1}
	defer l.close()
	if err := l.open(); err != nil {
		return err
	}
	if l.left == 0 {
		return errDone
	}
	w.setState("running", "")
	return l.move()
}

func (l *link) close() {
	for _, c := range []*amqp.Connection{l.src, l.dest} {
		if c != nil {
			_ = c.Close() // the session is over; a close error says nothing more
		}
	}
}

// open connects the source and the destination and declares what the
// plugin declares: a durable src-queue / dest-queue, or a server-named
// queue bound to src-exchange.
func (l *link) open() error {
	w, d := l.w, l.w.def
	var err error
	if l.srcURI, err = paramvalue.PickURI(d.srcURIs); err != nil {
		return fmt.Errorf("src-uri: %w", err)
	}
	destURI, err := paramvalue.PickURI(d.destURIs)
	if err != nil {
		return fmt.Errorf("dest-uri: %w", err)
	}
	if l.src, err = w.dial(l.srcURI); err != nil {
		return fmt.Errorf("source %s: %w", redactURI(l.srcURI), err)
	}
	if l.dest, err = w.dial(destURI); err != nil {
		return fmt.Errorf("destination %s: %w", redactURI(destURI), err)
	}
	w.mu.Lock()
	w.src, w.dest = redactURI(l.srcURI), redactURI(destURI)
	w.mu.Unlock()
	l.srcClosed = l.src.NotifyClose(make(chan *amqp.Error, 1))
	l.destClosed = l.dest.NotifyClose(make(chan *amqp.Error, 1))
	if err := l.openDest(); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	if err := l.openSource(); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if d.forwardHeaders {
		l.headers = l.forwardHeaders(destURI)
	}
	return nil
}

func (l *link) openDest() error {
	d := l.w.def
	var err error
	if l.destCh, err = l.dest.Channel(); err != nil {
		return err
	}
	l.destChClosed = l.destCh.NotifyClose(make(chan *amqp.Error, 1))
	if d.destQueue != "" {
		if _, err := ensureQueue(l.dest, d.destQueue, d.destQueueArgs); err != nil {
			return err
		}
	}
	if d.ackMode == "on-confirm" {
		// Room for every unconfirmed message (at most the prefetch), so
		// amqp091-go never blocks handing a confirm over.
		l.confirms = l.destCh.NotifyPublish(make(chan amqp.Confirmation, d.prefetch+1))
		return l.destCh.Confirm(false)
	}
	return nil
}

func (l *link) openSource() error {
	d := l.w.def
	var err error
	if l.srcCh, err = l.src.Channel(); err != nil {
		return err
	}
	l.srcChClosed = l.srcCh.NotifyClose(make(chan *amqp.Error, 1))
	if err := l.srcCh.Qos(d.prefetch, 0, false); err != nil {
		return err
	}
	queue := d.srcQueue
	var q amqp.Queue
	if queue != "" {
		q, err = ensureQueue(l.src, queue, d.srcQueueArgs)
	} else {
		q, err = l.srcCh.QueueDeclare("", false, true, true, false, nil)
		if err == nil {
			err = l.srcCh.QueueBind(q.Name, d.srcExchangeKey, d.srcExchange, false, nil)
		}
	}
	if err != nil {
		return err
	}
	switch l.left = -1; {
	case d.deleteAfter == deleteQueueLength:
		l.left = int64(q.Messages)
	case d.deleteAfter >= 0:
		l.left = d.deleteAfter
	}
	if l.left == 0 {
		return nil
	}
	// Always a consumer with acks, also for no-ack: a no-ack consumer gets
	// the whole queue pushed at once, held in amqp091-go's unbounded
	// delivery buffer whenever the destination is slower than the source.
	// no-ack acks each delivery as it arrives instead (see forward): the
	// same at-most-once guarantee, with at most the prefetch in memory.
	l.deliveries, err = l.srcCh.Consume(q.Name, consumerTag, false, false, false, false, d.srcConsumeArgs)
	l.unackedFrom = 1
	return err
}

// ensureQueue is the plugin's ensure_queue/3: a passive declare, and a
// durable declare with args only when the queue is not there, so a queue
// declared with other arguments (imported definitions, policies' keys set
// as arguments) is used as it is instead of failing the shovel with 406.
// Each declare has its own channel, as a 404 closes the channel.
func ensureQueue(c *amqp.Connection, name string, args amqp.Table) (amqp.Queue, error) {
	ch, err := c.Channel()
	if err != nil {
		return amqp.Queue{}, err
	}
	q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
	if err == nil {
		return q, ch.Close()
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		return q, err
	}
	if ch, err = c.Channel(); err != nil {
		return q, err
	}
	if q, err = ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return q, err
	}
	return q, ch.Close()
}

// consumerTag is the shovel's tag on its source queue.
const consumerTag = "amq.ctag-shovel"

// drainTimeout bounds how long a stopping shovel waits for the
// destination to confirm what it already published.
const drainTimeout = 5 * time.Second

// drain ends a session the worker was told to stop: it stops consuming and
// waits (a bounded time) for the confirms of the messages already
// published, acking them at the source, so a restart or an update moves
// each message once. Deliveries not yet forwarded go back to the source
// queue when the channel closes.
func (l *link) drain() error {
	if err := l.flushNoAck(); err != nil {
		return err
	}
	if len(l.pending) == 0 {
		return nil
	}
	if err := l.srcCh.Cancel(consumerTag, false); err != nil {
		return err
	}
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	for len(l.pending) > 0 {
		select {
		case <-t.C:
			return fmt.Errorf("stopped with %d messages unconfirmed by the destination", len(l.pending))
		case e := <-l.srcClosed:
			return sideError("source", e)
		case e := <-l.destClosed:
			return sideError("destination", e)
		case e := <-l.srcChClosed:
			return sideError("source channel", e)
		case e := <-l.destChClosed:
			return sideError("destination channel", e)
		case c := <-l.confirms:
			if err := l.settle(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// move forwards deliveries until a side fails, the worker is halted or
// delete-after is reached with every moved message settled.
func (l *link) move() error {
	ctx := l.w.ctx
	for {
		select {
		case <-ctx.Done():
			return l.drain()
		case e := <-l.srcClosed:
			return sideError("source", e)
		case e := <-l.destClosed:
			return sideError("destination", e)
		case e := <-l.srcChClosed:
			return sideError("source channel", e)
		case e := <-l.destChClosed:
			return sideError("destination channel", e)
		case c := <-l.confirms:
			if err := l.settle(c); err != nil {
				return err
			}
		case dl, ok := <-l.deliveries:
			if !ok {
				return sideError("source consumer", nil)
			}
			if err := l.forward(dl); err != nil {
				return err
			}
		}
		if l.left == 0 && len(l.pending) == 0 {
			return errDone
		}
	}
}

// sideError is why a session ended: the side and RabbitMQ's reply.
func sideError(side string, e *amqp.Error) error {
	if e == nil {
		return fmt.Errorf("%s closed", side)
	}
	return fmt.Errorf("%s closed: %w", side, e)
}

// forward publishes one delivery to the destination and, by ack-mode,
// acks it at once (on-publish) or once confirmed (on-confirm).
func (l *link) forward(dl amqp.Delivery) error {
	if l.left == 0 {
		// delete-after reached: leave the rest in the source, as the
		// plugin does (it cancels its consumer).
		return dl.Nack(false, true)
	}
	if l.w.def.ackMode == "no-ack" {
		// The last message before delete-after is acked at once: the
		// session ends after it and would return unacked ones.
		if err := l.ackOnReceipt(dl.DeliveryTag, l.left == 1); err != nil {
			return err
		}
	}
	exchange, key := l.route(dl)
	// Not the worker's context: a publish made must be seen through to its
	// confirm (drain), not abandoned half-way by a stop.
	if err := l.destCh.PublishWithContext(context.Background(), exchange, key, false, false, l.publishing(dl)); err != nil {
		return err
	}
	if l.left > 0 {
		l.left--
	}
	switch l.w.def.ackMode {
	case "on-confirm":
		l.pending[l.nextSeq] = dl.DeliveryTag
		l.nextSeq++
		return nil
	case "on-publish":
		return dl.Ack(false)
	}
	return nil
}

// ackOnReceipt is no-ack mode's settlement: the delivery leaves the source
// before it is published, as with a no-ack consumer. Acks go out as one
// multiple ack per half prefetch, or at once when no more deliveries are
// waiting, so the broker never waits on the shovel for credit.
func (l *link) ackOnReceipt(tag uint64, now bool) error {
	l.lastTag = tag
	if !now && tag-l.unackedFrom+1 < uint64(max(1, l.w.def.prefetch/2)) && len(l.deliveries) > 0 {
		return nil
	}
	l.unackedFrom = tag + 1
	return l.srcCh.Ack(tag, true)
}

// flushNoAck acks what no-ack mode has forwarded but not yet acked, so a
// stopping shovel does not hand it back to the source queue.
func (l *link) flushNoAck() error {
	if l.w.def.ackMode != "no-ack" || l.lastTag < l.unackedFrom {
		return nil
	}
	return l.ackOnReceipt(l.lastTag, true)
}

// settle acks the source for a confirmed message or returns a nacked one
// to its queue, as rabbit_amqp091_shovel does.
func (l *link) settle(c amqp.Confirmation) error {
	tag, ok := l.pending[c.DeliveryTag]
	if !ok {
		return nil
	}
	delete(l.pending, c.DeliveryTag)
	if c.Ack {
		return l.srcCh.Ack(tag, false)
	}
	return l.srcCh.Nack(tag, false, true)
}

// route is where a message goes: dest-queue through the default exchange,
// or dest-exchange with dest-exchange-key or the message's own key.
func (l *link) route(dl amqp.Delivery) (exchange, key string) {
	d := l.w.def
	if d.destQueue != "" {
		return "", d.destQueue
	}
	exchange, key = dl.Exchange, dl.RoutingKey
	if d.destExchange != "" {
		exchange = d.destExchange
	}
	if d.destExchangeKey != nil {
		key = *d.destExchangeKey
	}
	return exchange, key
}

func sortWorkers(ws []*worker) {
	sort.Slice(ws, func(i, j int) bool {
		a, b := ws[i].param, ws[j].param
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		return a.Name < b.Name
	})
}
