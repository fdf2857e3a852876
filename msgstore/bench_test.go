package msgstore

import (
	"flag"
	"math/rand/v2"
	"runtime"
	"testing"
)

var openRecords = flag.Int("msgstore.open-records", 1_000_000,
	"live records written for BenchmarkOpenCheckpoint")

func benchConfig(b *testing.B, policy FlushPolicy) Config {
	cfg := DefaultConfig(b.TempDir())
	cfg.Logger = testConfig("").Logger
	cfg.Flush = policy
	return cfg
}

func BenchmarkAppend1KiB(b *testing.B) {
	l := mustOpenLog(b, benchConfig(b, FlushOS))
	r := mkRecord(1, 1024)
	b.SetBytes(int64(r.EncodedSize()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendDurable1KiB is a publisher-confirm workload: every operation
// appends and waits for its own WhenDurable under FlushFsync, from many
// goroutines at once, so group commit decides the throughput.
func BenchmarkAppendDurable1KiB(b *testing.B) {
	l := mustOpenLog(b, benchConfig(b, FlushFsync))
	r := mkRecord(1, 1024)
	b.SetBytes(int64(r.EncodedSize()))
	b.ReportAllocs()
	b.SetParallelism(16)
	start := l.Stats().Fsyncs
	b.RunParallel(func(pb *testing.PB) {
		done := make(chan error, 1)
		cb := func(err error) { done <- err }
		for pb.Next() {
			loc, err := l.Append(r)
			if err != nil {
				b.Error(err)
				return
			}
			l.WhenDurable(loc.Offset, cb)
			if err := <-done; err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(l.Stats().Fsyncs-start)/float64(b.N), "fsyncs/op")
}

func BenchmarkGet(b *testing.B) {
	cfg := benchConfig(b, FlushOS)
	s := mustOpenStore(b, cfg)
	var locs []Loc
	for i := range 50_000 {
		loc, err := s.Put(mkRecord(i, 1024), 1)
		if err != nil {
			b.Fatal(err)
		}
		locs = append(locs, loc)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	b.SetBytes(int64(locs[0].Size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(locs[rng.IntN(len(locs))]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenCheckpoint measures a clean Open of a store holding
// -msgstore.open-records live records (default one million), and reports the
// memory of the liveness tables and the segment bytes read during Open.
func BenchmarkOpenCheckpoint(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a million records; skipped with -short")
	}
	cfg := benchConfig(b, FlushOS)
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r := Record{Body: make([]byte, 16)}
	for i := range *openRecords {
		if _, err := s.Put(r, 1+i%2); err != nil { // half are fanned out to two queues
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	var st Stats
	var bytesRead int64
	var heap uint64
	b.ReportAllocs()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
		st, bytesRead = s.Stats(), s.Recovery().BytesRead
		if !s.Recovery().Clean || st.LiveMessages != int64(*openRecords) {
			b.Fatalf("open: %+v %+v", s.Recovery(), st)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.MemoryBytes), "liveness-bytes")
	b.ReportMetric(float64(heap), "heap-bytes")
	b.ReportMetric(float64(bytesRead), "open-read-bytes")
	b.ReportMetric(float64(st.Segments), "segments")
}

// BenchmarkLivenessMemory reports the table memory for a million live records.
func BenchmarkLivenessMemory(b *testing.B) {
	for _, fan := range []struct {
		name string
		refs uint32
	}{{"single", 1}, {"fanout", 3}} {
		b.Run(fan.name, func(b *testing.B) {
			var sl *segLive
			for b.Loop() {
				sl = &segLive{seg: &segment{}}
				for i := range 1_000_000 {
					if _, err := sl.addRefs(uint32(i), fan.refs, 100); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(sl.memory()), "bytes/1M-records")
		})
	}
}
