package msgstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// checkpoint.dat layout (big-endian):
//
//	magic "WMCP", version uint8
//	next offset uint64
//	segment count uint32, then per segment: base uint64, size uint64, lastPlus1 uint64
//	extra length uint32 + extra (the Store's liveness tables; empty for a bare Log)
//	crc32c uint32 of everything before it
//
// It is written on Close only and deleted by Open, so its presence means the
// last shutdown was clean and nothing has been written since.
const (
	checkpointName    = "checkpoint.dat"
	checkpointVersion = 1
	// maxCheckpointSize bounds what Open reads before it trusts the CRC.
	maxCheckpointSize = 1 << 30
)

var checkpointMagic = []byte("WMCP")

type cpSegment struct {
	base      uint64
	size      int64
	lastPlus1 uint64
}

type checkpoint struct {
	next  uint64
	segs  []cpSegment
	extra []byte
}

func (c *checkpoint) encode() []byte {
	be := binary.BigEndian
	b := make([]byte, 0, 32+len(c.segs)*24+len(c.extra))
	b = append(b, checkpointMagic...)
	b = append(b, checkpointVersion)
	b = be.AppendUint64(b, c.next)
	b = be.AppendUint32(b, uint32(len(c.segs)))
	for _, s := range c.segs {
		b = be.AppendUint64(b, s.base)
		b = be.AppendUint64(b, uint64(s.size))
		b = be.AppendUint64(b, s.lastPlus1)
	}
	b = be.AppendUint32(b, uint32(len(c.extra)))
	b = append(b, c.extra...)
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < 4 {
		return nil, corruptf("checkpoint is %d bytes", len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, corruptf("checkpoint crc mismatch")
	}
	d := decoder{b: body}
	if string(d.bytes(4)) != string(checkpointMagic) || d.u8() != checkpointVersion {
		return nil, corruptf("checkpoint has a bad magic or version")
	}
	c := &checkpoint{next: d.u64()}
	n := d.count(24)
	for i := 0; i < n && d.err == nil; i++ {
		c.segs = append(c.segs, cpSegment{base: d.u64(), size: int64(d.u64()), lastPlus1: d.u64()})
	}
	c.extra = d.bytes(int(d.count(1)))
	if d.err == nil && len(d.b) != 0 {
		d.err = corruptf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("checkpoint: %w", d.err)
	}
	return c, nil
}

// readCheckpoint reads and verifies checkpoint.dat; os.ErrNotExist when absent.
func readCheckpoint(dir string) (*checkpoint, error) {
	path := filepath.Join(dir, checkpointName)
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCheckpointSize {
		return nil, corruptf("checkpoint is %d bytes", st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeCheckpoint(b)
}

// decoder reads big-endian fields and remembers the first error, so decoding
// code reads straight through and checks once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = corruptf("truncated: want %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) bytes(n int) []byte { return d.take(n) }

// count reads a uint32 element count and rejects one that cannot fit in the
// remaining bytes at elemSize bytes each, so corrupt input cannot make us allocate.
func (d *decoder) count(elemSize int) int {
	n := d.u32()
	if d.err == nil && uint64(n)*uint64(elemSize) > uint64(len(d.b)) {
		d.err = corruptf("count %d exceeds remaining %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}
