package main

// The fast client's publisher: messages are copied from a pre-encoded
// template into one reusable buffer and written many per syscall; a reader
// goroutine per connection parses confirms and broker notices.

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// fastFlushAt is the buffered size at which the publisher writes: large
// enough for hundreds of small messages per syscall, small enough to stay
// in cache. A message template at least this large is written straight
// from the template instead.
const fastFlushAt = 64 << 10

// confirmTracker knows which delivery tags of a publisher are unconfirmed,
// so that confirms with multiple=true (all tags up to N) and single ones in
// any order settle each message exactly once. Tags start at 1 and follow
// publish order, as confirm.select numbers them.
//
// Unsettled tags lie in [base, next); bit tag&mask of bits is set while tag
// is unsettled. The ring has four times the window's bits, and a tag is
// only reserved while next-base stays below the ring's size, so a tag's bit
// is never shared with another live tag.
type confirmTracker struct {
	window      int
	base        uint64 // every tag below base is settled
	next        uint64 // the tag of the next message to reserve
	outstanding int    // unsettled tags in [base, next)
	bits        []uint64
	mask        uint64
}

// newConfirmTracker returns a tracker for at most window unsettled tags.
func newConfirmTracker(window int) *confirmTracker {
	ring := uint64(64)
	if need := uint64(window) * 4; need > ring {
		ring = 1 << bits.Len64(need-1)
	}
	return &confirmTracker{window: window, base: 1, next: 1, bits: make([]uint64, ring/64), mask: ring - 1}
}

// available is how many more tags may be reserved now.
func (t *confirmTracker) available() int {
	byCount := t.window - t.outstanding
	byRing := int(t.mask + 1 - (t.next - t.base))
	return max(min(byCount, byRing), 0)
}

func (t *confirmTracker) set(tag uint64)        { t.bits[(tag&t.mask)>>6] |= 1 << (tag & 63) }
func (t *confirmTracker) isSet(tag uint64) bool { return t.bits[(tag&t.mask)>>6]&(1<<(tag&63)) != 0 }
func (t *confirmTracker) clear(tag uint64)      { t.bits[(tag&t.mask)>>6] &^= 1 << (tag & 63) }

// reserve marks the next n tags unsettled; n must not exceed available.
func (t *confirmTracker) reserve(n int) {
	for range n {
		t.set(t.next)
		t.next++
	}
	t.outstanding += n
}

// unreserve takes back the last n reserved tags, which were never
// published.
func (t *confirmTracker) unreserve(n int) {
	for range n {
		t.next--
		t.clear(t.next)
	}
	t.outstanding -= n
	if t.base > t.next {
		t.base = t.next
	}
}

// settle records a basic.ack or basic.nack for tag and returns how many
// unsettled tags it settled. Tags never published, or settled already, are
// ignored: a broker's duplicate is not worth failing a run for. Tag 0 with
// multiple settles everything outstanding, as the protocol defines.
func (t *confirmTracker) settle(tag uint64, multiple bool) int {
	if t.next == t.base {
		return 0
	}
	last := t.next - 1
	n := 0
	if multiple {
		if tag == 0 || tag > last {
			tag = last
		}
		for ; t.base <= tag; t.base++ {
			if t.isSet(t.base) {
				t.clear(t.base)
				n++
			}
		}
	} else if tag >= t.base && tag <= last && t.isSet(tag) {
		t.clear(tag)
		n = 1
	}
	for t.base < t.next && !t.isSet(t.base) {
		t.base++
	}
	t.outstanding -= n
	return n
}

