package msgstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record layout (big-endian), as stored in a segment:
//
//	length     uint32  bytes after the CRC
//	crc        uint32  CRC32C (Castagnoli) of everything after it
//	version    uint8   recordVersion
//	flags      uint8   owner-defined
//	offset     uint64  monotonic across segments
//	timestamp  int64   unix nanoseconds
//	exchange   uint8 length + bytes
//	routingKey uint8 length + bytes
//	properties uint32 length + bytes
//	body       uint32 length + bytes
const (
	recordVersion = 1
	// recordHeaderSize is the length and CRC words in front of the checksummed part.
	recordHeaderSize = 8
	// recordFixedSize is the checksummed part of a record whose fields are all empty.
	recordFixedSize = 1 + 1 + 8 + 8 + 1 + 1 + 4 + 4
	// MinRecordSize is the encoded size of a record with empty fields.
	MinRecordSize = recordHeaderSize + recordFixedSize

	offVersion   = recordHeaderSize
	offFlags     = offVersion + 1
	offOffset    = offFlags + 1
	offTimestamp = offOffset + 8
	offFields    = offTimestamp + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one stored message. The exchange, routing key, properties and body
// are opaque bytes to this package. Records returned by reads own their memory
// unless documented otherwise (Iterator.Record aliases a reused buffer).
type Record struct {
	// Offset is assigned by Append; its value on input is ignored.
	Offset uint64
	// Timestamp is unix nanoseconds; Append sets it to the current time when zero.
	Timestamp int64
	// Flags is owner-defined (for example "persistent"); stored and returned as is.
	Flags uint8
	// Exchange is at most 255 bytes.
	Exchange []byte
	// RoutingKey is at most 255 bytes.
	RoutingKey []byte
	// Properties are the encoded AMQP content properties.
	Properties []byte
	// Body is the message body.
	Body []byte
}

// EncodedSize returns the number of bytes r occupies in a segment.
func (r *Record) EncodedSize() int {
	return MinRecordSize + len(r.Exchange) + len(r.RoutingKey) + len(r.Properties) + len(r.Body)
}

// AppendRecord appends the encoding of r (with r.Offset) to dst.
func AppendRecord(dst []byte, r *Record) ([]byte, error) {
	if len(r.Exchange) > 255 || len(r.RoutingKey) > 255 {
		return dst, ErrFieldTooLong
	}
	n := r.EncodedSize()
	if n > MaxRecordLimit {
		return dst, fmt.Errorf("%w: %d bytes", ErrRecordTooLarge, n)
	}
	start := len(dst)
	dst = growLen(dst, n)
	b := dst[start:]
	putRecordFields(b, r)
	sealRecord(b, r.Offset)
	return dst, nil
}

// growLen extends b by n bytes, reallocating only when capacity is short.
func growLen(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, len(b)+n+len(b)/4)
	copy(nb, b)
	return nb
}

// putRecordFields writes everything but the offset and CRC into b, which must be
// exactly r.EncodedSize() bytes; sealRecord finishes the record. Splitting the two
// lets Append copy the body outside the log lock.
func putRecordFields(b []byte, r *Record) {
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(len(b)-recordHeaderSize))
	b[offVersion] = recordVersion
	b[offFlags] = r.Flags
	be.PutUint64(b[offTimestamp:], uint64(r.Timestamp))
	p := offFields
	b[p] = byte(len(r.Exchange))
	p += 1 + copy(b[p+1:], r.Exchange)
	b[p] = byte(len(r.RoutingKey))
	p += 1 + copy(b[p+1:], r.RoutingKey)
	be.PutUint32(b[p:], uint32(len(r.Properties)))
	p += 4 + copy(b[p+4:], r.Properties)
	be.PutUint32(b[p:], uint32(len(r.Body)))
	copy(b[p+4:], r.Body)
}

// sealRecord stores the offset and computes the CRC of an encoded record.
func sealRecord(b []byte, offset uint64) {
	binary.BigEndian.PutUint64(b[offOffset:], offset)
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[recordHeaderSize:], castagnoli))
}

// recordLen validates the length word of a record header and returns the
// record's total size. It does not look past the header.
func recordLen(hdr []byte) (int, error) {
	if len(hdr) < recordHeaderSize {
		return 0, ErrTruncated
	}
	n := binary.BigEndian.Uint32(hdr)
	if n < recordFixedSize || n > MaxRecordLimit-recordHeaderSize {
		return 0, corruptf("impossible record length %d", n)
	}
	return recordHeaderSize + int(n), nil
}

// DecodeRecord decodes the record at the start of b and returns it with the
// number of bytes it occupies. The record's slices alias b. It verifies the
// length, CRC, version and that the fields fill the record exactly.
func DecodeRecord(b []byte) (Record, int, error) {
	n, err := recordLen(b)
	if err != nil {
		return Record{}, 0, err
	}
	if len(b) < n {
		return Record{}, 0, fmt.Errorf("%w: have %d of %d bytes", ErrTruncated, len(b), n)
	}
	b = b[:n]
	be := binary.BigEndian
	if sum := crc32.Checksum(b[recordHeaderSize:], castagnoli); sum != be.Uint32(b[4:]) {
		return Record{}, 0, corruptf("crc mismatch (stored %08x, computed %08x)", be.Uint32(b[4:]), sum)
	}
	if b[offVersion] != recordVersion {
		return Record{}, 0, corruptf("unknown record version %d", b[offVersion])
	}
	r := Record{
		Flags:     b[offFlags],
		Offset:    be.Uint64(b[offOffset:]),
		Timestamp: int64(be.Uint64(b[offTimestamp:])),
	}
	p := offFields
	// Each step checks that the declared length fits before slicing; the fixed
	// part guarantees the first length byte exists.
	var ok bool
	if r.Exchange, p, ok = field8(b, p); !ok {
		return Record{}, 0, corruptf("exchange overruns record")
	}
	if r.RoutingKey, p, ok = field8(b, p); !ok {
		return Record{}, 0, corruptf("routing key overruns record")
	}
	if r.Properties, p, ok = field32(b, p); !ok {
		return Record{}, 0, corruptf("properties overrun record")
	}
	if r.Body, p, ok = field32(b, p); !ok {
		return Record{}, 0, corruptf("body overruns record")
	}
	if p != n {
		return Record{}, 0, corruptf("%d trailing bytes in record", n-p)
	}
	return r, n, nil
}

func field8(b []byte, p int) ([]byte, int, bool) {
	if p+1 > len(b) {
		return nil, p, false
	}
	l := int(b[p])
	p++
	if l > len(b)-p {
		return nil, p, false
	}
	return b[p : p+l : p+l], p + l, true
}

func field32(b []byte, p int) ([]byte, int, bool) {
	if p+4 > len(b) {
		return nil, p, false
	}
	l := binary.BigEndian.Uint32(b[p:])
	p += 4
	if uint64(l) > uint64(len(b)-p) {
		return nil, p, false
	}
	return b[p : p+int(l) : p+int(l)], p + int(l), true
}

// recordOffset returns the offset field of an encoded record (no validation).
func recordOffset(b []byte) uint64 { return binary.BigEndian.Uint64(b[offOffset:]) }
