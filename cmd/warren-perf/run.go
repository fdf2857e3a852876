package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// goalPoll is how often the reporter checks whether message counts are
	// reached. The measured period ends at the last worker's own finish
	// time, not at the poll, so this only delays the exit.
	goalPoll = 10 * time.Millisecond
	// stopGrace is how long workers get to stop (publishers with confirms
	// get the drain timeout on top) before the sockets of those that did not
	// (a publish blocked by a broker's flow control) are closed under them.
	stopGrace = 2 * time.Second
)

// run declares the topology cfg describes, runs its publishers and
// consumers until the duration passes, the message counts are reached or
// ctx ends, and returns the summary. Setup errors (ErrInvalidConfig,
// ErrConnect, ErrDeclare) come with an empty Summary; errors during the run
// come with the summary of what was done.
func run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	queues := cfg.queueNames()
	if err := setupTopology(&cfg, queues); err != nil {
		return Summary{}, err
	}
	sum, err := execute(ctx, &cfg, queues)
	if cfg.DeleteQueues {
		err = errors.Join(err, deleteTopology(cfg.setupURL(), "", queues))
	}
	return sum, err
}

// runner owns the workers of one run.
//
// Lock order: runner.errMu, consumer.mu, fastPub.mu, fastConn.wmu and
// fastConn.dlMu are leaves; none is held while taking another lock, and
// only wmu is held during I/O (the write it serialises).
type runner struct {
	cfg  *Config
	fo   *failover // nil without --failover-urls and --kill-pid
	pubs []*publisher
	cons []*consumer
	// pubGroup and conGroup run the publishers and the consumers. They are
	// stopped in that order, so consumers keep draining while publishers
	// wait for their confirms or are unblocked by the broker.
	pubGroup workerGroup
	conGroup workerGroup

	cancel context.CancelFunc // ends the run (the reporter's context)

	errMu sync.Mutex
	errs  []error // at most one per worker
	// progressErr is the first failed progress write; the reporter owns it.
	progressErr error
}

// workerGroup is a set of worker goroutines that are stopped together.
type workerGroup struct {
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	running atomic.Int64
}

// measurement is what the reporter found out about the measured period.
type measurement struct {
	measuring    bool
	measureStart time.Time
	base         counts // at measureStart
	end          time.Time
	atEnd        counts
	latency      *histogram // latencies of the measured period
	stoppedAt    time.Time
}

