package msgstore

import (
	"fmt"
	"io"
	"math"
	"sync/atomic"
)

// scanner decodes records one after another from a segment file through a
// reusable buffer. It is used by recovery, index rebuilds, index-interval
// lookups, iterators and compaction, so every reader validates records the same way.
type scanner struct {
	r     io.ReaderAt
	pos   int64 // file position of the next record
	end   int64 // bytes of the file that hold complete records (or may, during recovery)
	chunk int   // preferred read size
	buf   []byte
	start int64 // file position of buf[0]
	n     int   // valid bytes in buf
	read  *atomic.Int64
}

func newScanner(r io.ReaderAt, pos, end int64, chunk int, read *atomic.Int64) *scanner {
	return &scanner{r: r, pos: pos, end: end, chunk: chunk, read: read}
}

// next returns the record at the scanner's position, its raw encoding and its
// position, and advances. It returns io.EOF exactly at end and an ErrCorrupt (or
// read) error for anything else that is not a whole valid record. The record
// and raw alias the scanner's buffer until the next call.
func (s *scanner) next() (Record, []byte, int64, error) {
	pos := s.pos
	if pos >= s.end {
		return Record{}, nil, pos, io.EOF
	}
	if s.end-pos < recordHeaderSize {
		return Record{}, nil, pos, corruptf("partial record header: %d bytes at %d", s.end-pos, pos)
	}
	hdr, err := s.fetch(pos, recordHeaderSize)
	if err != nil {
		return Record{}, nil, pos, err
	}
	n, err := recordLen(hdr)
	if err != nil {
		return Record{}, nil, pos, fmt.Errorf("at %d: %w", pos, err)
	}
	if int64(n) > s.end-pos {
		return Record{}, nil, pos, corruptf("record of %d bytes at %d runs past the end of data at %d", n, pos, s.end)
	}
	raw, err := s.fetch(pos, n)
	if err != nil {
		return Record{}, nil, pos, err
	}
	rec, _, err := DecodeRecord(raw)
	if err != nil {
		return Record{}, nil, pos, fmt.Errorf("at %d: %w", pos, err)
	}
	s.pos += int64(n)
	return rec, raw, pos, nil
}

// fetch returns n bytes at pos, reading a chunk when the buffer does not hold them.
// The caller guarantees pos+n <= end.
func (s *scanner) fetch(pos int64, n int) ([]byte, error) {
	if pos >= s.start && pos+int64(n) <= s.start+int64(s.n) {
		o := int(pos - s.start)
		return s.buf[o : o+n], nil
	}
	want := max(n, s.chunk)
	if rest := s.end - pos; int64(want) > rest {
		want = int(rest)
	}
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	buf := s.buf[:want]
	m, err := s.r.ReadAt(buf, pos)
	if s.read != nil {
		s.read.Add(int64(m))
	}
	s.start, s.n = pos, m
	if m < n {
		if err == nil || err == io.EOF {
			return nil, corruptf("file ends at %d, inside a record at %d", pos+int64(m), pos)
		}
		return nil, err
	}
	return buf[:n], nil
}

// scanResult is what a full scan of one segment file found.
type scanResult struct {
	validEnd  int64  // end of the last good record
	lastPlus1 uint64 // last good offset + 1; 0 when none
	records   int64
	entries   []indexEntry
	err       error // why the scan stopped before the end; nil when the file is whole
}

// scanSegment reads a segment from the start, checking every record and that
// offsets are strictly increasing, at least base and below limit (the next
// segment's base). It stops at the first bad record.
func scanSegment(r io.ReaderAt, base uint64, size int64, limit uint64, interval int, read *atomic.Int64) scanResult {
	sc := newScanner(r, 0, size, 256<<10, read)
	ib := indexBuilder{interval: int64(interval)}
	var res scanResult
	for {
		rec, raw, pos, err := sc.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			res.err = err
			break
		}
		switch {
		case rec.Offset < base || rec.Offset-base > math.MaxUint32:
			res.err = corruptf("record at %d has offset %d outside segment %d", pos, rec.Offset, base)
		case res.lastPlus1 > 0 && rec.Offset < res.lastPlus1:
			res.err = corruptf("record at %d has offset %d after offset %d", pos, rec.Offset, res.lastPlus1-1)
		case rec.Offset >= limit:
			res.err = corruptf("record at %d has offset %d, not below the next segment's base %d", pos, rec.Offset, limit)
		}
		if res.err != nil {
			break
		}
		ib.add(uint32(rec.Offset-base), pos)
		res.lastPlus1 = rec.Offset + 1
		res.records++
		res.validEnd = pos + int64(len(raw))
	}
	res.entries = ib.entries
	return res
}
