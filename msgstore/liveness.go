package msgstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// segLive tracks which records of one segment are referenced, compactly: one
// bit per offset in the segment, plus — only in segments that hold a record
// routed to several queues — one byte per offset counting the extra references
// (refs-1), with a map for the rare record that has 256 or more. A million live
// single-queue messages cost about 125 KiB; a million fan-out messages about 1.1 MiB.
// All fields are guarded by Store.mu.
type segLive struct {
	seg       *segment
	base      uint64
	bits      []uint64
	extra     []uint8           // refs-1 per offset; nil until needed; 255 means "see over"
	over      map[uint32]uint32 // refs-1 for records with 255 or more extra references
	live      int64             // live records
	liveBytes int64             // encoded bytes of live records

	compacting        bool
	releasedDuring    int64     // bytes released while compacting
	cleanSinceCompact bool      // compacted and nothing released since: do not compact again
	retryAt           time.Time // maintenance failed; leave the segment alone until then
}

func (sl *segLive) isLive(rel uint32) bool {
	w := rel / 64
	return int(w) < len(sl.bits) && sl.bits[w]&(1<<(rel%64)) != 0
}

func (sl *segLive) getExtra(rel uint32) uint32 {
	if int(rel) >= len(sl.extra) {
		return 0
	}
	if v := sl.extra[rel]; v != 255 {
		return uint32(v)
	}
	return sl.over[rel]
}

func (sl *segLive) setExtra(rel uint32, v uint32) {
	if int(rel) >= len(sl.extra) {
		if v == 0 {
			return
		}
		sl.extra = append(sl.extra, make([]uint8, int(rel)+1-len(sl.extra))...)
	}
	if sl.extra[rel] == 255 && v < 255 {
		delete(sl.over, rel)
	}
	if v < 255 {
		sl.extra[rel] = uint8(v)
		return
	}
	if sl.over == nil {
		sl.over = make(map[uint32]uint32)
	}
	sl.extra[rel] = 255
	sl.over[rel] = v
}

// addRefs adds n references to the record at rel of the given size and
// reports whether it was dead before. It fails if the count would overflow.
func (sl *segLive) addRefs(rel, n uint32, size int64) (bool, error) {
	if !sl.isLive(rel) {
		w := int(rel / 64)
		if w >= len(sl.bits) {
			sl.bits = append(sl.bits, make([]uint64, w+1-len(sl.bits))...)
		}
		sl.bits[w] |= 1 << (rel % 64)
		sl.live++
		sl.liveBytes += size
		sl.setExtra(rel, n-1)
		return true, nil
	}
	cur := sl.getExtra(rel)
	if uint64(cur)+uint64(n) >= math.MaxUint32 {
		return false, fmt.Errorf("%w: reference count overflow at offset %d", ErrInvalidRefs, sl.base+uint64(rel))
	}
	sl.setExtra(rel, cur+n)
	return false, nil
}

// release drops one reference. freed reports the record became dead; ok is
// false if it was not live.
func (sl *segLive) release(rel uint32, size int64) (freed, ok bool) {
	if !sl.isLive(rel) {
		return false, false
	}
	if cur := sl.getExtra(rel); cur > 0 {
		sl.setExtra(rel, cur-1)
		return false, true
	}
	sl.bits[rel/64] &^= 1 << (rel % 64)
	sl.live--
	sl.liveBytes -= size
	// Sizes come from the callers' Locs; never let a wrong one drive the
	// counter below what is certainly true.
	if sl.live == 0 || sl.liveBytes < 0 {
		sl.liveBytes = 0
	}
	return true, true
}

// memory estimates the bytes held by the tables.
func (sl *segLive) memory() int64 {
	return int64(cap(sl.bits))*8 + int64(cap(sl.extra)) + int64(len(sl.over))*24 + 160
}

// deadBytes is the part of the segment file not taken by live records.
func (sl *segLive) deadBytes() int64 {
	return max(0, sl.seg.size.Load()-sl.liveBytes)
}

