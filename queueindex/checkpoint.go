package queueindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Checkpoint file. It is always replaced whole (write to checkpointTmp, sync,
// rename, sync the directory), never updated in place.
//
// Layout (big endian):
//
//	0   magic "WQIC"
//	4   version (1)
//	5   flags (bit 0: clean)
//	6   reserved (2 bytes, zero)
//	8   next sequence id
//	16  lease: every sequence id ever handed out is below it
//	24  segment count n
//	28  n × {segment number u64, live u32, file size u32, live bytes u64}
//	..  CRC32C of everything before it
//
// A clean checkpoint (written by Close) lists every segment file with its live
// count, so Open need not read slots. A dirty one (written by Open and when the
// lease moves) lists none; it only carries the sequence floor.
const (
	checkpointName  = "checkpoint"
	checkpointTmp   = "checkpoint.tmp"
	checkpointMagic = "WQIC"

	checkpointVersion   = 1
	checkpointFlagClean = 1 << 0

	checkpointHeader  = 28
	checkpointSegSize = 24
	checkpointMinSize = checkpointHeader + 4
	// checkpointMaxSegs bounds the segment list a decoder accepts: 2^21
	// segments are 2^33 (8.6 billion) messages in one queue. With
	// checkpointMaxSize it keeps a damaged file from costing a huge read or
	// allocation.
	checkpointMaxSegs = 1 << 21
	checkpointMaxSize = checkpointMinSize + checkpointMaxSegs*checkpointSegSize
)

// checkpoint is the decoded checkpoint file.
type checkpoint struct {
	clean bool
	next  uint64
	lease uint64
	segs  []segment
}

// encode appends the checkpoint's encoding to dst.
func (c *checkpoint) encode(dst []byte) []byte {
	var flags byte
	if c.clean {
		flags |= checkpointFlagClean
	}
	start := len(dst)
	dst = append(dst, checkpointMagic...)
	dst = append(dst, checkpointVersion, flags, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, c.next)
	dst = binary.BigEndian.AppendUint64(dst, c.lease)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.segs)))
	for _, s := range c.segs {
		dst = binary.BigEndian.AppendUint64(dst, s.num)
		dst = binary.BigEndian.AppendUint32(dst, s.live)
		dst = binary.BigEndian.AppendUint32(dst, s.size)
		dst = binary.BigEndian.AppendUint64(dst, s.bytes)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// decodeCheckpoint decodes and validates a checkpoint file's contents. Every
// failure wraps ErrCorrupt.
func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < checkpointMinSize {
		return nil, fmt.Errorf("queueindex: checkpoint of %d bytes: %w", len(b), ErrCorrupt)
	}
	body := b[:len(b)-4]
	if got, want := binary.BigEndian.Uint32(b[len(b)-4:]), crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("queueindex: checkpoint crc %08x, want %08x: %w", got, want, ErrCorrupt)
	}
	if string(b[:4]) != checkpointMagic || b[4] != checkpointVersion || b[5]&^checkpointFlagClean != 0 || b[6] != 0 || b[7] != 0 {
		return nil, fmt.Errorf("queueindex: checkpoint header % x: %w", b[:8], ErrCorrupt)
	}
	c := &checkpoint{
		clean: b[5]&checkpointFlagClean != 0,
		next:  binary.BigEndian.Uint64(b[8:]),
		lease: binary.BigEndian.Uint64(b[16:]),
	}
	n := binary.BigEndian.Uint32(b[24:])
	if n > checkpointMaxSegs || uint64(len(body)) != checkpointHeader+uint64(n)*checkpointSegSize {
		return nil, fmt.Errorf("queueindex: checkpoint lists %d segments in %d bytes: %w", n, len(b), ErrCorrupt)
	}
	if c.lease < c.next {
		return nil, fmt.Errorf("queueindex: checkpoint lease %d below next %d: %w", c.lease, c.next, ErrCorrupt)
	}
	if n > 0 {
		c.segs = make([]segment, n)
	}
	p := body[checkpointHeader:]
	for i := range c.segs {
		s := segment{
			num:   binary.BigEndian.Uint64(p),
			live:  binary.BigEndian.Uint32(p[8:]),
			size:  binary.BigEndian.Uint32(p[12:]),
			bytes: binary.BigEndian.Uint64(p[16:]),
		}
		p = p[checkpointSegSize:]
		switch {
		case i > 0 && s.num <= c.segs[i-1].num:
			return nil, fmt.Errorf("queueindex: checkpoint segments out of order at %d: %w", s.num, ErrCorrupt)
		case c.next == 0 || s.num > (c.next-1)/SlotsPerSegment:
			return nil, fmt.Errorf("queueindex: checkpoint segment %d at or past next seq %d: %w", s.num, c.next, ErrCorrupt)
		case s.live > SlotsPerSegment || s.size > SegmentSize:
			// The size need not be a multiple of SlotSize: a file damaged
			// in the middle keeps its partial slot.
			return nil, fmt.Errorf("queueindex: checkpoint segment %d live %d size %d: %w", s.num, s.live, s.size, ErrCorrupt)
		}
		c.segs[i] = s
	}
	return c, nil
}

// readCheckpoint reads the index's checkpoint. It returns (nil, nil) when
// there is none.
func (ix *Index) readCheckpoint() (*checkpoint, error) {
	var b []byte
	err := ix.files.withFile(filepath.Join(ix.cfg.Dir, checkpointName), os.O_RDONLY, func(f *os.File) error {
		var err error
		b, err = io.ReadAll(io.LimitReader(f, checkpointMaxSize+1))
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queueindex: read checkpoint: %w", err)
	}
	if len(b) > checkpointMaxSize {
		return nil, fmt.Errorf("queueindex: checkpoint larger than %d bytes: %w", checkpointMaxSize, ErrCorrupt)
	}
	return decodeCheckpoint(b)
}

// writeCheckpoint replaces the index's checkpoint with c. With sync it syncs
// the file before the rename and the directory after it, so the new
// checkpoint is durable when it returns. Called with ckMu held (or, in Open,
// before anyone else has the index); it encodes into ix.ckbuf.
func (ix *Index) writeCheckpoint(c *checkpoint, sync bool) error {
	ix.ckbuf = c.encode(ix.ckbuf[:0])
	tmp := filepath.Join(ix.cfg.Dir, checkpointTmp)
	err := ix.files.withFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, func(f *os.File) error {
		if _, err := f.Write(ix.ckbuf); err != nil || !sync {
			return err
		}
		return fdatasync(f)
	})
	if err != nil {
		return fmt.Errorf("queueindex: write checkpoint: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(ix.cfg.Dir, checkpointName)); err != nil {
		return fmt.Errorf("queueindex: rename checkpoint: %w", err)
	}
	if sync {
		if err := ix.syncDir(); err != nil {
			return fmt.Errorf("queueindex: after checkpoint: %w", err)
		}
	}
	return nil
}
