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

// publisher publishes on its own connection and channel. Its counters are
// atomics read by the runner's reporter; everything else belongs to the
// goroutine running run.
type publisher struct {
	id  int
	cfg *Config
	// fast is the fast client's state; nil with --client amqp091, which
	// uses conn, ch, closed, confirms and window instead.
	fast     *fastPub
	conn     *brokerConn
	ch       *amqp.Channel
	exchange string
	key      string
	// url is the node this publisher's connection goes to: Config.URL,
	// another after a failover.
	url    string
	closed chan *amqp.Error
	// fo is the run's failover state, nil without failover. killTag is
	// the first delivery tag, on the current connection, of a message
	// published after the kill; 0 while there is none.
	fo      *failover
	killTag atomic.Uint64
	// fastMu guards the swap of fast at a reconnect against abort.
	fastMu sync.Mutex
	// confirms and window are nil without confirms. window holds one token
	// per unconfirmed message; its capacity is Config.Confirm.
	confirms chan amqp.Confirmation
	window   chan struct{}

	published atomic.Uint64
	confirmed atomic.Uint64
	nacked    atomic.Uint64
	// finished is set once PMessages were published and, with confirms,
	// all of them confirmed; finishedAt is when (Unix nanoseconds).
	finished   atomic.Bool
	finishedAt atomic.Int64
}

// openPublisher connects publisher id, which will publish to exchange with
// routing key key.
func openPublisher(cfg *Config, id int, exchange, key string) (*publisher, error) {
	role := fmt.Sprintf("publisher %d", id)
	if cfg.Client != clientAMQP091 {
		p := &publisher{id: id, cfg: cfg, exchange: exchange, key: key, url: cfg.URL}
		if err := openFastPublisher(p, role); err != nil {
			return nil, err
		}
		return p, nil
	}
	conn, ch, err := openChannel(cfg.URL, role)
	if err != nil {
		return nil, err
	}
	p := &publisher{id: id, cfg: cfg, conn: conn, ch: ch, exchange: exchange, key: key}
	p.closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	if cfg.Confirm > 0 {
		if err := ch.Confirm(false); err != nil {
			return nil, errors.Join(fmt.Errorf("%w (%s): confirm.select: %w", ErrConnect, role, err), conn.close())
		}
		// The listener is drained by readConfirms without blocking on
		// anything else, so a buffer of one window is plenty.
		p.confirms = ch.NotifyPublish(make(chan amqp.Confirmation, cfg.Confirm))
		p.window = make(chan struct{}, cfg.Confirm)
	}
	return p, nil
}

// run publishes until ctx ends or PMessages are sent, then waits for the
// outstanding confirms and closes the connection.
func (p *publisher) run(ctx context.Context) error {
	if p.fast != nil {
		return p.runFast(ctx)
	}
	var wg sync.WaitGroup
	var confirmDone chan struct{}
	if p.confirms != nil {
		// Owned by run; stops when the channel closes, which closes the
		// confirms listener; run waits for it below.
		confirmDone = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(confirmDone)
			p.readConfirms()
		}()
	}
	err := p.publishLoop(ctx, confirmDone)
	if err == nil && p.confirms != nil {
		err = p.drain(confirmDone)
	}
	if err == nil && p.cfg.PMessages > 0 && p.published.Load() >= p.cfg.PMessages {
		p.finishedAt.Store(time.Now().UnixNano())
		p.finished.Store(true)
	}
	cerr := p.conn.close()
	wg.Wait()
	return errors.Join(err, cerr)
}

// publishLoop publishes messages. It returns nil when it stops because ctx
// ended or the message count is reached.
func (p *publisher) publishLoop(ctx context.Context, confirmDone <-chan struct{}) error {
	limiter := newRateLimiter(p.cfg.Rate)
	msg := amqp.Publishing{Body: make([]byte, p.cfg.Size), DeliveryMode: amqp.Transient}
	if p.cfg.Persistent {
		msg.DeliveryMode = amqp.Persistent
	}
	for p.cfg.PMessages == 0 || p.published.Load() < p.cfg.PMessages {
		if limiter.wait(ctx) != nil {
			return nil
		}
		if p.window != nil {
			select {
			case p.window <- struct{}{}:
			case <-ctx.Done():
				return nil
			case <-confirmDone:
				return fmt.Errorf("%w: publisher %d: channel closed: %w", ErrWorker, p.id, closeReason(p.closed))
			}
		}
		// Publish writes the frames before it returns, so the body buffer
		// can be reused for the next message.
		stampTimestamp(&msg, time.Now().UnixNano())
		if err := p.ch.Publish(p.exchange, p.key, false, false, msg); err != nil {
			if p.window != nil {
				<-p.window
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: publisher %d: publish: %w", ErrWorker, p.id, err)
		}
		p.published.Add(1)
	}
	return nil
}

// readConfirms counts confirms and frees window slots until the channel
// closes.
func (p *publisher) readConfirms() {
	for c := range p.confirms {
		if c.Ack {
			p.confirmed.Add(1)
		} else {
			p.nacked.Add(1)
		}
		select {
		case <-p.window:
		default: // a confirm for nothing outstanding: the broker's bug, not ours to block on
		}
	}
}

// drain waits until every published message is confirmed or nacked, by
// taking every slot of the window, for at most Config.DrainTimeout.
func (p *publisher) drain(confirmDone <-chan struct{}) error {
	t := time.NewTimer(p.cfg.DrainTimeout)
	defer t.Stop()
	for range cap(p.window) {
		select {
		case p.window <- struct{}{}:
		case <-confirmDone:
			return fmt.Errorf("%w: publisher %d: channel closed with %d confirms outstanding: %w",
				ErrWorker, p.id, p.outstanding(), closeReason(p.closed))
		case <-t.C:
			return fmt.Errorf("%w: publisher %d: %d after waiting %v",
				ErrConfirmTimeout, p.id, p.outstanding(), p.cfg.DrainTimeout)
		}
	}
	return nil
}

// outstanding is the number of published messages not yet confirmed.
func (p *publisher) outstanding() uint64 {
	settled := p.confirmed.Load() + p.nacked.Load()
	pub := p.published.Load() // loaded last: a confirm may be counted before its publish
	if settled > pub {
		return 0
	}
	return pub - settled
}

// abort closes the publisher's socket under it; see brokerConn.abort.
func (p *publisher) abort() error {
	p.fastMu.Lock()
	f := p.fast
	p.fastMu.Unlock()
	if f != nil {
		return f.conn.abort()
	}
	return p.conn.abort()
}
