package main

// The fast client's consumer: the consumer's own goroutine reads the socket
// into a large buffer, parses deliveries in place and writes the acks of
// one read in one write.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Where a consumer is in the frames of one delivery.
const (
	awaitMethod = iota // basic.deliver (or basic.cancel)
	awaitHeader        // the content header
	awaitBody          // body frames, until bodySize bytes arrived
)

// fastCons is the fast client's state of one consumer; only the consumer's
// goroutine touches it.
type fastCons struct {
	conn *fastConn
	// acks holds the basic.ack frames of the current read, written at
	// its end.
	acks []byte
	// pending deliveries not yet acked and the latest tag (multi-ack).
	pending int
	lastTag uint64

	// The delivery being received.
	phase     int
	tag       uint64
	bodySize  uint64
	remaining uint64
	head      [8]byte // the body's first bytes: the publish time
	got       int     // bytes of head filled
	hdrTS     int64   // publish time from the headers (bodies under 8 bytes)
	hdrOK     bool
}

// openFastConsumer connects consumer c with the fast client, sets its
// prefetch and starts consuming from queue.
func openFastConsumer(c *consumer, role, queue string) error {
	fc, err := dialFast(c.url, role)
	if err != nil {
		return err
	}
	if err := checkShortStr("queue name", queue); err != nil {
		return errors.Join(fmt.Errorf("%w (%s): %w", ErrDeclare, role, err), fc.closeAsReader())
	}
	if c.cfg.Prefetch > 0 {
		err := fc.call(mBasicQos, func(b []byte) []byte {
			b = append(b, 0, 0, 0, 0) // prefetch-size: no limit
			b = binary.BigEndian.AppendUint16(b, uint16(c.cfg.Prefetch))
			return append(b, 0) // global: off
		}, mBasicQosOk)
		if err != nil {
			return errors.Join(fmt.Errorf("%w (%s): basic.qos %d: %w", ErrDeclare, role, c.cfg.Prefetch, err), fc.closeAsReader())
		}
	}
	err = fc.call(mBasicConsume, func(b []byte) []byte {
		b = append(b, 0, 0) // reserved-1 (ticket)
		b = appendShortStr(b, queue)
		b = appendShortStr(b, c.tag)
		flags := byte(0) // no-local, no-ack, exclusive, no-wait
		if c.cfg.AutoAck {
			flags |= 1 << 1
		}
		b = append(b, flags)
		return append(b, 0, 0, 0, 0) // arguments: empty table
	}, mBasicConsumeOk)
	if err != nil {
		return errors.Join(fmt.Errorf("%w (%s): consume from queue %q: %w", ErrDeclare, role, queue, err), fc.closeAsReader())
	}
	c.fastMu.Lock()
	c.fast = &fastCons{conn: fc}
	c.fastMu.Unlock()
	return nil
}

// runFast is run for the fast client.
func (c *consumer) runFast(ctx context.Context) error {
	fc := c.fast.conn
	// Wakes the read; cancelled (or made harmless by close) afterwards.
	unreg := context.AfterFunc(ctx, fc.interruptRead)
	err := c.fastConsumeLoop(ctx)
	unreg()
	return errors.Join(err, fc.closeAsReader())
}

// fastConsumeLoop receives deliveries until ctx ends or CMessages arrive.
func (c *consumer) fastConsumeLoop(ctx context.Context) error {
	f := c.fast
	fc := f.conn
	now := time.Now().UnixNano() // arrival time of the frames being parsed
	for {
		for {
			fr, ok, err := fc.next()
			if err != nil {
				return fmt.Errorf("%w: consumer %d: %w", ErrWorker, c.id, err)
			}
			if !ok {
				break
			}
			done, err := c.onFrame(fr, now)
			if err != nil {
				return err
			}
			if done {
				c.fastFlushMulti()
				if err := c.writeAcks(); err != nil {
					return err
				}
				c.finished.Store(true)
				return nil
			}
		}
		if err := c.writeAcks(); err != nil {
			return err
		}
		if err := fc.fill(); err != nil {
			if ctx.Err() != nil {
				c.fastFlushMulti()
				return c.writeAcks()
			}
			return fmt.Errorf("%w: consumer %d: read: %w", ErrWorker, c.id, err)
		}
		now = time.Now().UnixNano()
	}
}

