package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// idleQueuePattern names the idle scenario's queues.
const idleQueuePattern = "warren-perf-idle-%d"

// runIdle is the idle scenario: declare o.idleQueues durable queues on one
// channel (timed), open o.idleConns connections with a channel each
// (timed), hold them for o.duration so the broker's resting memory can be
// sampled (--broker-pid), then close the connections. It returns the
// summary and the queues to delete.
func runIdle(ctx context.Context, o scenarioOptions, progress io.Writer) (Summary, []string, error) {
	sum := Summary{Name: "idle", Queues: o.idleQueues, Connections: o.idleConns}
	start := time.Now()
	conn, ch, err := openChannel(o.url, "idle declarer")
	if err != nil {
		return sum, nil, err
	}
	defer conn.close()
	queues := make([]string, 0, o.idleQueues)
	t0 := time.Now()
	for i := range o.idleQueues {
		if ctx.Err() != nil {
			sum.Interrupted = true
			return sum, queues, nil
		}
		name := fmt.Sprintf(idleQueuePattern, i)
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			return sum, queues, fmt.Errorf("%w: declare %s: %w", ErrWorker, name, err)
		}
		queues = append(queues, name)
	}
	sum.DeclareSeconds = time.Since(t0).Seconds()
	progressf(progress, "declared %d durable queues in %.2f s\n", o.idleQueues, sum.DeclareSeconds)

	t0 = time.Now()
	conns := make([]*brokerConn, 0, o.idleConns)
	defer func() {
		for _, c := range conns {
			_ = c.close() // the broker's answer to a close does not change the figures
		}
	}()
	for range o.idleConns {
		if ctx.Err() != nil {
			sum.Interrupted = true
			return sum, queues, nil
		}
		c, _, err := openChannel(o.url, "idle connection")
		if err != nil {
			return sum, queues, err
		}
		conns = append(conns, c)
	}
	sum.ConnectSeconds = time.Since(t0).Seconds()
	progressf(progress, "opened %d connections in %.2f s; holding them %v\n", o.idleConns, sum.ConnectSeconds, o.duration)
	select {
	case <-ctx.Done():
		sum.Interrupted = true
	case <-time.After(o.duration):
	}
	sum.ElapsedSeconds = time.Since(start).Seconds()
	return sum, queues, nil
}

// progressf writes a progress line when progress is set; progress output is
// best effort.
func progressf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format, args...)
	}
}

// rssSampler records the peak resident set size of a local process (the
// broker, --broker-pid) while a phase runs, read from /proc every
// rssSampleEvery. It exists because the broker's own figures differ
// (RabbitMQ and Warren count memory differently) while the kernel's do not.
type rssSampler struct {
	pid  int
	peak atomic.Uint64 // KiB
	err  error         // the first read error; read after stop
	stop chan struct{}
	wg   sync.WaitGroup
}

// rssSampleEvery is the sampling period of rssSampler.
const rssSampleEvery = 100 * time.Millisecond

// startRSSSampler starts sampling pid; pid 0 samples nothing.
func startRSSSampler(pid int) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{})}
	if pid == 0 {
		return s
	}
	s.wg.Add(1)
	go func() { // owned by s; finish stops it
		defer s.wg.Done()
		t := time.NewTicker(rssSampleEvery)
		defer t.Stop()
		for {
			if !s.sample() {
				return
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// sample reads the RSS once and reports whether to go on.
func (s *rssSampler) sample() bool {
	kib, err := readRSSKiB(s.pid)
	if err != nil {
		s.err = err
		return false
	}
	for {
		cur := s.peak.Load()
		if kib <= cur || s.peak.CompareAndSwap(cur, kib) {
			return true
		}
	}
}

// finish stops sampling, takes one last sample and returns the peak in KiB.
func (s *rssSampler) finish() (uint64, error) {
	if s.pid == 0 {
		return 0, nil
	}
	close(s.stop)
	s.wg.Wait()
	if s.err == nil {
		s.sample()
	}
	return s.peak.Load(), s.err
}

// readRSSKiB returns VmRSS of pid from /proc/<pid>/status.
func readRSSKiB(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("%w: broker RSS: %w", ErrInvalidConfig, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			break
		}
		return strconv.ParseUint(string(f[0]), 10, 64)
	}
	return 0, fmt.Errorf("%w: broker RSS: no VmRSS in /proc/%d/status", ErrInvalidConfig, pid)
}
