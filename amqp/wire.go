package amqp

import (
	"encoding/binary"
	"fmt"
)

// Primitive readers return the value, the offset after it and an error wrapping
// ErrTruncated when b is too short. They never panic on any input.

func readOctet(b []byte, off int) (uint8, int, error) {
	if off+1 > len(b) {
		return 0, off, ErrTruncated
	}
	return b[off], off + 1, nil
}

func readShort(b []byte, off int) (uint16, int, error) {
	if off+2 > len(b) {
		return 0, off, ErrTruncated
	}
	return binary.BigEndian.Uint16(b[off:]), off + 2, nil
}

func readLong(b []byte, off int) (uint32, int, error) {
	if off+4 > len(b) {
		return 0, off, ErrTruncated
	}
	return binary.BigEndian.Uint32(b[off:]), off + 4, nil
}

func readLonglong(b []byte, off int) (uint64, int, error) {
	if off+8 > len(b) {
		return 0, off, ErrTruncated
	}
	return binary.BigEndian.Uint64(b[off:]), off + 8, nil
}

// readShortstrBytes returns the bytes of a short string, aliasing b.
func readShortstrBytes(b []byte, off int) ([]byte, int, error) {
	if off >= len(b) {
		return nil, off, ErrTruncated
	}
	n := int(b[off])
	off++
	if off+n > len(b) {
		return nil, off, ErrTruncated
	}
	return b[off : off+n], off + n, nil
}

// readShortstrInto decodes a short string, returning cur unchanged (no allocation)
// when the bytes equal it.
func readShortstrInto(b []byte, off int, cur string) (string, int, error) {
	raw, off, err := readShortstrBytes(b, off)
	if err != nil {
		return cur, off, err
	}
	if string(raw) == cur {
		return cur, off, nil
	}
	return string(raw), off, nil
}

// readLongstr returns a long string's bytes, aliasing b.
func readLongstr(b []byte, off int) ([]byte, int, error) {
	n, off, err := readLong(b, off)
	if err != nil {
		return nil, off, err
	}
	if uint64(off)+uint64(n) > uint64(len(b)) {
		return nil, off, ErrTruncated
	}
	return b[off : off+int(n) : off+int(n)], off + int(n), nil
}

func checkEnd(b []byte, off int) error {
	if off != len(b) {
		return fmt.Errorf("%w: %d of %d bytes used", ErrTrailingBytes, off, len(b))
	}
	return nil
}

func appendShort(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

func appendLong(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

func appendLonglong(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// appendShortstr appends a short string, cut to 255 bytes.
func appendShortstr(b []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255]
	}
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func appendLongstr(b []byte, s []byte) []byte {
	b = appendLong(b, uint32(len(s)))
	return append(b, s...)
}