// execute connects the workers, runs them and builds the summary.
func execute(ctx context.Context, cfg *Config, queues []string) (Summary, error) {
	r := &runner{cfg: cfg, fo: newFailover(cfg)}
	if err := r.connect(queues); err != nil {
		r.abortAll()
		return Summary{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel
	// The workers' contexts are not children of ctx: on Ctrl-C the reporter
	// ends and then stops the publishers before the consumers.
	r.pubGroup.ctx, r.pubGroup.stop = context.WithCancel(context.Background())
	defer r.pubGroup.stop()
	r.conGroup.ctx, r.conGroup.stop = context.WithCancel(context.Background())
	defer r.conGroup.stop()
	start := time.Now()
	for _, c := range r.cons {
		r.goFunc(&r.conGroup, r.resilient(c.id, c.run, c.reopen))
	}
	for _, p := range r.pubs {
		r.goFunc(&r.pubGroup, r.resilient(p.id, p.run, p.reopen))
	}
	var killer sync.WaitGroup
	r.startKiller(runCtx, &killer)
	m := r.report(runCtx, start)
	cancel() // stops the killer if the run ended before the kill
	killer.Wait()
	pubGrace := stopGrace
	if cfg.Confirm > 0 {
		pubGrace += cfg.DrainTimeout
	}
	aborted := r.stopGroup(&r.pubGroup, pubGrace, r.pubs, nil)
	aborted += r.stopGroup(&r.conGroup, stopGrace, nil, r.cons)
	final := r.snapshot()
	measured := m.end.Sub(m.measureStart)
	d := m.atEnd.sub(m.base)
	sum := Summary{
		Name:               cfg.Name,
		Publishers:         cfg.Publishers,
		Consumers:          cfg.Consumers,
		Queues:             cfg.Queues,
		Size:               cfg.Size,
		Interrupted:        ctx.Err() != nil,
		ElapsedSeconds:     m.stoppedAt.Sub(start).Seconds(),
		MeasuredSeconds:    measured.Seconds(),
		Published:          final.published,
		Confirmed:          final.confirmed,
		Nacked:             final.nacked,
		Consumed:           final.consumed,
		PublishRate:        perSecond(d.published, measured),
		ConfirmRate:        perSecond(d.confirmed, measured),
		ConsumeRate:        perSecond(d.consumed, measured),
		Latency:            latencySummary(m.latency),
		AbortedConnections: aborted,
		Failover:           r.fo.summary(cfg, start),
	}
	r.errMu.Lock()
	err := errors.Join(r.errs...)
	r.errMu.Unlock()
	if r.progressErr != nil {
		err = errors.Join(err, fmt.Errorf("progress output: %w", r.progressErr))
	}
	return sum, err
}

// connect opens every consumer, then every publisher, so that consumers
// are ready before the first message. It stops at the first failure.
func (r *runner) connect(queues []string) error {
	cfg := r.cfg
	for j := range cfg.Consumers {
		c, err := openConsumer(cfg, j+1, queues[j%len(queues)])
		if err != nil {
			return err
		}
		c.fo = r.fo
		r.cons = append(r.cons, c)
	}
	for i := range cfg.Publishers {
		key := queues[i%len(queues)]
		p, err := openPublisher(cfg, i+1, cfg.Exchange, key)
		if err != nil {
			return err
		}
		p.fo = r.fo
		r.pubs = append(r.pubs, p)
	}
	return nil
}

// abortAll closes the sockets of every worker; used to give up on setup.
// Close errors are dropped on purpose: the connections are being
// abandoned after an error that is already being returned.
func (r *runner) abortAll() {
	for _, c := range r.cons {
		_ = c.abort()
	}
	for _, p := range r.pubs {
		_ = p.abort()
	}
}

// goFunc runs f in a goroutine of group g; an error from f ends the run.
func (r *runner) goFunc(g *workerGroup, f func(context.Context) error) {
	g.wg.Add(1)
	g.running.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.running.Add(-1)
		if err := f(g.ctx); err != nil {
			r.fail(err)
		}
	}()
}

// fail records err and ends the run.
func (r *runner) fail(err error) {
	r.errMu.Lock()
	r.errs = append(r.errs, err)
	r.errMu.Unlock()
	r.cancel()
}

// stopGroup tells g's workers to stop and waits for them. Workers still
// running after grace (a publish blocked by broker flow control) have the
// sockets of pubs and cons closed under them. It returns how many workers
// that was.
func (r *runner) stopGroup(g *workerGroup, grace time.Duration, pubs []*publisher, cons []*consumer) int {
	g.stop()
	done := make(chan struct{})
	go func() { // ends when the workers do; waited for below
		g.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return 0
	case <-t.C:
	}
	stuck := int(g.running.Load())
	for _, p := range pubs {
		if err := p.abort(); err != nil {
			r.fail(fmt.Errorf("publisher %d: %w", p.id, err))
		}
	}
	for _, c := range cons {
		if err := c.abort(); err != nil {
			r.fail(fmt.Errorf("consumer %d: %w", c.id, err))
		}
	}
	<-done
	return stuck
}

// snapshot sums the workers' counters.
func (r *runner) snapshot() counts {
	var c counts
	for _, p := range r.pubs {
		c.published += p.published.Load()
		c.confirmed += p.confirmed.Load()
		c.nacked += p.nacked.Load()
	}
	for _, k := range r.cons {
		c.consumed += k.consumed.Load()
	}
	return c
}

// collectLatencies moves every consumer's new latencies into dst.
func (r *runner) collectLatencies(dst *histogram) {
	for _, c := range r.cons {
		c.takeLatencies(dst)
	}
}

// hasGoal reports whether the run can end by message counts.
func (r *runner) hasGoal() bool {
	return (r.cfg.PMessages > 0 && len(r.pubs) > 0) || (r.cfg.CMessages > 0 && len(r.cons) > 0)
}

// goalsReached reports whether every side with a message count reached it.
// Publishers without a count stop when the consumers reach theirs;
// consumers without a count stop once they received every message the
// publishers' counts sent through the declared topology.
func (r *runner) goalsReached() bool {
	pubGoal := r.cfg.PMessages > 0 && len(r.pubs) > 0
	conGoal := r.cfg.CMessages > 0 && len(r.cons) > 0
	if !pubGoal && !conGoal {
		return false
	}
	if pubGoal {
		for _, p := range r.pubs {
			if !p.finished.Load() {
				return false
			}
		}
	}
	if conGoal {
		for _, c := range r.cons {
			if !c.finished.Load() {
				return false
			}
		}
		return true
	}
	if len(r.cons) == 0 {
		return true
	}
	s := r.snapshot()
	return s.consumed >= (s.published-s.nacked)*r.cfg.routesPerMessage()
}

// lastActivity is when the last worker finished its count: the end of the
// measured period of a run that ends by message counts.
func (r *runner) lastActivity(now time.Time) time.Time {
	var last int64
	for _, p := range r.pubs {
		if p.finished.Load() {
			last = max(last, p.finishedAt.Load())
		}
	}
	for _, c := range r.cons {
		last = max(last, c.lastAt.Load())
	}
	if last == 0 {
		return now
	}
	return time.Unix(0, last)
}

// report is the reporter loop: it prints one line per second, opens the
// measured period after the warmup and decides when the run ends.
func (r *runner) report(ctx context.Context, start time.Time) *measurement {
	m := &measurement{latency: newHistogram()}
	tickHist, scratch := newHistogram(), newHistogram()
	collect := func() { // new latencies go to this second's line and, once measuring, to the summary
		r.collectLatencies(scratch)
		tickHist.merge(scratch)
		if m.measuring {
			m.latency.merge(scratch)
		}
		scratch.reset()
	}
	finish := func(end time.Time) *measurement {
		collect()
		now := time.Now()
		m.stoppedAt = now
		if !m.measuring { // ended during warmup: nothing measured
			m.measureStart, m.end = now, now
			return m
		}
		switch {
		case end.Before(m.measureStart):
			m.end = m.measureStart
		case end.After(now):
			m.end = now
		default:
			m.end = end
		}
		m.atEnd = r.snapshot()
		return m
	}

	var warmupC, deadlineC, pollC <-chan time.Time
	if r.cfg.Warmup > 0 {
		t := time.NewTimer(r.cfg.Warmup)
		defer t.Stop()
		warmupC = t.C
	} else {
		m.measuring, m.measureStart = true, start
	}
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Warmup + r.cfg.Duration)
		defer t.Stop()
		deadlineC = t.C
	}
	if r.hasGoal() {
		t := time.NewTicker(goalPoll)
		defer t.Stop()
		pollC = t.C
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev, prevAt := counts{}, start
	for {
		select {
		case <-ctx.Done():
			return finish(time.Now())
		case now := <-deadlineC:
			return finish(now)
		case now := <-pollC:
			if r.goalsReached() {
				return finish(r.lastActivity(now))
			}
		case now := <-warmupC:
			collect()
			m.measuring, m.measureStart, m.base = true, now, r.snapshot()
		case now := <-tick.C:
			cur := r.snapshot()
			collect()
			r.progress(progressLine(now.Sub(start), !m.measuring, cur.sub(prev), now.Sub(prevAt), tickHist))
			tickHist.reset()
			prev, prevAt = cur, now
		}
	}
}

// progress writes one progress line, if progress output is on. After a
// failed write it stops writing and keeps the error for the caller.
func (r *runner) progress(line string) {
	if r.cfg.Progress == nil || r.progressErr != nil {
		return
	}
	if _, err := fmt.Fprint(r.cfg.Progress, line); err != nil {
		r.progressErr = err
	}
}
