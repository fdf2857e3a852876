package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"
)

// MaxTableDepth bounds how deeply tables and arrays may nest inside one another.
// Deeper input is rejected with ErrTableDepth so a hostile peer cannot make the
// decoder recurse without limit.
const MaxTableDepth = 32

// Table is an AMQP field table. Values decode to these Go types:
//
//	't' bool        'b' int8     'B' uint8    's' int16    'u' uint16
//	'I' int32       'i' uint32   'l' int64    'f' float32  'd' float64
//	'D' Decimal     'S' string   'x' []byte   'A' []any    'T' time.Time
//	'F' Table       'V' nil
//
// AppendTable writes the same types back with the same tags (RabbitMQ's), plus int
// and uint64 as 'l', and map[string]any as 'F'.
type Table map[string]any

// Decimal is an AMQP decimal value: Value × 10^-Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// readTableField decodes a length-prefixed table at off. An empty table decodes as nil.
func readTableField(b []byte, off int) (Table, int, error) {
	return readTable(b, off, 0)
}

// DecodeTable decodes one length-prefixed field table occupying all of b.
func DecodeTable(b []byte) (Table, error) {
	t, off, err := readTable(b, 0, 0)
	if err != nil {
		return nil, err
	}
	return t, checkEnd(b, off)
}

func readTable(b []byte, off int, depth int) (Table, int, error) {
	if depth > MaxTableDepth {
		return nil, off, ErrTableDepth
	}
	n, off, err := readLong(b, off)
	if err != nil {
		return nil, off, err
	}
	if uint64(off)+uint64(n) > uint64(len(b)) {
		return nil, off, ErrTruncated
	}
	end := off + int(n)
	if n == 0 {
		return nil, end, nil
	}
	t := make(Table)
	body := b[:end]
	for off < end {
		var key []byte
		if key, off, err = readShortstrBytes(body, off); err != nil {
			return nil, off, err
		}
		var v any
		if v, off, err = readFieldValue(body, off, depth); err != nil {
			return nil, off, fmt.Errorf("table key %q: %w", key, err)
		}
		t[string(key)] = v
	}
	return t, end, nil
}

func readArray(b []byte, off int, depth int) ([]any, int, error) {
	if depth > MaxTableDepth {
		return nil, off, ErrTableDepth
	}
	n, off, err := readLong(b, off)
	if err != nil {
		return nil, off, err
	}
	if uint64(off)+uint64(n) > uint64(len(b)) {
		return nil, off, ErrTruncated
	}
	end := off + int(n)
	body := b[:end]
	var out []any
	for off < end {
		var v any
		if v, off, err = readFieldValue(body, off, depth); err != nil {
			return nil, off, err
		}
		out = append(out, v)
	}
	return out, end, nil
}

func readFieldValue(b []byte, off int, depth int) (any, int, error) {
	tag, off, err := readOctet(b, off)
	if err != nil {
		return nil, off, err
	}
	need := func(n int) error {
		if off+n > len(b) {
			return ErrTruncated
		}
		return nil
	}
	switch tag {
	case 't':
		if err := need(1); err != nil {
			return nil, off, err
		}
		return b[off] != 0, off + 1, nil
	case 'b':
		if err := need(1); err != nil {
			return nil, off, err
		}
		return int8(b[off]), off + 1, nil
	case 'B':
		if err := need(1); err != nil {
			return nil, off, err
		}
		return b[off], off + 1, nil
	case 's':
		v, o, err := readShort(b, off)
		return int16(v), o, err
	case 'u':
		return readShort(b, off)
	case 'I':
		v, o, err := readLong(b, off)
		return int32(v), o, err
	case 'i':
		return readLong(b, off)
	case 'l':
		v, o, err := readLonglong(b, off)
		return int64(v), o, err
	case 'f':
		v, o, err := readLong(b, off)
		return math.Float32frombits(v), o, err
	case 'd':
		v, o, err := readLonglong(b, off)
		return math.Float64frombits(v), o, err
	case 'D':
		if err := need(5); err != nil {
			return nil, off, err
		}
		return Decimal{Scale: b[off], Value: int32(binary.BigEndian.Uint32(b[off+1:]))}, off + 5, nil
	case 'S':
		v, o, err := readLongstr(b, off)
		if err != nil {
			return nil, o, err
		}
		return string(v), o, nil
	case 'x':
		v, o, err := readLongstr(b, off)
		if err != nil {
			return nil, o, err
		}
		return append([]byte(nil), v...), o, nil
	case 'A':
		return readArray(b, off, depth+1)
	case 'T':
		v, o, err := readLonglong(b, off)
		return time.Unix(int64(v), 0).UTC(), o, err
	case 'F':
		return readTable(b, off, depth+1)
	case 'V':
		return nil, off, nil
	}
	return nil, off, fmt.Errorf("%w: %q", ErrFieldType, tag)
}

// AppendTable appends t as a length-prefixed field table. Keys are written in
// sorted order so the encoding is deterministic. Values of types the codec does
// not know are written as void.
func AppendTable(b []byte, t Table) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	if len(t) > 0 {
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b = appendShortstr(b, k)
			b = appendFieldValue(b, t[k])
		}
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendArray(b []byte, a []any) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	for _, v := range a {
		b = appendFieldValue(b, v)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendFieldValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case bool:
		if v {
			return append(b, 't', 1)
		}
		return append(b, 't', 0)
	case int8:
		return append(b, 'b', byte(v))
	case uint8:
		return append(b, 'B', v)
	case int16:
		return appendShort(append(b, 's'), uint16(v))
	case uint16:
		return appendShort(append(b, 'u'), v)
	case int32:
		return appendLong(append(b, 'I'), uint32(v))
	case uint32:
		return appendLong(append(b, 'i'), v)
	case int64:
		return appendLonglong(append(b, 'l'), uint64(v))
	case int:
		return appendLonglong(append(b, 'l'), uint64(v))
	case uint64:
		return appendLonglong(append(b, 'l'), v)
	case float32:
		return appendLong(append(b, 'f'), math.Float32bits(v))
	case float64:
		return appendLonglong(append(b, 'd'), math.Float64bits(v))
	case Decimal:
		return appendLong(append(b, 'D', v.Scale), uint32(v.Value))
	case string:
		b = appendLong(append(b, 'S'), uint32(len(v)))
		return append(b, v...)
	case []byte:
		return appendLongstr(append(b, 'x'), v)
	case []any:
		return appendArray(append(b, 'A'), v)
	case time.Time:
		return appendLonglong(append(b, 'T'), uint64(v.Unix()))
	case Table:
		return AppendTable(append(b, 'F'), v)
	case map[string]any:
		return AppendTable(append(b, 'F'), Table(v))
	}
	return append(b, 'V')
}
