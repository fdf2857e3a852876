package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// reconnectPause is the wait after every node refused a reconnect,
	// before the next round: a cluster electing a new leader refuses for
	// a while, and a tight loop would only load the survivors.
	reconnectPause = 100 * time.Millisecond
	// reconnectTimeout bounds how long a worker tries to reconnect before
	// its failure ends the run.
	reconnectTimeout = 60 * time.Second
)

// failover is the state of a run with Config.FailoverURLs: which nodes
// workers reconnect to, and, with Config.KillPID, when the kill happened
// and when the first confirm and the first delivery of a message published
// after it arrived. Its fields are atomics shared by every worker and the
// reporter.
type failover struct {
	urls []string // Config.URL, then Config.FailoverURLs

	killAt        atomic.Int64 // Unix ns just after the SIGKILL; 0 before
	firstConfirm  atomic.Int64 // Unix ns; 0 until then
	firstDelivery atomic.Int64
	reconnects    atomic.Uint64
	// inDoubt counts messages unconfirmed when their publisher's
	// connection failed: the broker may or may not have them.
	inDoubt atomic.Uint64
}

// newFailover returns the failover state of cfg, nil when it asks for none.
func newFailover(cfg *Config) *failover {
	if len(cfg.FailoverURLs) == 0 && cfg.KillPID == 0 {
		return nil
	}
	return &failover{urls: append([]string{cfg.URL}, cfg.FailoverURLs...)}
}

// killed returns the kill time, 0 while the kill has not happened.
func (f *failover) killed() int64 {
	if f == nil {
		return 0
	}
	return f.killAt.Load()
}

// sawConfirm records the arrival of a confirm of a post-kill message.
func (f *failover) sawConfirm(now int64) { f.firstConfirm.CompareAndSwap(0, now) }

// sawDelivery records the arrival of a post-kill message.
func (f *failover) sawDelivery(now int64) { f.firstDelivery.CompareAndSwap(0, now) }

// FailoverSummary is what a run with --kill-pid or --failover-urls found.
type FailoverSummary struct {
	// KilledPID is Config.KillPID; 0 when nothing was killed.
	KilledPID int `json:"killed_pid,omitempty"`
	// KillAtSeconds is when the kill happened, from the start of the run.
	KillAtSeconds float64 `json:"kill_at_seconds,omitempty"`
	// ConfirmAfterKillMS is from the kill to the first confirm of a message
	// published after it; nil if none came.
	ConfirmAfterKillMS *float64 `json:"confirm_after_kill_ms"`
	// DeliveryAfterKillMS is from the kill to the first delivery of a
	// message published after it; nil if none came.
	DeliveryAfterKillMS *float64 `json:"delivery_after_kill_ms"`
	// Reconnects counts worker reconnections.
	Reconnects uint64 `json:"reconnects"`
	// InDoubt counts messages unconfirmed when their connection failed.
	InDoubt uint64 `json:"in_doubt"`
}

// summary builds the FailoverSummary of a run that started at start.
func (f *failover) summary(cfg *Config, start time.Time) *FailoverSummary {
	if f == nil {
		return nil
	}
	s := &FailoverSummary{Reconnects: f.reconnects.Load(), InDoubt: f.inDoubt.Load()}
	k := f.killAt.Load()
	if k == 0 {
		return s
	}
	s.KilledPID = cfg.KillPID
	s.KillAtSeconds = time.Unix(0, k).Sub(start).Seconds()
	since := func(t int64) *float64 {
		if t == 0 {
			return nil
		}
		ms := float64(t-k) / 1e6
		return &ms
	}
	s.ConfirmAfterKillMS = since(f.firstConfirm.Load())
	s.DeliveryAfterKillMS = since(f.firstDelivery.Load())
	return s
}

// startKiller starts the goroutine that sends SIGKILL to Config.KillPID
// KillAfter after now, unless ctx ends first. The caller waits on wg.
func (r *runner) startKiller(ctx context.Context, wg *sync.WaitGroup) {
	if r.cfg.KillPID <= 0 {
		return
	}
	wg.Add(1)
	go func() { // owned by execute; ends at the kill or when the run ends
		defer wg.Done()
		t := time.NewTimer(r.cfg.KillAfter)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := syscall.Kill(r.cfg.KillPID, syscall.SIGKILL); err != nil {
			r.fail(fmt.Errorf("%w: kill -9 %d: %w", ErrWorker, r.cfg.KillPID, err))
			return
		}
		// Stored after the signal: a message stamped before it is never
		// taken for one published after the kill.
		r.fo.killAt.Store(time.Now().UnixNano())
	}()
}

