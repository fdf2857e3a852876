package replica

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// commitWaiter is a Handler whose hw can be waited for.
type commitWaiter struct {
	mu   sync.Mutex
	cond *sync.Cond
	hw   uint64
}

func newCommitWaiter() *commitWaiter {
	w := &commitWaiter{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *commitWaiter) Committed(hw uint64) {
	w.mu.Lock()
	w.hw = hw
	w.mu.Unlock()
	w.cond.Broadcast()
}

// waitAbove blocks until hw ≥ off and returns when it happened.
func (w *commitWaiter) wait(off uint64) time.Time {
	w.mu.Lock()
	for w.hw < off {
		w.cond.Wait()
	}
	w.mu.Unlock()
	return time.Now()
}

func (w *commitWaiter) current() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hw
}

// BenchmarkReplicate3: three managers on loopback, FileLog (fsync on every
// replica), 1 KiB records, one publisher keeping up to 256 records
// uncommitted (a confirm window). Reports records/s and commit latency
// (append → Committed on the leader) p50/p99.
func BenchmarkReplicate3(b *testing.B) {
	c := newTCluster(b, 3)
	c.ctl.placements["q"] = Placement{Replicas: []string{"n1", "n2", "n3"}, Leader: "n1", Epoch: 1,
		ISR: []string{"n1", "n2", "n3"}, MinISR: 2, Version: 1}
	w := newCommitWaiter()
	var leader Replica
	for _, n := range []string{"n1", "n2", "n3"} {
		l, err := OpenFileLog(fileLogConfig(b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		l.ml.SetSegmentSize(64 << 20)
		b.Cleanup(func() { l.Close() })
		var h Handler = &recHandler{}
		if n == "n1" {
			h = w
		}
		r := c.ctl.open(n, "q", l, h)
		if n == "n1" {
			leader = r
		}
	}
	body := make([]byte, 1024)
	const window = 256
	type sent struct {
		off uint64
		at  time.Time
	}
	inflight := make(chan sent, window)
	lat := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := range inflight {
			lat = append(lat, w.wait(s.off).Sub(s.at))
		}
	}()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		off, err := leader.Append(body)
		if err != nil {
			b.Fatal(err)
		}
		inflight <- sent{off, time.Now()}
	}
	close(inflight)
	<-done
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkCatchUp: a mirror 256 MiB behind (FileLog, 1 KiB records)
// catches up from the leader's log; MB/s from heal to the backlog durable.
func BenchmarkCatchUp(b *testing.B) {
	const mib = 256
	for range b.N {
		b.StopTimer()
		c := newTCluster(b, 2)
		c.ctl.placements["q"] = Placement{Replicas: []string{"n1", "n2"}, Leader: "n1", Epoch: 1,
			ISR: []string{"n1", "n2"}, MinISR: 1, Version: 1}
		logs := map[string]*FileLog{}
		for _, n := range []string{"n1", "n2"} {
			l, err := OpenFileLog(fileLogConfig(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			l.ml.SetSegmentSize(64 << 20)
			logs[n] = l
		}
		w := newCommitWaiter()
		leader := c.ctl.open("n1", "q", logs["n1"], w)
		c.cut("n1", "n2")
		c.ctl.open("n2", "q", logs["n2"], &recHandler{})
		body := make([]byte, 1024)
		batch := make([][]byte, 256)
		for i := range batch {
			batch[i] = body
		}
		var last uint64
		for i := 0; i < mib<<10; i += len(batch) {
			var err error
			if last, err = leader.Append(batch...); err != nil {
				b.Fatal(err)
			}
		}
		w.wait(last)
		b.StartTimer()
		start := time.Now()
		c.heal("n1", "n2")
		for logs["n2"].DurableOffset() < last {
			time.Sleep(time.Millisecond)
		}
		el := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(mib<<20)/el.Seconds()/1e6, "MB/s")
		c.close()
		for _, l := range logs {
			l.Close()
		}
		b.StartTimer()
	}
}