// fastPub is the fast client's state of one publisher.
//
// Lock order: mu is a leaf; it is never held during I/O.
type fastPub struct {
	conn *fastConn
	tmpl *publishTemplate
	// buf is the write buffer; only the publishing goroutine touches it.
	buf []byte

	// mu guards track, waiting and chErr.
	mu    sync.Mutex
	track *confirmTracker // nil without confirms
	// waiting is set by the publisher before it blocks on wake; the
	// reader clears it when it sends the wake-up.
	waiting bool
	// chErr is the broker's channel.close or connection.close, if it sent
	// one. chDead is set with it and when the reader ends, for the
	// publisher's per-batch check without the lock.
	chErr  error
	chDead atomic.Bool
	// wake (capacity 1) tells a waiting publisher that credits, an
	// unblock or a channel close arrived.
	wake chan struct{}

	// dead is closed when the reader goroutine ends; deadErr (written
	// before) is why, nil for the close-ok of the publisher's own close.
	dead    chan struct{}
	deadErr error
}

// openFastPublisher connects publisher p with the fast client and, with
// confirms, puts its channel in confirm mode.
func openFastPublisher(p *publisher, role string) error {
	fc, err := dialFast(p.url, role)
	if err != nil {
		return err
	}
	tmpl, err := newPublishTemplate(fastChannel, p.exchange, p.key, p.cfg.Size, p.cfg.Persistent, fc.frameMax)
	if err != nil {
		return errors.Join(fmt.Errorf("%w (%s): %w", ErrConnect, role, err), fc.closeAsReader())
	}
	f := &fastPub{conn: fc, tmpl: tmpl, wake: make(chan struct{}, 1), dead: make(chan struct{})}
	if len(tmpl.frames) < fastFlushAt {
		f.buf = make([]byte, 0, fastFlushAt+len(tmpl.frames))
	}
	if p.cfg.Confirm > 0 {
		if err := fc.call(mConfirmSelect, func(b []byte) []byte { return append(b, 0) }, mConfirmSelectOk); err != nil {
			return errors.Join(fmt.Errorf("%w (%s): confirm.select: %w", ErrConnect, role, err), fc.closeAsReader())
		}
		f.track = newConfirmTracker(p.cfg.Confirm)
	}
	fc.onUnblocked = f.notify
	p.fastMu.Lock()
	p.fast = f
	p.fastMu.Unlock()
	return nil
}

