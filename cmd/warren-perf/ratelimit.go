package main

import (
	"context"
	"time"
)

const (
	// rateSlack is how far a publisher may fall behind its schedule (a
	// stalled broker, a slow confirm window) before the missed slots are
	// forfeited. Without it a one-second stall would be followed by a
	// one-second burst at unlimited speed, which is not the asked-for rate.
	rateSlack = 100 * time.Millisecond
	// rateMinSleep is the shortest wait worth a timer. Shorter waits are
	// skipped; the absolute schedule makes up for them on a later message,
	// so the average rate stays exact even when timers are coarse.
	rateMinSleep = 50 * time.Microsecond
)

// rateLimiter paces one publisher to a fixed number of messages per second
// on an absolute schedule: message n is due at start + n/rate, so timer
// overshoot on one message is made up by not sleeping before the next.
// A nil *rateLimiter means unlimited. It is used by one goroutine only.
type rateLimiter struct {
	period float64 // nanoseconds between messages
	start  time.Time
	n      uint64 // messages admitted since start
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
}

// newRateLimiter returns a limiter for rate messages per second, or nil
// (unlimited) if rate <= 0.
func newRateLimiter(rate float64) *rateLimiter {
	if rate <= 0 {
		return nil
	}
	return &rateLimiter{period: 1e9 / rate, now: time.Now, sleep: sleepCtx}
}

// wait blocks until the next message is due, or returns ctx's error if ctx
// ends first.
func (l *rateLimiter) wait(ctx context.Context) error {
	if d := l.delay(); d > 0 {
		return l.sleep(ctx, d)
	}
	return ctx.Err()
}

// delay admits the next message and returns how long to wait before
// sending it: 0 when it is due (or the wait is below rateMinSleep), and
// always 0 for a nil limiter. The fast publisher calls it instead of wait
// so that it can write out its buffered messages before it sleeps.
func (l *rateLimiter) delay() time.Duration {
	if l == nil {
		return 0
	}
	now := l.now()
	if l.start.IsZero() {
		l.start = now
	}
	due := l.start.Add(time.Duration(float64(l.n) * l.period))
	if now.Sub(due) > rateSlack {
		l.start, l.n, due = now, 0, now
	}
	l.n++
	if d := due.Sub(now); d >= rateMinSleep {
		return d
	}
	return 0
}

// sleepCtx sleeps for d or until ctx ends, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
