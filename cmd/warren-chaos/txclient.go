package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// txConsumer consumes on a transactional channel: it acks a batch of up to
// 10 deliveries and commits the acks with tx.commit. A message whose ack
// was committed (tx.commit-ok received) must never be delivered again.
func (w *workload) txConsumer(ctx context.Context, proc string, rnd *rand.Rand) {
	w.session(ctx, rnd, func(ctx context.Context, n *node, c *amqp.Connection) error {
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		if err := ch.Tx(); err != nil {
			return err
		}
		if err := ch.Qos(50, 0, false); err != nil {
			return err
		}
		deliveries, err := consumeOn(c, ch, proc, w.queues)
		if err != nil {
			return err
		}
		for end := time.Now().Add(sessionLife); ctx.Err() == nil && time.Now().Before(end); {
			batch, open := w.collect(proc, n, deliveries)
			if len(batch) > 0 {
				if err := w.commitAcks(proc, n, ch, batch); err != nil {
					return err
				}
			}
			if !open {
				return errors.New("deliveries closed")
			}
		}
		return nil
	})
}

// collect takes up to 10 deliveries, waiting at most 300 ms for the next.
func (w *workload) collect(proc string, n *node, ds *deliveries) ([]amqp.Delivery, bool) {
	var batch []amqp.Delivery
	idle := time.NewTimer(300 * time.Millisecond)
	defer idle.Stop()
	for len(batch) < 10 {
		d, ok, timedOut := ds.next(idle.C)
		switch {
		case timedOut:
			return batch, true
		case !ok:
			return batch, false
		}
		w.recordDelivery(proc, "deliver", n, d)
		batch = append(batch, d)
	}
	return batch, true
}

func (w *workload) commitAcks(proc string, n *node, ch *amqp.Channel, batch []amqp.Delivery) error {
	ids := make([]string, len(batch))
	for i, d := range batch {
		ids[i] = d.MessageId
		if err := d.Ack(false); err != nil {
			return err
		}
	}
	op := w.h.invoke(Event{Proc: proc, F: "commit", Node: n.name, IDs: ids})
	if op == 0 {
		return errBudget
	}
	// Without tx.commit-ok the commit may or may not have happened: a
	// closed connection or a channel error both leave it unknown.
	if err := ch.TxCommit(); err != nil {
		w.h.complete(op, evUnknown, Event{Proc: proc, F: "commit", Node: n.name, IDs: ids, Err: err.Error()})
		return err
	}
	w.h.complete(op, evOK, Event{Proc: proc, F: "commit", Node: n.name, IDs: ids})
	return nil
}
