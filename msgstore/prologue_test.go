package msgstore

import (
	"encoding/binary"
	"errors"
	"testing"
)

const prologueFlag = 0x80

// Every segment Append starts begins with the prologue, which takes the offset
// before the record that started the segment; the segment Open created has none.
func TestMsgStorePrologueStartsEverySegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 1024
	l := mustOpenLog(t, cfg)
	calls := 0
	l.SetPrologue(func() (Record, bool) {
		calls++
		return Record{Flags: prologueFlag, Body: binary.BigEndian.AppendUint32(nil, uint32(calls))}, true
	})
	want := map[uint64]Record{} // offset → record appended by the test
	for i := range 60 {
		r := mkRecord(i, 100)
		r.Flags = 0
		loc := mustAppend(t, l, r)
		want[loc.Offset] = r
		checkRead(t, l.ReadAt, loc, r)
	}
	infos, err := l.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) < 5 || calls != len(infos)-1 {
		t.Fatalf("%d segments, %d prologues: want one per segment after the first", len(infos), calls)
	}
	recs, _ := readAll(t, l, 0)
	if len(recs) != 60+calls {
		t.Fatalf("iterated %d records, want %d", len(recs), 60+calls)
	}
	bases := map[uint64]bool{}
	for _, si := range infos {
		bases[si.Base] = true
	}
	seen := 0
	for i, r := range recs {
		if r.Offset != uint64(i) {
			t.Fatalf("record %d has offset %d: offsets must stay consecutive", i, r.Offset)
		}
		isPrologue := r.Flags == prologueFlag
		if isPrologue != (bases[r.Offset] && r.Offset != 0) {
			t.Fatalf("offset %d: prologue=%v, segment start=%v", r.Offset, isPrologue, bases[r.Offset])
		}
		if isPrologue {
			seen++
			if n := binary.BigEndian.Uint32(r.Body); n != uint32(seen) {
				t.Fatalf("prologue %d carries %d", seen, n)
			}
			continue
		}
		if w, ok := want[r.Offset]; !ok || !sameRecord(r, w) {
			t.Fatalf("offset %d is not the record Append returned it for", r.Offset)
		}
	}
}

// A prologue function that reports false writes nothing, and nil removes the hook.
func TestMsgStorePrologueOptional(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 1024
	l := mustOpenLog(t, cfg)
	l.SetPrologue(func() (Record, bool) { return Record{Flags: prologueFlag}, false })
	for i := range 20 {
		mustAppend(t, l, mkRecord(i, 200))
	}
	l.SetPrologue(nil)
	for i := 20; i < 40; i++ {
		mustAppend(t, l, mkRecord(i, 200))
	}
	recs, _ := readAll(t, l, 0)
	if len(recs) != 40 {
		t.Fatalf("%d records, want 40 (no prologues)", len(recs))
	}
	for _, r := range recs {
		if r.Flags == prologueFlag {
			t.Fatalf("prologue at %d", r.Offset)
		}
	}
	// A prologue that cannot be encoded fails the Append that needs it and
	// leaves the log unchanged.
	l.SetPrologue(func() (Record, bool) { return Record{Exchange: make([]byte, 300)}, true })
	var failed error
	for i := 0; failed == nil && i < 20; i++ {
		_, failed = l.Append(mkRecord(i, 200))
	}
	if !errors.Is(failed, ErrFieldTooLong) {
		t.Fatalf("append needing a bad prologue: %v, want ErrFieldTooLong", failed)
	}
	next := l.Stats().NextOffset
	l.SetPrologue(func() (Record, bool) { return Record{Flags: prologueFlag}, true })
	loc := mustAppend(t, l, mkRecord(99, 10))
	if loc.Offset != next+1 {
		t.Fatalf("after a failed prologue the retry put the record at %d, want %d (prologue first)", loc.Offset, next+1)
	}
	if r, err := l.ReadAt(Loc{Offset: next}); err != nil || r.Flags != prologueFlag {
		t.Fatalf("offset %d: %+v, %v; want the prologue", next, r, err)
	}
}

func TestMsgStoreSetSegmentSize(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SegmentSize = 64 << 10
	l := mustOpenLog(t, cfg)
	for _, bad := range []int64{0, 1023, MaxSegmentSize + 1} {
		if err := l.SetSegmentSize(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("SetSegmentSize(%d): %v, want ErrInvalidConfig", bad, err)
		}
	}
	for i := range 20 {
		mustAppend(t, l, mkRecord(i, 100))
	}
	if n := l.Stats().Segments; n != 1 {
		t.Fatalf("%d segments before the change, want 1", n)
	}
	if err := l.SetSegmentSize(1024); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 60; i++ {
		mustAppend(t, l, mkRecord(i, 100))
	}
	infos, err := l.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) < 5 {
		t.Fatalf("%d segments after shrinking the segment size, want several", len(infos))
	}
	for _, si := range infos[1 : len(infos)-1] {
		if si.Size > 1024 {
			t.Fatalf("segment %d is %d bytes, over the new size", si.Base, si.Size)
		}
	}
	recs, _ := readAll(t, l, 0)
	if len(recs) != 60 {
		t.Fatalf("%d records, want 60", len(recs))
	}
	for i := range recs {
		if _, err := l.ReadAt(Loc{Offset: uint64(i)}); err != nil {
			t.Fatalf("read %d by offset: %v", i, err)
		}
	}
}
