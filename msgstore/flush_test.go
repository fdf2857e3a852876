package msgstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMsgStoreGroupCommit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 64 << 20
	l := mustOpenLog(t, cfg)
	const writers, each = 8, 1000
	calls := make([]atomic.Int32, writers*each)
	var bad atomic.Value
	var done sync.WaitGroup
	done.Add(writers * each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				loc, err := l.Append(mkRecord(w*each+i, 200))
				if err != nil {
					bad.Store(err)
					done.Add(-(each - i))
					return
				}
				l.WhenDurable(loc.Offset, func(err error) {
					if err != nil {
						bad.Store(err)
					}
					if l.Stats().SyncedOffset <= loc.Offset {
						bad.Store(fmt.Errorf("offset %d reported durable before it was fsynced", loc.Offset))
					}
					calls[loc.Offset].Add(1)
					done.Done()
				})
			}
		}()
	}
	wg.Wait()
	done.Wait()
	if err, _ := bad.Load().(error); err != nil {
		t.Fatal(err)
	}
	for off := range calls {
		if n := calls[off].Load(); n != 1 {
			t.Fatalf("callback for offset %d called %d times", off, n)
		}
	}
	st := l.Stats()
	t.Logf("%d appends, %d fsyncs", st.Appends, st.Fsyncs)
	if st.Appends != writers*each || st.Fsyncs*4 > st.Appends {
		t.Fatalf("%d fsyncs for %d appends: group commit did not coalesce", st.Fsyncs, st.Appends)
	}
	// No more calls arrive later.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for off := range calls {
		if n := calls[off].Load(); n != 1 {
			t.Fatalf("callback for offset %d called %d times after Close", off, n)
		}
	}
}

