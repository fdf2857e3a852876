package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps advance it instantly.
type fakeClock struct {
	t      time.Time
	sleeps int
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.sleeps++
	c.t = c.t.Add(d)
	return ctx.Err()
}

func fakeLimiter(rate float64) (*rateLimiter, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_000_000, 0)}
	l := newRateLimiter(rate)
	l.now, l.sleep = c.now, c.sleep
	return l, c
}

func TestRateLimiterPaces(t *testing.T) {
	for _, rate := range []float64{1, 3, 2000, 33_333, 1e6} {
		l, c := fakeLimiter(rate)
		start := c.t
		const n = 20_001
		for range n {
			if err := l.wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		// The first message is due at once, so n messages take n-1 periods,
		// give or take one skipped short sleep.
		want := time.Duration(float64(n-1) / rate * 1e9)
		got := c.t.Sub(start)
		if d := got - want; d < -rateMinSleep || d > time.Duration(1e9/rate)+rateMinSleep {
			t.Errorf("rate %v: %d messages took %v, want %v", rate, n, got, want)
		}
	}
}

func TestRateLimiterSkipsShortSleeps(t *testing.T) {
	l, c := fakeLimiter(1e6) // 1 µs apart: most waits are below rateMinSleep
	for range 100_000 {
		if err := l.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// One sleep per rateMinSleep worth of messages at most.
	if max := int(100_000 * time.Microsecond / rateMinSleep); c.sleeps > max {
		t.Fatalf("%d sleeps for 100,000 messages at 1M/s, want at most %d", c.sleeps, max)
	}
}

func TestRateLimiterForfeitsMissedSlotsAfterStall(t *testing.T) {
	l, c := fakeLimiter(1000)
	ctx := context.Background()
	for range 100 {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.t = c.t.Add(time.Second) // the publisher was blocked for a second
	afterStall := c.t
	const n = 1000
	for range n {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Catching up would send the missed 1,000 messages at once; instead the
	// next 1,000 take a second again.
	if got := c.t.Sub(afterStall); got < 990*time.Millisecond {
		t.Fatalf("%d messages after a stall took %v: the limiter caught up in a burst", n, got)
	}
}

func TestRateLimiterSmallLagIsMadeUp(t *testing.T) {
	l, c := fakeLimiter(1000)
	ctx := context.Background()
	for range 100 {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.t = c.t.Add(50 * time.Millisecond) // a timer overshoot within rateSlack
	sleepsBefore := c.sleeps
	for range 40 {
		if err := l.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c.sleeps != sleepsBefore {
		t.Fatalf("limiter slept %d times while 50 ms behind schedule; want it to catch up", c.sleeps-sleepsBefore)
	}
}

func TestRateLimiterUnlimited(t *testing.T) {
	if l := newRateLimiter(0); l != nil {
		t.Fatalf("rate 0 gave a limiter %+v, want nil (unlimited)", l)
	}
	var l *rateLimiter
	if err := l.wait(context.Background()); err != nil {
		t.Fatalf("unlimited wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("unlimited wait on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestRateLimiterCancelInterruptsSleep(t *testing.T) {
	l := newRateLimiter(0.001) // one message every 1,000 s
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.wait(ctx); err != nil {
		t.Fatalf("first message should be due at once: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- l.wait(ctx) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("wait = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return after cancel")
	}
}

func TestRateLimiterRealClockNeverFaster(t *testing.T) {
	l := newRateLimiter(2000)
	start := time.Now()
	for range 201 {
		if err := l.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// 200 periods of 500 µs; the last short wait may be skipped.
	if got := time.Since(start); got < 100*time.Millisecond-rateMinSleep {
		t.Fatalf("201 messages at 2,000/s took %v, want at least 100 ms", got)
	}
}
