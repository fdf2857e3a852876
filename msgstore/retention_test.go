package msgstore

import (
	"errors"
	"testing"
)

func TestRetentionSegmentsAndRemove(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 1024
	l := mustOpenLog(t, cfg)
	var ts []int64
	for i := range 40 {
		r := mkRecord(i, 100)
		r.Timestamp = int64(1000 + i)
		ts = append(ts, r.Timestamp)
		mustAppend(t, l, r)
	}
	infos, err := l.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) < 3 {
		t.Fatalf("want several segments, got %d", len(infos))
	}
	for i, si := range infos {
		if si.FirstTimestamp != ts[si.Base] {
			t.Fatalf("segment %d: first timestamp %d, want %d", i, si.FirstTimestamp, ts[si.Base])
		}
		if si.Active != (i == len(infos)-1) {
			t.Fatalf("segment %d: active=%v", i, si.Active)
		}
	}
	active := infos[len(infos)-1]
	if err := l.RemoveSegment(active.Base); !errors.Is(err, ErrActiveSegment) {
		t.Fatalf("removing the active segment: %v, want ErrActiveSegment", err)
	}
	if err := l.RemoveSegment(infos[0].Base + 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing a missing segment: %v, want ErrNotFound", err)
	}
	if err := l.RemoveSegment(infos[0].Base); err != nil {
		t.Fatal(err)
	}
	recs, _ := readAll(t, l, 0)
	if len(recs) == 0 || recs[0].Offset != infos[1].Base {
		t.Fatalf("after removal first record is %v, want offset %d", recs, infos[1].Base)
	}
	// The removal survives a reopen.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpenLog(t, cfg)
	if st := l.Stats(); st.FirstOffset != infos[1].Base {
		t.Fatalf("after reopen first offset %d, want %d", st.FirstOffset, infos[1].Base)
	}
}

func TestRetentionOffsetAtTime(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 1024
	l := mustOpenLog(t, cfg)
	for i := range 50 {
		r := mkRecord(i, 80)
		r.Timestamp = int64(10 * (i + 1)) // 10, 20, ... 500
		mustAppend(t, l, r)
	}
	for _, c := range []struct {
		ts   int64
		want uint64
	}{{0, 0}, {10, 0}, {11, 1}, {250, 24}, {500, 49}, {501, 50}} {
		got, err := l.OffsetAtTime(c.ts)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("OffsetAtTime(%d) = %d, want %d", c.ts, got, c.want)
		}
	}
}
