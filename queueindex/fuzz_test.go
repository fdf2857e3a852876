package queueindex

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func FuzzDecodeSlot(f *testing.F) {
	var ready, tomb [SlotSize]byte
	encodeSlot(ready[:], entryFor(42))
	encodeTombstone(tomb[:])
	flipped := ready
	flipped[9] ^= 4
	f.Add(ready[:], uint64(1), uint32(2), uint32(3), int64(4), uint8(5), uint8(1))
	f.Add(tomb[:], uint64(0), uint32(0), uint32(0), int64(0), uint8(0), uint8(0))
	f.Add(flipped[:], ^uint64(0), ^uint32(0), ^uint32(0), int64(-1), uint8(255), uint8(3))
	f.Add(make([]byte, SlotSize), uint64(7), uint32(0), uint32(1<<20), int64(1e12), uint8(9), uint8(2))
	f.Add(ready[:17], uint64(7), uint32(0), uint32(1), int64(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, offset uint64, pos, size uint32, expiry int64, prio, flags uint8) {
		// Arbitrary bytes: never panics, and whatever decodes re-encodes to
		// the same bytes.
		st, e, err := decodeSlot(data)
		if err == nil {
			var b [SlotSize]byte
			switch st {
			case statusReady:
				encodeSlot(b[:], e)
				if !bytes.Equal(b[:], data[:SlotSize]) {
					t.Fatalf("ready slot %x re-encodes as %x", data[:SlotSize], b)
				}
			case statusEmpty:
				if !isZeroSlot(data) {
					t.Fatalf("non-zero slot %x decoded as empty", data[:SlotSize])
				}
			case statusSettled:
				if data[offStatus] != statusSettled {
					t.Fatalf("slot %x decoded as settled", data[:SlotSize])
				}
			default:
				t.Fatalf("decodeSlot returned status %d", st)
			}
		}
		// Valid slots round trip.
		want := Entry{Offset: offset, Pos: pos, Size: size, Expiry: expiry, Priority: prio,
			Persistent: flags&1 != 0, Delivered: flags&2 != 0}
		var b [SlotSize]byte
		encodeSlot(b[:], want)
		st, got, err := decodeSlot(b[:])
		if err != nil || st != statusReady || got != want {
			t.Fatalf("round trip of %+v: %+v status %d err %v", want, got, st, err)
		}
		encodeTombstone(b[:])
		if st, _, err := decodeSlot(b[:]); err != nil || st != statusSettled {
			t.Fatalf("tombstone decodes as status %d, %v", st, err)
		}
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	clean := checkpoint{clean: true, next: 9000, lease: 12288, segs: []segment{{num: 0, live: 3, size: 4096, bytes: 77}, {num: 2, live: 4096, size: SegmentSize, bytes: 1 << 40}}}
	dirty := checkpoint{next: 5, lease: 8192}
	f.Add(clean.encode(nil))
	f.Add(dirty.encode(nil))
	f.Add([]byte("WQIC\x01\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCheckpoint(data)
		if err != nil {
			return
		}
		if got := c.encode(nil); !bytes.Equal(got, data) {
			t.Fatalf("checkpoint %x re-encodes as %x", data, got)
		}
	})
}

// validSegment returns a segment image with n ready entries starting at id
// base.
func validSegment(base uint64, n int) []byte {
	b := make([]byte, n*SlotSize)
	for i := range n {
		encodeSlot(b[i*SlotSize:], entryFor(base+uint64(i)))
	}
	return b
}

// FuzzOpenSegment feeds arbitrary bytes to Open as a segment file, alone or
// next to a valid segment before or after it. Open must not panic, and
// whatever it recovers must be consistent and usable.
func FuzzOpenSegment(f *testing.F) {
	seg := validSegment(0, 20)
	torn := append(bytes.Clone(seg), seg[:13]...)
	mid := bytes.Clone(seg)
	mid[5*SlotSize+3] ^= 0x80
	f.Add(seg, uint8(0))
	f.Add(torn, uint8(1))
	f.Add(mid, uint8(2))
	f.Add([]byte{}, uint8(0))
	f.Add(bytes.Repeat([]byte{0xff}, SegmentSize+40), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		dir := t.TempDir()
		write := func(num uint64, b []byte) {
			if err := os.WriteFile(filepath.Join(dir, segName(num)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		switch mode % 3 {
		case 0:
			write(0, data)
		case 1: // fuzzed segment before a valid one: damage in the middle
			write(0, data)
			write(1, validSegment(SlotsPerSegment, 3))
		case 2: // fuzzed segment after a valid one: damage at the tail
			write(0, validSegment(0, 3))
			write(1, data)
		}
		cfg := testConfig(dir)
		ix, rec, err := Open(cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer ix.Close()
		n := 0
		if err := ix.ForEach(func(uint64, Entry) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		m := 0
		next, err := ix.ReadRange(0, 1<<20, func(uint64, Entry) bool { m++; return true })
		if err != nil {
			t.Fatal(err)
		}
		if uint64(n) != rec.Live || uint64(m) != rec.Live || next < rec.NextSeq {
			t.Fatalf("recovered %+v but ForEach saw %d, ReadRange %d up to %d", rec, n, m, next)
		}
		seq, err := ix.Append(entryFor(1))
		if err != nil || seq < rec.NextSeq {
			t.Fatalf("Append after recovery = %d, %v (NextSeq %d)", seq, err, rec.NextSeq)
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		ix, rec2, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		if !rec2.Clean || rec2.Live != rec.Live+1 {
			t.Fatalf("reopen after recovery %+v: %+v", rec, rec2)
		}
	})
}