// notify wakes the publisher if it waits.
func (f *fastPub) notify() {
	f.mu.Lock()
	w := f.waiting
	f.waiting = false
	f.mu.Unlock()
	if w {
		select {
		case f.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// runFast is run for the fast client.
func (p *publisher) runFast(ctx context.Context) error {
	f := p.fast
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned by runFast; ends at close-ok or when the socket fails or closes
		defer wg.Done()
		f.deadErr = p.readLoop()
		close(f.dead)
		// Whatever ended the reader, publishing on is pointless.
		f.chDead.Store(true)
		f.notify()
	}()
	var stop atomic.Bool // ctx ended: checked per message, cheaper than ctx.Err
	unreg := context.AfterFunc(ctx, func() { stop.Store(true) })
	err := p.fastPublishLoop(ctx, &stop)
	unreg()
	if err == nil && f.track != nil {
		err = p.fastDrain()
	}
	if err == nil && p.cfg.PMessages > 0 && p.published.Load() >= p.cfg.PMessages {
		p.finishedAt.Store(time.Now().UnixNano())
		p.finished.Store(true)
	}
	// A connection that failed before the close is the run's error; one
	// that fails during it is the close's.
	var early error
	select {
	case <-f.dead:
		early = f.deadErr
	default:
	}
	cerr := p.fastClose()
	wg.Wait()
	if err == nil {
		f.mu.Lock()
		chErr := f.chErr
		f.mu.Unlock()
		switch {
		case chErr != nil:
			// Without confirms a publisher can finish before it hears of
			// the refusal; the broker's reason still fails the run.
			err = fmt.Errorf("%w: publisher %d: channel closed: %w", ErrWorker, p.id, chErr)
		case early != nil && !f.conn.aborted.Load():
			err = fmt.Errorf("%w: publisher %d: connection failed: %w", ErrWorker, p.id, early)
		}
	}
	return errors.Join(err, cerr)
}

// fastClose closes the connection: connection.close, then the reader ends
// at close-ok or at the close deadline.
func (p *publisher) fastClose() error {
	f := p.fast
	wait, err := f.conn.beginClose()
	if wait {
		<-f.dead // bounded: beginClose set the read deadline
		if f.deadErr != nil {
			var sce *ServerCloseError
			if !errors.As(f.deadErr, &sce) {
				err = f.conn.closeErr(f.deadErr)
			}
		}
	}
	return errors.Join(err, f.conn.finishClose())
}

// readLoop parses what the broker sends a publisher: confirms, and what
// control handles. It returns nil at close-ok, else why it stopped.
func (p *publisher) readLoop() error {
	f := p.fast
	fc := f.conn
	for {
		settled := false
		for {
			fr, ok, err := fc.next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			handled, err := fc.control(fr)
			var sce *ServerCloseError
			switch {
			case errors.Is(err, errCloseOK):
				return nil
			case errors.As(err, &sce) && !sce.Connection:
				// The channel is gone but the connection lives on:
				// keep reading until the close handshake ends.
				f.mu.Lock()
				f.chErr = err
				f.mu.Unlock()
				f.chDead.Store(true)
				settled = true
				continue
			case errors.As(err, &sce):
				// connection.close: the reader's exit tells the
				// publisher; chErr makes it the run's error.
				f.mu.Lock()
				f.chErr = err
				f.mu.Unlock()
				return err
			case err != nil:
				return err
			case handled:
				continue
			}
			if err := p.onConfirm(fr); err != nil {
				return err
			}
			settled = true
		}
		if settled {
			f.notify()
		}
		if err := fc.fill(); err != nil {
			return fmt.Errorf("read: %w", err)
		}
	}
}

// onConfirm handles basic.ack and basic.nack; anything else on the
// channel is a protocol error.
func (p *publisher) onConfirm(fr frame) error {
	f := p.fast
	k, r, err := fr.method()
	if err != nil {
		return err
	}
	if fr.channel != fastChannel || (k != mBasicAck && k != mBasicNack) || f.track == nil {
		return unexpected(fr, "on a publisher's connection")
	}
	tag, multiple, err := parseConfirm(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	n := f.track.settle(tag, multiple)
	f.mu.Unlock()
	if k == mBasicAck {
		p.confirmed.Add(uint64(n))
		if p.fo != nil && n > 0 {
			p.noteConfirm(tag, time.Now().UnixNano())
		}
	} else {
		p.nacked.Add(uint64(n))
	}
	return nil
}

// channelError is the error a publisher returns once the channel or the
// connection is gone.
func (p *publisher) channelError() error {
	f := p.fast
	f.mu.Lock()
	err := f.chErr
	f.mu.Unlock()
	if err == nil {
		select {
		case <-f.dead:
			err = f.deadErr
		default:
		}
	}
	if err == nil {
		err = errors.New("connection closed")
	}
	return fmt.Errorf("%w: publisher %d: channel closed: %w", ErrWorker, p.id, err)
}

// fastPublishLoop publishes until stop is set or PMessages are sent. It
// returns nil when it stops for either reason.
func (p *publisher) fastPublishLoop(ctx context.Context, stop *atomic.Bool) error {
	f := p.fast
	limiter := newRateLimiter(p.cfg.Rate)
	direct := f.buf == nil // the template is written as is, one message per write
	var sent uint64        // messages encoded (written or in buf)
	var pending uint64     // messages in buf
	credits := 0           // reserved window slots not yet used
	defer func() {
		if credits > 0 {
			f.mu.Lock()
			f.track.unreserve(credits)
			f.mu.Unlock()
		}
	}()
	flush := func() error {
		if len(f.buf) == 0 {
			return nil
		}
		if f.chDead.Load() {
			return p.channelError()
		}
		err := f.conn.write(f.buf)
		f.buf = f.buf[:0]
		if err != nil {
			return p.writeFailed(ctx, err)
		}
		p.published.Add(pending)
		pending = 0
		return nil
	}
	for p.cfg.PMessages == 0 || sent < p.cfg.PMessages {
		if stop.Load() {
			break
		}
		if d := limiter.delay(); d > 0 {
			// Flush before every wait, so that no message waits with it.
			if err := flush(); err != nil {
				return err
			}
			if sleepCtx(ctx, d) != nil {
				break
			}
		}
		if (f.track != nil && credits == 0) || f.conn.blocked.Load() {
			n, stopped, err := p.acquire(ctx, flush)
			if err != nil {
				return err
			}
			if stopped {
				break
			}
			credits += n
		}
		ts := time.Now().UnixNano()
		if p.fo != nil && f.track != nil {
			// The publisher alone moves track.next (in acquire and
			// unreserve), so it reads it without mu.
			p.noteKill(ts, f.track.next-uint64(credits))
		}
		if direct {
			if f.chDead.Load() {
				return p.channelError()
			}
			f.tmpl.stamp(ts)
			if err := f.conn.write(f.tmpl.frames); err != nil {
				return p.writeFailed(ctx, err)
			}
			p.published.Add(1)
		} else {
			f.buf = f.tmpl.appendTo(f.buf, ts)
			pending++
		}
		sent++
		if f.track != nil {
			credits--
		}
		if len(f.buf) >= fastFlushAt {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// writeFailed turns a failed write into the publisher's error: the
// broker's reason if the reader heard one, nothing if the run was already
// stopping (the runner closes stuck sockets).
func (p *publisher) writeFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if p.fast.chDead.Load() {
		return p.channelError()
	}
	return fmt.Errorf("%w: publisher %d: publish: %w", ErrWorker, p.id, err)
}

// acquire waits until the connection is not blocked and, with confirms,
// window slots are free, and reserves all free slots. Before waiting it
// flushes the buffer (unless blocked: a blocked broker is not to be
// written to), so that buffered messages can be confirmed. stopped is true
// when ctx ended.
func (p *publisher) acquire(ctx context.Context, flush func() error) (n int, stopped bool, err error) {
	f := p.fast
	flushed := false
	for {
		f.mu.Lock()
		// Loaded under mu: the reader stores blocked before it takes mu
		// in notify, so an unblock is either seen here or wakes us.
		blocked := f.conn.blocked.Load()
		if f.chErr != nil {
			f.mu.Unlock()
			return 0, false, p.channelError()
		}
		if !blocked && f.track != nil {
			n = f.track.available()
			f.track.reserve(n)
		}
		ready := !blocked && (f.track == nil || n > 0)
		f.waiting = !ready
		f.mu.Unlock()
		if ready {
			return n, false, nil
		}
		if !blocked && !flushed {
			if err := flush(); err != nil {
				return 0, false, err
			}
			flushed = true
		}
		select {
		case <-f.wake:
		case <-ctx.Done():
			return 0, true, nil
		case <-f.dead:
			if ctx.Err() != nil {
				return 0, true, nil
			}
			return 0, false, p.channelError()
		}
	}
}

// fastDrain waits until every published message is confirmed or nacked,
// for at most Config.DrainTimeout.
func (p *publisher) fastDrain() error {
	f := p.fast
	t := time.NewTimer(p.cfg.DrainTimeout)
	defer t.Stop()
	for {
		f.mu.Lock()
		out, chErr := f.track.outstanding, f.chErr
		f.waiting = out > 0 && chErr == nil
		f.mu.Unlock()
		if out == 0 {
			return nil
		}
		if chErr != nil {
			return fmt.Errorf("%w: publisher %d: channel closed with %d confirms outstanding: %w", ErrWorker, p.id, out, chErr)
		}
		select {
		case <-f.wake:
		case <-f.dead:
			return fmt.Errorf("%w: publisher %d: connection closed with %d confirms outstanding: %w",
				ErrWorker, p.id, out, p.channelError())
		case <-t.C:
			return fmt.Errorf("%w: publisher %d: %d after waiting %v", ErrConfirmTimeout, p.id, out, p.cfg.DrainTimeout)
		}
	}
}
