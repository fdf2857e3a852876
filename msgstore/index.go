package msgstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
)

// Sparse index file (%020d.idx) layout, big-endian:
//
//	entries    count × (relative offset uint32, file position uint32)
//	count      uint32
//	lastPlus1  uint64  last offset in the segment + 1 (0: segment empty)
//	size       uint64  segment bytes the index describes
//	crc        uint32  CRC32C of everything before it
//
// The trailer sits at the end so Open can read it with one small pread and
// compare size with the segment file's size: equal means the segment was sealed
// (fsynced, then indexed) and needs no scan after a crash.
const (
	idxEntrySize   = 8
	idxTrailerSize = 4 + 8 + 8 + 4
)

// indexEntry maps a record's offset (relative to the segment base) to its position.
type indexEntry struct {
	rel uint32
	pos uint32
}

// indexInfo is what an index trailer says about its segment.
type indexInfo struct {
	count     uint32
	lastPlus1 uint64
	size      int64
}

// indexBuilder adds an entry for the first record at or after every interval bytes.
type indexBuilder struct {
	interval int64
	next     int64
	entries  []indexEntry
}

func (b *indexBuilder) add(rel uint32, pos int64) {
	if pos < b.next {
		return
	}
	b.entries = append(b.entries, indexEntry{rel: rel, pos: uint32(pos)})
	b.next = pos + b.interval
}

// encodeIndex renders an index file.
func encodeIndex(entries []indexEntry, lastPlus1 uint64, size int64) []byte {
	b := make([]byte, 0, len(entries)*idxEntrySize+idxTrailerSize)
	be := binary.BigEndian
	for _, e := range entries {
		b = be.AppendUint32(b, e.rel)
		b = be.AppendUint32(b, e.pos)
	}
	b = be.AppendUint32(b, uint32(len(entries)))
	b = be.AppendUint64(b, lastPlus1)
	b = be.AppendUint64(b, uint64(size))
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// parseIndexTrailer decodes the trailer at the end of an index file whose total
// size is fileSize, checking the size is consistent with the entry count.
func parseIndexTrailer(t []byte, fileSize int64) (indexInfo, error) {
	if len(t) != idxTrailerSize {
		return indexInfo{}, corruptf("index trailer is %d bytes", len(t))
	}
	be := binary.BigEndian
	info := indexInfo{count: be.Uint32(t), lastPlus1: be.Uint64(t[4:]), size: int64(be.Uint64(t[12:]))}
	if int64(info.count)*idxEntrySize+idxTrailerSize != fileSize {
		return indexInfo{}, corruptf("index file is %d bytes for %d entries", fileSize, info.count)
	}
	if info.size < 0 || info.size > MaxSegmentSize+MaxRecordLimit {
		return indexInfo{}, corruptf("index describes impossible segment size %d", info.size)
	}
	return info, nil
}

// decodeIndex decodes and verifies a whole index file for a segment with the given base.
func decodeIndex(b []byte) ([]indexEntry, indexInfo, error) {
	if len(b) < idxTrailerSize {
		return nil, indexInfo{}, corruptf("index file is %d bytes", len(b))
	}
	info, err := parseIndexTrailer(b[len(b)-idxTrailerSize:], int64(len(b)))
	if err != nil {
		return nil, indexInfo{}, err
	}
	crcAt := len(b) - 4
	if crc32.Checksum(b[:crcAt], castagnoli) != binary.BigEndian.Uint32(b[crcAt:]) {
		return nil, indexInfo{}, corruptf("index crc mismatch")
	}
	entries := make([]indexEntry, info.count)
	for i := range entries {
		e := indexEntry{rel: binary.BigEndian.Uint32(b[i*8:]), pos: binary.BigEndian.Uint32(b[i*8+4:])}
		if i > 0 && (e.rel <= entries[i-1].rel || e.pos <= entries[i-1].pos) {
			return nil, indexInfo{}, corruptf("index entries out of order at %d", i)
		}
		if int64(e.pos) >= info.size {
			return nil, indexInfo{}, corruptf("index entry %d points past the segment", i)
		}
		entries[i] = e
	}
	return entries, info, nil
}

// readIndexTrailer reads only the trailer of an index file: one stat and one pread.
func readIndexTrailer(path string) (indexInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return indexInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return indexInfo{}, err
	}
	if st.Size() < idxTrailerSize {
		return indexInfo{}, corruptf("index file %s is %d bytes", path, st.Size())
	}
	t := make([]byte, idxTrailerSize)
	if _, err := f.ReadAt(t, st.Size()-idxTrailerSize); err != nil {
		return indexInfo{}, fmt.Errorf("read index trailer %s: %w", path, err)
	}
	return parseIndexTrailer(t, st.Size())
}

// writeFileAtomic writes data to path through a temporary file and a rename, so a
// reader sees the old file or the new one. With sync it fsyncs the file before
// the rename; the caller fsyncs the directory.
func writeFileAtomic(path string, data []byte, sync bool) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil && sync {
		werr = fdatasync(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp)
		return wrapWriteErr(werr)
	}
	return os.Rename(tmp, path)
}

// lookupEntry returns the position to start scanning from for relative offset
// rel, and the position of the following entry (or -1) that bounds the scan.
func lookupEntry(entries []indexEntry, rel uint32) (start, bound int64) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].rel > rel })
	bound = -1
	if i < len(entries) {
		bound = int64(entries[i].pos)
	}
	if i == 0 {
		return 0, bound
	}
	return int64(entries[i-1].pos), bound
}