// resilient wraps a worker's run so that, with failover URLs, a failed
// connection is replaced by one to another node (reopen) and the worker
// goes on. Without them it returns run as is.
func (r *runner) resilient(id int, run func(context.Context) error, reopen func(url string) error) func(context.Context) error {
	if r.fo == nil || len(r.fo.urls) < 2 {
		return run
	}
	return func(ctx context.Context) error {
		for attempt := 0; ; attempt++ {
			err := run(ctx)
			if err == nil || ctx.Err() != nil {
				return err
			}
			r.fo.reconnects.Add(1)
			if rerr := r.reconnect(ctx, id+attempt, reopen); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
	}
}

// reconnect tries the failover URLs in turn, starting at one that depends
// on seed so that workers spread over the nodes, until reopen succeeds,
// ctx ends or reconnectTimeout passes. The first URL (the node the run
// started on, typically the one killed) is tried last.
func (r *runner) reconnect(ctx context.Context, seed int, reopen func(url string) error) error {
	urls := r.fo.urls
	deadline := time.Now().Add(reconnectTimeout)
	var last error
	for time.Now().Before(deadline) {
		for i := range len(urls) - 1 {
			u := urls[1+(seed+i)%(len(urls)-1)]
			if last = reopen(u); last == nil {
				return nil
			}
			if ctx.Err() != nil {
				return nil
			}
		}
		if last = reopen(urls[0]); last == nil {
			return nil
		}
		if sleepCtx(ctx, reconnectPause) != nil {
			return nil
		}
	}
	return fmt.Errorf("%w: no node took the reconnect for %v: %w", ErrConnect, reconnectTimeout, last)
}

// reopen replaces the publisher's failed connection with one to url. The
// messages it left unconfirmed count as in doubt. Fast client only.
func (p *publisher) reopen(url string) error {
	if old := p.fast; old != nil && old.track != nil {
		old.mu.Lock()
		p.fo.inDoubt.Add(uint64(old.track.outstanding))
		old.track = newConfirmTracker(p.cfg.Confirm) // counted once, even if this reopen fails
		old.mu.Unlock()
	}
	p.url = url
	if err := openFastPublisher(p, fmt.Sprintf("publisher %d", p.id)); err != nil {
		return err
	}
	// Every message of a connection opened after the kill is post-kill.
	p.killTag.Store(0)
	if p.fo.killed() != 0 {
		p.killTag.Store(1)
	}
	return nil
}

// reopen replaces the consumer's failed connection with one to url and
// subscribes again. Fast client only.
func (c *consumer) reopen(url string) error {
	c.url = url
	return openFastConsumer(c, fmt.Sprintf("consumer %d", c.id), c.queue)
}

// noteKill is called by the publisher for every message it encodes, with
// the tag that message gets: the first one stamped after the kill marks
// where post-kill confirms start.
func (p *publisher) noteKill(ts int64, tag uint64) {
	if k := p.fo.killed(); k != 0 && ts >= k && p.killTag.Load() == 0 {
		p.killTag.Store(tag)
	}
}

// noteConfirm is called by the publisher's reader for an ack up to tag.
func (p *publisher) noteConfirm(tag uint64, now int64) {
	if kt := p.killTag.Load(); kt != 0 && tag >= kt {
		p.fo.sawConfirm(now)
	}
}

// writeText prints the failover lines of a summary; nothing for nil.
func (s *FailoverSummary) writeText(w io.Writer) error {
	if s == nil {
		return nil
	}
	ms := func(v *float64) string {
		if v == nil {
			return "none"
		}
		return fmt.Sprintf("%.0f ms", *v)
	}
	var err error
	if s.KilledPID != 0 {
		_, err = fmt.Fprintf(w, "  failover     kill -9 %d at %.1f s; first confirm after %s, first delivery after %s\n",
			s.KilledPID, s.KillAtSeconds, ms(s.ConfirmAfterKillMS), ms(s.DeliveryAfterKillMS))
	}
	if err == nil {
		_, err = fmt.Fprintf(w, "  reconnects   %d (%d messages in doubt)\n", s.Reconnects, s.InDoubt)
	}
	if err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
