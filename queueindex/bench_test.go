package queueindex

import (
	"testing"
)

func benchConfig(b *testing.B, sync bool) Config {
	cfg := testConfig(b.TempDir())
	cfg.Sync = sync
	return cfg
}

var syncModes = []struct {
	name string
	sync bool
}{{"nosync", false}, {"fdatasync", true}}

// BenchmarkAppend appends with a Flush every 256 entries, as the broker's
// group commit would. ns/op is per entry.
func BenchmarkAppend(b *testing.B) {
	for _, m := range syncModes {
		b.Run(m.name, func(b *testing.B) {
			ix, _ := mustOpen(b, benchConfig(b, m.sync))
			defer ix.Close()
			e := entryFor(1)
			b.ReportAllocs()
			b.SetBytes(SlotSize)
			i := 0
			for b.Loop() {
				if _, err := ix.Append(e); err != nil {
					b.Fatal(err)
				}
				if i++; i%256 == 0 {
					if err := ix.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := ix.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAckBatch acks entries in order, flushing every 256 acks; settled
// segments are deleted as the acks go. ns/op is per ack.
func BenchmarkAckBatch(b *testing.B) {
	for _, m := range syncModes {
		b.Run(m.name, func(b *testing.B) {
			ix, _ := mustOpen(b, benchConfig(b, m.sync))
			defer ix.Close()
			e := entryFor(1)
			// Refill in chunks, outside the timer, so the acks always have
			// flushed entries to settle.
			const chunk = 64 * SlotsPerSegment
			var seq, end uint64
			b.ReportAllocs()
			for b.Loop() {
				if seq == end {
					b.StopTimer()
					for range chunk {
						if _, err := ix.Append(e); err != nil {
							b.Fatal(err)
						}
					}
					if err := ix.Flush(); err != nil {
						b.Fatal(err)
					}
					end += chunk
					b.StartTimer()
				}
				if err := ix.Ack(seq); err != nil {
					b.Fatal(err)
				}
				if seq++; seq%256 == 0 {
					if err := ix.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkReadRange pages through a 64-segment backlog 2048 entries at a
// time through a 4-segment cache. ns/op is per entry read.
func BenchmarkReadRange(b *testing.B) {
	ix, _ := mustOpen(b, benchConfig(b, false))
	defer ix.Close()
	const n = 64 * SlotsPerSegment
	appendN(b, ix, 0, n)
	if err := ix.Flush(); err != nil {
		b.Fatal(err)
	}
	var next uint64
	var sum uint64
	fn := func(_ uint64, e Entry) bool { sum += e.Offset; return true }
	b.ReportAllocs()
	read := 0
	for b.Loop() {
		if read == 0 {
			var err error
			if next, err = ix.ReadRange(next, 2048, fn); err != nil {
				b.Fatal(err)
			}
			if next >= n {
				next = 0
			}
			read = 2048
		}
		read--
	}
	_ = sum
}

// BenchmarkOpen1M opens an index of 1,000,000 ready entries (245 segments),
// with the clean checkpoint and by scanning every segment after a crash.
func BenchmarkOpen1M(b *testing.B) {
	if testing.Short() {
		b.Skip("writes 32 MB of segments")
	}
	const n = 1_000_000
	dir := b.TempDir()
	cfg := testConfig(dir)
	ix, _ := mustOpen(b, cfg)
	for i := range uint64(n) {
		if _, err := ix.Append(entryFor(i)); err != nil {
			b.Fatal(err)
		}
		if i%SlotsPerSegment == 0 {
			if err := ix.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := ix.Close(); err != nil {
		b.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		if !clean {
			// Leave a dirty checkpoint behind, as a crash does.
			ix, _ := mustOpen(b, cfg)
			ix.crash()
		}
		b.Run(map[bool]string{true: "checkpoint", false: "scan"}[clean], func(b *testing.B) {
			b.ReportAllocs()
			var reads uint64
			for b.Loop() {
				ix, rec, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if rec.Live != n || rec.Clean != clean {
					b.Fatalf("recovered %+v", rec)
				}
				reads += ix.Stats().SegmentReads
				if clean {
					err = ix.Close()
				} else {
					ix.crash()
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(reads)/float64(b.N), "segreads/op")
		})
	}
}
