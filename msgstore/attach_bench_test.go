package msgstore

import (
	"flag"
	"log/slog"
	"testing"
	"time"
)

// attachGiB sizes BenchmarkStreamAttachMiddle's log. The default keeps a
// plain -bench run short; the figure is for -stream.attach-gib=10.
var attachGiB = flag.Float64("stream.attach-gib", 0.0625,
	"GiB of data BenchmarkStreamAttachMiddle writes before attaching in the middle")

// BenchmarkStreamAttachMiddle writes a stream-like log of -stream.attach-gib
// GiB of 64 KiB records (500 MB segments, as a stream's default, flush policy
// os), then measures attaching in the middle: an Iterator at the middle
// offset returning its first record, and a time seek (OffsetAtTime) followed
// by the same read. "after-reopen" closes and reopens the log before every
// attach (untimed), so the segment's indexes are loaded from their files in
// the timed part. The data lives in b.TempDir and is deleted afterwards.
func BenchmarkStreamAttachMiddle(b *testing.B) {
	const body = 64 << 10
	cfg := DefaultConfig(b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.SegmentSize = 500_000_000
	cfg.Flush = FlushOS
	l, err := OpenLog(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
	}()
	total := int64(*attachGiB * (1 << 30))
	n := int(total / body)
	rec := Record{Exchange: []byte("amq.default"), RoutingKey: []byte("s"), Body: make([]byte, body)}
	start := time.Now()
	t0 := time.Now().UnixNano()
	for i := range n {
		rec.Timestamp = t0 + int64(i)*1000 // 1 µs apart: distinct, increasing
		if _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	wrote := time.Since(start)
	st := l.Stats()
	b.Logf("wrote %d records, %.2f GiB in %d segments in %v (%.0f MB/s, fsynced)",
		n, float64(st.Bytes)/(1<<30), st.Segments, wrote.Round(time.Millisecond), float64(st.Bytes)/wrote.Seconds()/1e6)
	mid := uint64(n / 2)
	midTs := t0 + int64(mid)*1000

	attach := func(b *testing.B, off uint64) {
		it := l.Iterate(off)
		if !it.Next() {
			b.Fatalf("no record at %d: %v", off, it.Err())
		}
		if got := it.Loc().Offset; got != off {
			b.Fatalf("attached at %d, want %d", got, off)
		}
	}
	report := func(b *testing.B, read0 int64) {
		b.ReportMetric(float64(l.Stats().BytesRead-read0)/float64(b.N), "bytes-read/op")
	}
	b.Run("offset", func(b *testing.B) {
		b.ReportAllocs()
		read0 := l.Stats().BytesRead
		for i := 0; i < b.N; i++ {
			attach(b, mid+uint64(i%1000))
		}
		report(b, read0)
	})
	b.Run("timestamp", func(b *testing.B) {
		b.ReportAllocs()
		read0 := l.Stats().BytesRead
		for i := 0; i < b.N; i++ {
			want := mid + uint64(i%1000)
			off, err := l.OffsetAtTime(midTs + int64(i%1000)*1000)
			if err != nil || off != want {
				b.Fatalf("OffsetAtTime = %d, %v; want %d", off, err, want)
			}
			attach(b, off)
		}
		report(b, read0)
	})
	b.Run("after-reopen", func(b *testing.B) {
		b.ReportAllocs()
		var read int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			if l, err = OpenLog(cfg); err != nil {
				b.Fatal(err)
			}
			read0 := l.Stats().BytesRead
			b.StartTimer()
			off, err := l.OffsetAtTime(midTs)
			if err != nil || off != mid {
				b.Fatalf("OffsetAtTime = %d, %v; want %d", off, err, mid)
			}
			attach(b, off)
			read += l.Stats().BytesRead - read0
		}
		b.ReportMetric(float64(read)/float64(b.N), "bytes-read/op")
	})
}
