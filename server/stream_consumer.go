package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// streamPollEvery bounds how long a reader goroutine takes to notice that its
// channel closed (channel shutdown clears the channel's consumers without
// telling the stream).
const streamPollEvery = 100 * time.Millisecond

// streamConsumer is one basic.consume on a stream, with its reader goroutine.
type streamConsumer struct {
	s        *stream
	c        *consumer
	prefetch int32
	track    string       // x-stream-offset-tracking-name, or ""
	inflight atomic.Int32 // deliveries not yet acked
	offset   atomic.Uint64
	wake     chan struct{} // cap 1: an append or an ack
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func (sc *streamConsumer) signal() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// consume implements basic.consume on the stream: a reader goroutine per
// consumer reads the log from the offset the arguments ask for.
func (h streamQueue) consume(c *consumer, ok func()) *amqp.Error {
	q := h.q
	s := q.vhost.streams.get(q)
	if s == nil {
		return amqp.NewError(amqp.NotFound, methodBasicConsume, "no %s", describeQueue(q.name, q.vhost.name))
	}
	// RabbitMQ 3.10's checks, in its order (rabbit_stream_queue:consume),
	// and its words, checked against a running node.
	if c.prefetch == 0 {
		return amqp.NewError(amqp.PreconditionFailed, methodBasicConsume, "consumer prefetch count is not set for '%s'", describeQueue(q.name, q.vhost.name))
	}
	if c.noAck {
		return amqp.NewError(amqp.NotImplemented, methodBasicConsume, "automatic acknowledgement not supported by stream queues %s", describeQueue(q.name, q.vhost.name))
	}
	offsetArg := c.args["x-stream-offset"]
	spec, err := parseStreamOffset(offsetArg, time.Now())
	if err != nil {
		return streamOffsetError(methodBasicConsume, q.name, q.vhost.name, offsetArg)
	}
	track := ""
	if v, ok := c.args["x-stream-offset-tracking-name"]; ok {
		name, isStr := v.(string)
		if !isStr || name == "" || len(name) > maxTrackingNameLen {
			return amqp.NewError(amqp.PreconditionFailed, methodBasicConsume, "invalid arg 'x-stream-offset-tracking-name' for consumer: %v", v)
		}
		track = name
		if err := s.reserveTracking(name); err != nil {
			return amqp.NewError(amqp.PreconditionFailed, methodBasicConsume, "cannot track offsets as %q on %s: %v", name, describeQueue(q.name, q.vhost.name), err)
		}
	}
	from, ferr := s.startOffset(spec, track)
	if ferr != nil {
		return amqp.NewError(amqp.InternalError, methodBasicConsume, "stream %s: %v", describeQueue(q.name, q.vhost.name), ferr)
	}
	sc := &streamConsumer{s: s, c: c, prefetch: int32(c.prefetch), track: track,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	sc.offset.Store(from)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return amqp.NewError(amqp.NotFound, methodBasicConsume, "no %s", describeQueue(q.name, q.vhost.name))
	}
	s.consumers[c] = sc
	s.wg.Add(1)
	s.mu.Unlock()
	q.touch()
	ok() // consume-ok goes out before the reader goroutine can deliver
	go sc.run()
	return nil
}

// startOffset resolves where a new consumer starts reading.
func (s *stream) startOffset(spec streamStart, track string) (uint64, error) {
	if track != "" {
		if off, ok := s.tracked(track); ok {
			return off + 1, nil
		}
	}
	st := s.log.Stats()
	switch spec.kind {
	case streamStartFirst:
		return st.FirstOffset, nil
	case streamStartLast:
		return s.lastOffset()
	case streamStartOffset:
		return min(max(spec.offset, st.FirstOffset), st.NextOffset), nil
	case streamStartTime:
		return s.log.OffsetAtTime(spec.at.UnixNano())
	}
	return st.NextOffset, nil
}

// cancel stops stream consumer c and waits for its reader, so no delivery
// follows the cancel-ok. A tracking consumer's offset is written to the log
// first (if it changed), so a confirm for any later publish to the stream
// proves it durable. A stream does not auto-delete.
func (h streamQueue) cancel(c *consumer) bool {
	s := h.q.vhost.streams.get(h.q)
	if s == nil {
		return false
	}
	s.mu.Lock()
	sc := s.consumers[c]
	delete(s.consumers, c)
	s.mu.Unlock()
	if sc == nil {
		return false
	}
	sc.stopOnce.Do(func() { close(sc.stop) })
	<-sc.done
	if sc.track != "" {
		s.snapshot(false)
	}
	return false
}

// run is the consumer's reader goroutine: it reads with its own Iterator while
// it has prefetch credit and waits for appends at the tail.
func (sc *streamConsumer) run() {
	s := sc.s
	defer s.wg.Done()
	defer close(sc.done)
	defer func() {
		s.mu.Lock()
		if s.consumers[sc.c] == sc {
			delete(s.consumers, sc.c)
		}
		s.mu.Unlock()
	}()
	poll := time.NewTicker(streamPollEvery)
	defer poll.Stop()
	it := s.log.Iterate(sc.offset.Load())
	for {
		if sc.inflight.Load() >= sc.prefetch {
			if !sc.wait(poll) {
				return
			}
			continue
		}
		if it.Next() {
			if it.Record().Flags&streamFlagTracking != 0 {
				sc.offset.Store(it.Loc().Offset + 1) // never delivered
				continue
			}
			if !sc.deliver(it.Loc().Offset, it.Record()) {
				return
			}
			continue
		}
		if err := it.Err(); err != nil {
			s.logger.Error("stream consumer cannot read; cancelling it", "consumer", sc.c.tag, "err", err)
			sc.c.sink.cancelled(sc.c)
			return
		}
		if !sc.wait(poll) {
			return
		}
	}
}

// wait blocks until an append or ack, and reports false when the consumer must stop.
func (sc *streamConsumer) wait(poll *time.Ticker) bool {
	select {
	case <-sc.wake:
		return true
	case <-poll.C:
		return sc.subscribed()
	case <-sc.stop:
		return false
	case <-sc.s.halt:
		return false
	}
}

// subscribed reports whether the consumer is still subscribed on its channel.
func (sc *streamConsumer) subscribed() bool { return sc.c.sink.subscribed(sc.c) }

// deliver sends the record at off with an x-stream-offset header, its offset
// as the delivery id; false when the consumer is no longer subscribed. The
// cancel paths stop this reader (streamQueue.cancel) before the channel takes
// its unacked deliveries, so none is left behind.
func (sc *streamConsumer) deliver(off uint64, rec msgstore.Record) bool {
	c := sc.c
	if !sc.subscribed() {
		return false
	}
	props := streamDeliveryProps(rec.Properties, off, sc.s.logger)
	msg := &Message{Exchange: string(rec.Exchange), RoutingKey: string(rec.RoutingKey), Body: rec.Body}
	c.sink.charge(c) // given back when the delivery is settled
	sc.inflight.Add(1)
	c.sink.deliver(c, outgoing{id: off, msg: msg, props: props})
	sc.offset.Store(off + 1)
	sc.s.q.stats.delivered.inc()
	return true
}

// streamDeliveryProps returns raw with header x-stream-offset set to off.
func streamDeliveryProps(raw []byte, off uint64, logger interface{ Warn(string, ...any) }) []byte {
	var p amqp.Properties
	// A record not written by a publish may have no property list at all.
	if len(raw) > 0 {
		if err := p.Decode(raw); err != nil {
			// The properties were accepted at publish; keep them, skip the header.
			logger.Warn("stream record with undecodable properties", "offset", off, "err", err)
			return raw
		}
	}
	if p.Headers == nil { // the decoded table is ours: no copy needed
		p.Headers = make(amqp.Table, 1)
	}
	p.Headers["x-stream-offset"] = int64(off)
	p.Flags |= amqp.FlagHeaders
	return p.AppendTo(nil)
}

// settle returns credit for settled stream deliveries and records acked
// offsets (the delivery ids) for tracking consumers. Nothing is removed from
// the stream.
func (h streamQueue) settle(ds []delivery, kind settleKind) {
	q := h.q
	s := q.vhost.streams.get(q)
	if s == nil {
		return
	}
	if kind == settleAck {
		q.stats.acked.add(len(ds))
	}
	s.mu.Lock()
	var woke []*streamConsumer
	moved := false
	for i := range ds {
		sc := s.consumers[ds[i].c]
		if sc == nil {
			continue
		}
		sc.inflight.Add(-1)
		if len(woke) == 0 || woke[len(woke)-1] != sc {
			woke = append(woke, sc)
		}
		if kind == settleAck && sc.track != "" && s.noteAckLocked(sc.track, ds[i].id) {
			moved = true
		}
	}
	s.mu.Unlock()
	for _, sc := range woke {
		sc.signal()
	}
	if moved {
		s.kickTracking()
	}
}