// bitSet reports whether bit rel is set in a bitmap.
func bitSet(bm []uint64, rel uint64) bool {
	w := rel / 64
	return w < uint64(len(bm)) && bm[w]&(1<<(rel%64)) != 0
}

// Store checkpoint (the "extra" part of checkpoint.dat), big-endian:
//
//	magic "WMST", version uint8, segment count uint32, then per segment:
//	base uint64, live uint64, liveBytes uint64, flags uint8 (bit 0: cleanSinceCompact),
//	words uint32 + words × uint64 (live bitmap),
//	extra uint32 + bytes, over uint32 + over × (rel uint32, refs-1 uint32)
var livenessMagic = []byte("WMST")

const livenessVersion = 1

// minSegTableSize is the encoded size of a segment's table with no bitmap
// word, no extra counts and no overflow: base, live, liveBytes, flags and
// the three counts. The segment count is checked against it.
const minSegTableSize = 8 + 8 + 8 + 1 + 4 + 4 + 4

func encodeLiveness(segs []*segLive) []byte {
	be := binary.BigEndian
	n := 9
	for _, sl := range segs {
		n += minSegTableSize + len(sl.bits)*8 + len(sl.extra) + len(sl.over)*8
	}
	b := make([]byte, 0, n)
	b = append(b, livenessMagic...)
	b = append(b, livenessVersion)
	b = be.AppendUint32(b, uint32(len(segs)))
	for _, sl := range segs {
		b = be.AppendUint64(b, sl.base)
		b = be.AppendUint64(b, uint64(sl.live))
		b = be.AppendUint64(b, uint64(sl.liveBytes))
		var flags uint8
		if sl.cleanSinceCompact {
			flags |= 1
		}
		b = append(b, flags)
		b = be.AppendUint32(b, uint32(len(sl.bits)))
		for _, w := range sl.bits {
			b = be.AppendUint64(b, w)
		}
		b = be.AppendUint32(b, uint32(len(sl.extra)))
		b = append(b, sl.extra...)
		b = be.AppendUint32(b, uint32(len(sl.over)))
		for rel, v := range sl.over {
			b = be.AppendUint32(b, rel)
			b = be.AppendUint32(b, v)
		}
	}
	return b
}

// decodeLiveness rebuilds the tables for exactly the given segments; any
// disagreement (other bases, counts that do not match the bitmap) is an error
// and the Store falls back to a reference rebuild.
func decodeLiveness(b []byte, segs []*segment) ([]*segLive, error) {
	d := decoder{b: b}
	if string(d.bytes(4)) != string(livenessMagic) || d.u8() != livenessVersion {
		return nil, corruptf("liveness tables: bad magic or version")
	}
	n := d.count(minSegTableSize)
	if d.err == nil && n != len(segs) {
		return nil, corruptf("liveness tables cover %d segments, log has %d", n, len(segs))
	}
	out := make([]*segLive, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		sl := &segLive{seg: segs[i], base: d.u64(), live: int64(d.u64()), liveBytes: int64(d.u64())}
		sl.cleanSinceCompact = d.u8()&1 != 0
		if d.err == nil && sl.base != segs[i].base {
			return nil, corruptf("liveness table %d is for segment %d, log has %d", i, sl.base, segs[i].base)
		}
		words := d.count(8)
		sl.bits = make([]uint64, words)
		var pop int64
		for w := range sl.bits {
			sl.bits[w] = d.u64()
			pop += int64(bits.OnesCount64(sl.bits[w]))
		}
		if ne := d.count(1); ne > 0 {
			sl.extra = append([]uint8(nil), d.bytes(ne)...)
		}
		no := d.count(8)
		for j := 0; j < no && d.err == nil; j++ {
			if sl.over == nil {
				sl.over = make(map[uint32]uint32, no)
			}
			sl.over[d.u32()] = d.u32()
		}
		if d.err == nil && (pop != sl.live || sl.liveBytes < 0) {
			return nil, corruptf("liveness table for segment %d counts %d live, bitmap has %d", sl.base, sl.live, pop)
		}
		out = append(out, sl)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = corruptf("liveness tables: %d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return out, nil
}
