package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// consumer consumes from one queue on its own connection and channel. Its
// counters are atomics; its latency histogram is shared with the reporter
// under mu. Everything else belongs to the goroutine running run.
type consumer struct {
	id  int
	cfg *Config
	// fast is the fast client's state; nil with --client amqp091, which
	// uses conn, ch, closed and deliveries instead.
	fast  *fastCons
	conn  *brokerConn
	ch    *amqp.Channel
	tag   string
	queue string
	// url is the node this consumer's connection goes to: Config.URL,
	// another after a failover. fo is the run's failover state or nil.
	url        string
	fo         *failover
	fastMu     sync.Mutex // guards the swap of fast at a reconnect against abort
	closed     chan *amqp.Error
	deliveries <-chan amqp.Delivery

	consumed atomic.Uint64
	// lastAt is when the latest delivery arrived (Unix nanoseconds).
	lastAt atomic.Int64
	// finished is set once CMessages were received.
	finished atomic.Bool

	// mu guards interval, the latencies since the reporter last took them.
	// It is held only to record one value or to swap two pointers, so the
	// consumer never waits for the reporter to merge 58 KiB of buckets.
	mu       sync.Mutex
	interval *histogram
	// spare is the reporter's: the histogram swapped out of interval.
	spare *histogram
}

// openConsumer connects consumer id, sets its prefetch and starts consuming
// from queue.
func openConsumer(cfg *Config, id int, queue string) (*consumer, error) {
	role := fmt.Sprintf("consumer %d", id)
	c := &consumer{id: id, cfg: cfg, tag: fmt.Sprintf("warren-perf-%d", id), queue: queue, url: cfg.URL,
		interval: newHistogram(), spare: newHistogram()}
	if cfg.Client != clientAMQP091 {
		if err := openFastConsumer(c, role, queue); err != nil {
			return nil, err
		}
		return c, nil
	}
	conn, ch, err := openChannel(cfg.URL, role)
	if err != nil {
		return nil, err
	}
	c.conn, c.ch = conn, ch
	c.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	if cfg.Prefetch > 0 {
		if err := ch.Qos(cfg.Prefetch, 0, false); err != nil {
			return nil, errors.Join(fmt.Errorf("%w (%s): basic.qos %d: %w", ErrDeclare, role, cfg.Prefetch, err), conn.close())
		}
	}
	c.deliveries, err = ch.Consume(queue, c.tag, cfg.AutoAck, false, false, false, nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("%w (%s): consume from queue %q: %w", ErrDeclare, role, queue, err), conn.close())
	}
	return c, nil
}

// run receives deliveries until ctx ends or CMessages arrive, then acks
// what is still unacked and closes the connection.
func (c *consumer) run(ctx context.Context) error {
	if c.fast != nil {
		return c.runFast(ctx)
	}
	err := c.consumeLoop(ctx)
	return errors.Join(err, c.conn.close())
}

func (c *consumer) consumeLoop(ctx context.Context) error {
	var pending int         // deliveries not yet acked (multi-ack mode)
	var lastTag uint64      // tag of the latest delivery
	flush := func() error { // ack everything delivered so far
		if pending == 0 {
			return nil
		}
		pending = 0
		return c.ch.Ack(lastTag, true)
	}
	for {
		select {
		case <-ctx.Done():
			if err := flush(); err != nil {
				return fmt.Errorf("%w: consumer %d: ack: %w", ErrWorker, c.id, err)
			}
			return nil
		case d, ok := <-c.deliveries:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("%w: consumer %d: channel closed: %w", ErrWorker, c.id, closeReason(c.closed))
			}
			c.observe(d.Body, d.Headers)
			if !c.cfg.AutoAck {
				lastTag = d.DeliveryTag
				pending++
				if pending >= max(c.cfg.MultiAckEvery, 1) {
					var err error
					if c.cfg.MultiAckEvery > 1 {
						err = flush()
					} else {
						pending = 0
						err = c.ch.Ack(lastTag, false)
					}
					if err != nil {
						if ctx.Err() != nil {
							return nil
						}
						return fmt.Errorf("%w: consumer %d: ack: %w", ErrWorker, c.id, err)
					}
				}
			}
			if c.cfg.CMessages > 0 && c.consumed.Load() >= c.cfg.CMessages {
				if err := flush(); err != nil {
					return fmt.Errorf("%w: consumer %d: ack: %w", ErrWorker, c.id, err)
				}
				c.finished.Store(true)
				return nil
			}
		}
	}
}

// observe counts one delivery and records its latency.
func (c *consumer) observe(body []byte, headers amqp.Table) {
	ts, ok := decodeTimestamp(body, headers)
	c.record(time.Now().UnixNano(), ts, ok)
}

// record counts one delivery that arrived at now (Unix nanoseconds) and,
// if ok, records its latency from the publish time ts.
func (c *consumer) record(now, ts int64, ok bool) {
	if ok {
		c.mu.Lock()
		c.interval.recordDuration(time.Duration(now - ts))
		c.mu.Unlock()
	}
	c.lastAt.Store(now)
	c.consumed.Add(1)
}

// abort closes the consumer's socket under it; see brokerConn.abort.
func (c *consumer) abort() error {
	c.fastMu.Lock()
	f := c.fast
	c.fastMu.Unlock()
	if f != nil {
		return f.conn.abort()
	}
	return c.conn.abort()
}

// takeLatencies merges the latencies recorded since the last call into
// dst. Only the reporter goroutine calls it.
func (c *consumer) takeLatencies(dst *histogram) {
	c.mu.Lock()
	c.interval, c.spare = c.spare, c.interval
	c.mu.Unlock()
	dst.merge(c.spare)
	c.spare.reset()
}