// onFrame handles one frame; done is true once CMessages were received.
func (c *consumer) onFrame(fr frame, now int64) (done bool, err error) {
	f := c.fast
	handled, err := f.conn.control(fr)
	if err != nil {
		var sce *ServerCloseError
		if errors.As(err, &sce) {
			return false, fmt.Errorf("%w: consumer %d: channel closed: %w", ErrWorker, c.id, err)
		}
		return false, fmt.Errorf("%w: consumer %d: %w", ErrWorker, c.id, err)
	}
	if handled {
		return false, nil
	}
	if fr.channel != fastChannel {
		return false, fmt.Errorf("%w: consumer %d: %w", ErrWorker, c.id, unexpected(fr, "on a consumer's connection"))
	}
	switch f.phase {
	case awaitMethod:
		k, r, err := fr.method()
		if err == nil && k == mBasicDeliver {
			f.tag, err = parseDeliver(r)
			f.phase = awaitHeader
		} else if err == nil && k == mBasicCancel {
			err = errors.New("consumer cancelled by the broker (queue deleted?)")
		} else if err == nil {
			err = unexpected(fr, "waiting for basic.deliver")
		}
		if err != nil {
			return false, fmt.Errorf("%w: consumer %d: %w", ErrWorker, c.id, err)
		}
		return false, nil
	case awaitHeader:
		if fr.typ != frameHeader {
			return false, fmt.Errorf("%w: consumer %d: %w", ErrWorker, c.id, unexpected(fr, "waiting for a content header"))
		}
		h, err := parseContentHeader(fr.payload)
		if err != nil {
			return false, fmt.Errorf("%w: consumer %d: %w", ErrWorker, c.id, err)
		}
		f.bodySize, f.remaining, f.got = h.bodySize, h.bodySize, 0
		f.hdrTS, f.hdrOK = 0, false
		if h.bodySize < 8 {
			f.hdrTS, f.hdrOK = tableTimestamp(h.headers)
		}
		if h.bodySize == 0 {
			return c.delivered(now)
		}
		f.phase = awaitBody
		return false, nil
	default: // awaitBody
		if fr.typ != frameBody || uint64(len(fr.payload)) > f.remaining {
			return false, fmt.Errorf("%w: consumer %d: %w", ErrWorker, c.id, unexpected(fr, "in a message body"))
		}
		if f.got < len(f.head) {
			f.got += copy(f.head[f.got:], fr.payload)
		}
		f.remaining -= uint64(len(fr.payload))
		if f.remaining == 0 {
			return c.delivered(now)
		}
		return false, nil
	}
}

// delivered completes the delivery being received: latency, count, ack.
func (c *consumer) delivered(now int64) (done bool, err error) {
	f := c.fast
	f.phase = awaitMethod
	ts, ok := f.hdrTS, f.hdrOK
	if f.bodySize >= 8 {
		ts = int64(binary.BigEndian.Uint64(f.head[:]))
		ok = ts > 0
	}
	c.record(now, ts, ok)
	if k := c.fo.killed(); k != 0 && ok && ts >= k {
		c.fo.sawDelivery(now)
	}
	if !c.cfg.AutoAck {
		if c.cfg.MultiAckEvery > 1 {
			f.pending++
			f.lastTag = f.tag
			if f.pending >= c.cfg.MultiAckEvery {
				c.fastFlushMulti()
			}
		} else {
			// One basic.ack per delivery, as PerfTest sends by default;
			// the frames of one read go out in one write.
			f.acks = appendBasicAck(f.acks, fastChannel, f.tag, false)
		}
	}
	return c.cfg.CMessages > 0 && c.consumed.Load() >= c.cfg.CMessages, nil
}

// fastFlushMulti queues an ack with multiple=true for the deliveries not
// yet acked in multi-ack mode.
func (c *consumer) fastFlushMulti() {
	f := c.fast
	if f.pending > 0 {
		f.acks = appendBasicAck(f.acks, fastChannel, f.lastTag, true)
		f.pending = 0
	}
}

// writeAcks writes the queued acks in one write.
func (c *consumer) writeAcks() error {
	f := c.fast
	if len(f.acks) == 0 {
		return nil
	}
	err := f.conn.write(f.acks)
	f.acks = f.acks[:0]
	if err != nil && !f.conn.aborted.Load() {
		return fmt.Errorf("%w: consumer %d: ack: %w", ErrWorker, c.id, err)
	}
	return nil
}
