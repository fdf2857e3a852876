package msgstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func FuzzDecodeRecord(f *testing.F) {
	for i, r := range []Record{{}, mkRecord(1, 0), mkRecord(2, 300), {Offset: 1 << 40, Exchange: []byte("amq.topic")}} {
		enc, err := AppendRecord(nil, &r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
		if i == 2 {
			f.Add(enc[:len(enc)-1])
			bad := bytes.Clone(enc)
			bad[20] ^= 1
			f.Add(bad)
		}
	}
	f.Add([]byte{0, 0, 0, 28, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n < MinRecordSize || n > len(b) {
			t.Fatalf("decoded %d bytes of %d", n, len(b))
		}
		enc, err := AppendRecord(nil, &r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(enc, b[:n]) {
			t.Fatalf("round trip differs:\n%x\n%x", enc, b[:n])
		}
	})
}

// FuzzRecoverSegment opens a log whose only segment holds arbitrary bytes: Open
// must not panic, must keep a prefix of the input, and everything it kept
// must read back.
func FuzzRecoverSegment(f *testing.F) {
	var valid []byte
	for i := range 5 {
		r := mkRecord(i, 10*i)
		r.Offset = uint64(i)
		valid, _ = AppendRecord(valid, &r)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(append(bytes.Clone(valid), 0, 0, 0, 0, 0))
	flipped := bytes.Clone(valid)
	flipped[70] ^= 0x40
	f.Add(flipped)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		seg := filepath.Join(dir, segName(0)+segSuffix)
		if err := os.WriteFile(seg, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(dir)
		cfg.IndexInterval = 64
		l, err := OpenLog(cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		recs, locs := readAll(t, l, 0)
		for i, loc := range locs {
			got, err := l.ReadAt(Loc{Offset: loc.Offset}) // through the index
			if err != nil || !sameRecord(got, recs[i]) {
				t.Fatalf("record %d: %v", loc.Offset, err)
			}
		}
		ri := l.Recovery()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		kept, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, kept) || int64(len(data)-len(kept)) != ri.BytesCut {
			t.Fatalf("kept %d bytes of %d (cut %d), not a prefix", len(kept), len(data), ri.BytesCut)
		}
		var sum int
		for _, loc := range locs {
			sum += int(loc.Size)
		}
		if sum != len(kept) || int64(len(recs)) != ri.RecordsRecovered {
			t.Fatalf("kept %d bytes holding %d bytes of %d records (recovered %d)", len(kept), sum, len(recs), ri.RecordsRecovered)
		}
	})
}

func FuzzDecodeIndex(f *testing.F) {
	f.Add(encodeIndex([]indexEntry{{0, 0}, {9, 4100}, {20, 8300}}, 31, 9000))
	f.Add(encodeIndex(nil, 0, 0))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, info, err := decodeIndex(b)
		if err != nil {
			return
		}
		if enc := encodeIndex(entries, info.lastPlus1, info.size); !bytes.Equal(enc, b) {
			t.Fatalf("index round trip differs")
		}
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	sl := &segLive{base: 0, over: map[uint32]uint32{3: 400}}
	sl.addRefs(1, 1, 40)
	sl.addRefs(3, 2, 40)
	cp := checkpoint{next: 12, segs: []cpSegment{{0, 500, 12}}, extra: encodeLiveness([]*segLive{sl})}
	f.Add(cp.encode())
	f.Add((&checkpoint{}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCheckpoint(b)
		if err != nil {
			return
		}
		if !bytes.Equal(c.encode(), b) {
			t.Fatalf("checkpoint round trip differs")
		}
		segs := make([]*segment, len(c.segs))
		for i, s := range c.segs {
			segs[i] = &segment{base: s.base}
		}
		if tables, err := decodeLiveness(c.extra, segs); err == nil && len(tables) != len(segs) {
			t.Fatalf("%d tables for %d segments", len(tables), len(segs))
		}
	})
}
