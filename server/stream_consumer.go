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

// consumeStream implements basic.consume on stream queue q.
func (ch *channel) consumeStream(q *Queue, m *amqp.BasicConsume, tag string, prio int64) *amqp.Error {
	s := q.vhost.streams.get(q)
	if s == nil {
		return amqp.NewError(amqp.NotFound, m.ID(), "no %s", describeQueue(q.name, q.vhost.name))
	}
	// RabbitMQ 3.10's checks, in its order (rabbit_stream_queue:consume),
	// and its words, checked against a running node.
	if ch.consumerPrefetch == 0 {
		return amqp.NewError(amqp.PreconditionFailed, m.ID(), "consumer prefetch count is not set for '%s'", describeQueue(q.name, q.vhost.name))
	}
	if m.NoAck {
		return amqp.NewError(amqp.NotImplemented, m.ID(), "automatic acknowledgement not supported by stream queues %s", describeQueue(q.name, q.vhost.name))
	}
	offsetArg := m.Arguments["x-stream-offset"]
	spec, err := parseStreamOffset(offsetArg, time.Now())
	if err != nil {
		return streamOffsetError(m.ID(), q.name, q.vhost.name, offsetArg)
	}
	track := ""
	if v, ok := m.Arguments["x-stream-offset-tracking-name"]; ok {
		name, isStr := v.(string)
		if !isStr || name == "" || len(name) > maxTrackingNameLen {
			return amqp.NewError(amqp.PreconditionFailed, m.ID(), "invalid arg 'x-stream-offset-tracking-name' for consumer: %v", v)
		}
		track = name
		if err := s.reserveTracking(name); err != nil {
			return amqp.NewError(amqp.PreconditionFailed, m.ID(), "cannot track offsets as %q on %s: %v", name, describeQueue(q.name, q.vhost.name), err)
		}
	}
	from, ferr := s.startOffset(spec, track)
	if ferr != nil {
		return amqp.NewError(amqp.InternalError, m.ID(), "stream %s: %v", describeQueue(q.name, q.vhost.name), ferr)
	}
	c := &consumer{tag: tag, ch: ch, q: q, prefetch: ch.consumerPrefetch, args: m.Arguments, priority: prio}
	sc := &streamConsumer{s: s, c: c, prefetch: int32(c.prefetch), track: track,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	sc.offset.Store(from)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return amqp.NewError(amqp.NotFound, m.ID(), "no %s", describeQueue(q.name, q.vhost.name))
	}
	s.consumers[c] = sc
	s.wg.Add(1)
	s.mu.Unlock()
	ch.cmu.Lock()
	ch.consumers[tag] = c
	ch.cmu.Unlock()
	q.touch()
	// consume-ok goes out before the reader goroutine can deliver.
	ch.reply(m.Nowait, &amqp.BasicConsumeOk{ConsumerTag: tag})
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

// cancelStream stops stream consumer c and waits for its reader, so no
// delivery follows the cancel-ok. A tracking consumer's offset is written to
// the log first (if it changed), so a confirm for any later publish to the
// stream proves it durable.
func (ch *channel) cancelStream(c *consumer) {
	s := c.q.vhost.streams.get(c.q)
	if s == nil {
		return
	}
	s.mu.Lock()
	sc := s.consumers[c]
	delete(s.consumers, c)
	s.mu.Unlock()
	if sc == nil {
		return
	}
	sc.stopOnce.Do(func() { close(sc.stop) })
	<-sc.done
	if sc.track != "" {
		s.snapshot(false)
	}
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
			sc.c.ch.serverCancel(sc.c)
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

// subscribed reports whether the consumer is still registered on its channel.
func (sc *streamConsumer) subscribed() bool {
	ch := sc.c.ch
	ch.cmu.Lock()
	defer ch.cmu.Unlock()
	return ch.consumers[sc.c.tag] == sc.c
}

// deliver sends the record at off with an x-stream-offset header; false when
// the consumer is no longer subscribed. Subscription is checked under umu so
// a channel shutdown (which clears consumers, then takes unacked under umu)
// either sees this delivery in unacked or makes us skip it.
func (sc *streamConsumer) deliver(off uint64, rec msgstore.Record) bool {
	c, ch := sc.c, sc.c.ch
	props := streamDeliveryProps(rec.Properties, off, sc.s.logger)
	msg := &Message{Exchange: string(rec.Exchange), RoutingKey: string(rec.RoutingKey)}
	o := ch.conn.out
	ch.umu.Lock()
	if !sc.subscribed() {
		ch.umu.Unlock()
		return false
	}
	ch.nextTag++
	tag := ch.nextTag
	ch.unacked.push(delivery{tag: tag, q: c.q, c: c, m: queued{msg: msg, seq: off}, at: ch.conn.srv.clock()})
	ch.globalUnacked.Add(1) // given back by releaseGlobal on settle
	sc.inflight.Add(1)
	d := amqp.BasicDeliver{ConsumerTag: c.tag, DeliveryTag: tag, Exchange: msg.Exchange, RoutingKey: msg.RoutingKey}
	o.mu.Lock()
	if start, ok := o.beginMethodLocked(ch.id); ok {
		o.buf = d.AppendTo(o.buf)
		o.endWithContentLocked(start, ch.id, ch.conn.frameMax, props, rec.Body)
	}
	o.mu.Unlock()
	ch.umu.Unlock()
	o.signal()
	sc.offset.Store(off + 1)
	ch.stats.delivered(false, false)
	c.q.stats.delivered.inc()
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

// settleStream returns credit for settled stream deliveries and records acked
// offsets for tracking consumers. Nothing is removed from the stream.
func (ch *channel) settleStream(ds []delivery, kind settleKind) {
	q := ds[0].q
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
		if kind == settleAck && sc.track != "" && s.noteAckLocked(sc.track, ds[i].m.seq) {
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

// hasStreamDelivery reports whether ds holds a delivery from a stream.
func hasStreamDelivery(ds []delivery) bool {
	for i := range ds {
		if ds[i].q.isStream() {
			return true
		}
	}
	return false
}