// durableAfter appends n records with WhenDurable and waits for all callbacks.
func durableAfter(t *testing.T, l *Log, n int) uint64 {
	t.Helper()
	var wg sync.WaitGroup
	var last uint64
	for i := range n {
		loc := mustAppend(t, l, mkRecord(i, 30))
		last = loc.Offset
		wg.Add(1)
		l.WhenDurable(loc.Offset, func(err error) {
			if err != nil {
				t.Errorf("WhenDurable(%d): %v", loc.Offset, err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	return last
}

func TestMsgStoreFlushPolicies(t *testing.T) {
	t.Run("fsync", func(t *testing.T) {
		l := mustOpenLog(t, testConfig(t.TempDir()))
		last := durableAfter(t, l, 50)
		if st := l.Stats(); st.SyncedOffset <= last || st.Fsyncs == 0 {
			t.Fatalf("callbacks done but synced=%d fsyncs=%d", st.SyncedOffset, st.Fsyncs)
		}
	})
	t.Run("os", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		cfg.Flush = FlushOS
		l := mustOpenLog(t, cfg)
		base := l.Stats().Fsyncs
		last := durableAfter(t, l, 50)
		if st := l.Stats(); st.Fsyncs != base || st.SyncedOffset > last {
			t.Fatalf("os policy fsynced on the hot path: %+v", st)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		if st := l.Stats(); st.Fsyncs == base || st.SyncedOffset != last+1 {
			t.Fatalf("Sync did not fsync: %+v", st)
		}
	})
	t.Run("messages", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		cfg.Flush, cfg.FlushMessages = FlushMessages, 10
		l := mustOpenLog(t, cfg)
		base := l.Stats().Fsyncs
		durableAfter(t, l, 9)
		if st := l.Stats(); st.Fsyncs != base {
			t.Fatalf("fsync after 9 of 10 messages: %+v", st)
		}
		mustAppend(t, l, mkRecord(10, 5)) // the tenth
		waitFor(t, 5*time.Second, func() error {
			if st := l.Stats(); st.Fsyncs == base || st.SyncedOffset != 10 {
				return fmt.Errorf("no fsync after 10 messages: %+v", st)
			}
			return nil
		})
	})
	t.Run("interval", func(t *testing.T) {
		cfg := testConfig(t.TempDir())
		cfg.Flush, cfg.FlushInterval = FlushInterval, 20*time.Millisecond
		l := mustOpenLog(t, cfg)
		last := durableAfter(t, l, 20)
		waitFor(t, 5*time.Second, func() error {
			if st := l.Stats(); st.SyncedOffset <= last {
				return fmt.Errorf("timer did not fsync: %+v", st)
			}
			return nil
		})
	})
}

func TestMsgStoreWhenDurableAroundClose(t *testing.T) {
	l := mustOpenLog(t, testConfig(t.TempDir()))
	loc := mustAppend(t, l, mkRecord(0, 10))
	got := make(chan error, 3)
	l.WhenDurable(loc.Offset+100, func(err error) { got <- err }) // never appended
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending waiter at Close got %v, want ErrClosed", err)
	}
	l.WhenDurable(loc.Offset, func(err error) { got <- err })
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("WhenDurable after Close got %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}

// TestMsgStorePowerCut copies the directory as a power cut would leave it:
// every segment cut to the size its last completed flush round made durable,
// plus a random part of the bytes written after (pages that may or may not
// have reached the disk). Every record whose WhenDurable fired must be there.
func TestMsgStorePowerCut(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	cfg.SegmentSize = 16 << 10
	l, _, err := openLog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	synced := map[string]int64{}
	l.onSynced = func(sizes map[string]int64) {
		mu.Lock()
		for k, v := range sizes {
			synced[filepath.Base(k)] = max(synced[filepath.Base(k)], v)
		}
		mu.Unlock()
	}
	l.start()

	var ackMu sync.Mutex
	acked := map[uint64]int{} // offset -> record seed
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	t.Cleanup(func() { // writers first, so none reports ErrClosed after a failure
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
		l.Close()
	})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			window := make(chan struct{}, 8) // like a publisher with 8 unconfirmed messages
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case window <- struct{}{}:
				}
				seed := w*1_000_000 + i
				loc, err := l.Append(mkRecord(seed, 50+seed%300))
				if err != nil {
					t.Error(err)
					return
				}
				l.WhenDurable(loc.Offset, func(err error) {
					if err == nil {
						ackMu.Lock()
						acked[loc.Offset] = seed
						ackMu.Unlock()
					}
					<-window
				})
			}
		}()
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 5 {
		waitFor(t, 10*time.Second, func() error {
			ackMu.Lock()
			defer ackMu.Unlock()
			if len(acked) < (round+1)*300 {
				return fmt.Errorf("only %d acked", len(acked))
			}
			return nil
		})
		// Snapshot the acknowledgements first: anything acked before the copy
		// starts must survive it.
		ackMu.Lock()
		want := make(map[uint64]int, len(acked))
		for k, v := range acked {
			want[k] = v
		}
		ackMu.Unlock()
		mu.Lock()
		durable := make(map[string]int64, len(synced))
		for k, v := range synced {
			durable[k] = v
		}
		mu.Unlock()

		powerCutCheck(t, cfg, durable, want, rng)
	}
	stopOnce.Do(func() { close(stop) })
	wg.Wait()
}

// powerCutCheck copies cfg.Dir keeping each segment's durable prefix plus a
// random part of the rest, opens the copy and checks every acknowledged record.
func powerCutCheck(t *testing.T, cfg Config, durable map[string]int64, want map[uint64]int, rng *rand.Rand) {
	t.Helper()
	dir := copyDirWith(t, cfg.Dir, func(name string, data []byte) []byte {
		if filepath.Ext(name) != segSuffix {
			return data // indexes are only trusted when they match the segment's size
		}
		n, ok := durable[name]
		if !ok {
			return nil // never fsynced: the directory entry may be gone too
		}
		return data[:n+rng.Int64N(int64(len(data))-n+1)]
	})
	c := cfg
	c.Dir = dir
	rl, err := OpenLog(c)
	if err != nil {
		t.Fatalf("open after power cut: %v", err)
	}
	defer rl.Close()
	for off, seed := range want {
		rec, err := rl.ReadAt(Loc{Offset: off})
		if err != nil {
			t.Fatalf("acknowledged offset %d lost: %v (recovery %+v)", off, err, rl.Recovery())
		}
		if !sameRecord(rec, mkRecord(seed, 50+seed%300)) {
			t.Fatalf("offset %d has the wrong content", off)
		}
	}
}

func TestMsgStoreDiskFullClassification(t *testing.T) {
	for _, e := range []error{&os.PathError{Op: "write", Path: "x", Err: errENOSPC}} {
		if err := wrapWriteErr(e); !errors.Is(err, ErrDiskFull) || !errors.Is(err, e) {
			t.Fatalf("wrapWriteErr(%v) = %v", e, err)
		}
	}
	if err := wrapWriteErr(os.ErrPermission); errors.Is(err, ErrDiskFull) {
		t.Fatalf("permission error classified as disk full")
	}
}
