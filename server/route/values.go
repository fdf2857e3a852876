package route

import (
	"bytes"
	"math"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Field-value comparison. Two notions of equality are needed:
//
//   - typed equality (wire type and value), which RabbitMQ uses for binding
//     identity and, because its decoded nested values carry their type, for
//     values inside tables and arrays;
//   - Erlang's == on the bare decoded values, which is what RabbitMQ's headers
//     exchange applies to top-level header values: the wire type is dropped, so
//     every integer type, floats and timestamps compare as numbers
//     (int32 1 == int64 1 == double 1.0 == timestamp 1), and a longstr equals a
//     byte array with the same bytes.

// wireTag returns the field-value tag amqp.AppendTable writes v with. Types the
// codec does not know are written as void, so they are void here too.
func wireTag(v any) byte {
	switch v.(type) {
	case bool:
		return 't'
	case int8:
		return 'b'
	case uint8:
		return 'B'
	case int16:
		return 's'
	case uint16:
		return 'u'
	case int32:
		return 'I'
	case uint32:
		return 'i'
	case int64, int, uint64:
		return 'l'
	case float32:
		return 'f'
	case float64:
		return 'd'
	case amqp.Decimal:
		return 'D'
	case string:
		return 'S'
	case []byte:
		return 'x'
	case []any:
		return 'A'
	case time.Time:
		return 'T'
	case amqp.Table, map[string]any:
		return 'F'
	}
	return 'V'
}

// asLong returns the value of a 'l' field as the signed 64 bits on the wire.
func asLong(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case uint64:
		return int64(v)
	}
	return 0
}

// asTable returns a 'F' field's table.
func asTable(v any) amqp.Table {
	switch v := v.(type) {
	case amqp.Table:
		return v
	case map[string]any:
		return amqp.Table(v)
	}
	return nil
}

// argsEqual reports whether two binding argument tables identify the same
// binding: same keys, and for each key the same wire type and value. Floats
// compare bit for bit so that a binding with a NaN argument can be removed.
func argsEqual(a, b amqp.Table) bool {
	return tablesEqual(a, b, true)
}

func tablesEqual(a, b amqp.Table, floatBits bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !typedEqual(av, bv, floatBits) {
			return false
		}
	}
	return true
}

func arraysEqual(a, b []any, floatBits bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !typedEqual(a[i], b[i], floatBits) {
			return false
		}
	}
	return true
}

// typedEqual reports whether a and b have the same wire type and value. With
// floatBits, floats are equal when their bits are (identity); without, when
// they are numerically equal (Erlang's ==, for header matching).
func typedEqual(a, b any, floatBits bool) bool {
	tag := wireTag(a)
	if tag != wireTag(b) {
		return false
	}
	switch tag {
	case 'V':
		return true
	case 'l':
		return asLong(a) == asLong(b)
	case 'f':
		x, y := a.(float32), b.(float32)
		if floatBits {
			return math.Float32bits(x) == math.Float32bits(y)
		}
		return x == y
	case 'd':
		x, y := a.(float64), b.(float64)
		if floatBits {
			return math.Float64bits(x) == math.Float64bits(y)
		}
		return x == y
	case 'x':
		return bytes.Equal(a.([]byte), b.([]byte))
	case 'T':
		return a.(time.Time).Unix() == b.(time.Time).Unix()
	case 'A':
		return arraysEqual(a.([]any), b.([]any), floatBits)
	case 'F':
		return tablesEqual(asTable(a), asTable(b), floatBits)
	}
	// bool, the fixed-size integers, Decimal and string: one Go type per tag,
	// all comparable.
	return a == b
}

// number is a decoded numeric field value: an exact integer (sign and
// magnitude, so both int64 and uint64 ranges fit) or a float.
type number struct {
	isFloat bool
	f       float64
	neg     bool
	mag     uint64
}

func intNumber(i int64) number {
	if i < 0 {
		return number{neg: true, mag: uint64(-(i + 1)) + 1}
	}
	return number{mag: uint64(i)}
}

// toNumber converts the numeric field types, including timestamps, which
// RabbitMQ decodes to a plain unsigned integer of seconds.
func toNumber(v any) (number, bool) {
	switch v := v.(type) {
	case int8:
		return intNumber(int64(v)), true
	case uint8:
		return number{mag: uint64(v)}, true
	case int16:
		return intNumber(int64(v)), true
	case uint16:
		return number{mag: uint64(v)}, true
	case int32:
		return intNumber(int64(v)), true
	case uint32:
		return number{mag: uint64(v)}, true
	case int64, int, uint64:
		return intNumber(asLong(v)), true
	case float32:
		return number{isFloat: true, f: float64(v)}, true
	case float64:
		return number{isFloat: true, f: v}, true
	case time.Time:
		return number{mag: uint64(v.Unix())}, true
	}
	return number{}, false
}

// twoTo64 is 2^64, the first float too large for a uint64.
const twoTo64 = 18446744073709551616.0

// equal compares numerically and exactly, as Erlang's == does for an integer
// and a float: 1 == 1.0, but 2^53+1 is not equal to the float 2^53.
func (a number) equal(b number) bool {
	switch {
	case a.isFloat && b.isFloat:
		return a.f == b.f
	case !a.isFloat && !b.isFloat:
		return a.neg == b.neg && a.mag == b.mag
	case a.isFloat:
		a, b = b, a
	}
	f := b.f // a is the integer
	if math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return false
	}
	if f < 0 {
		f = -f
		if !a.neg {
			return false
		}
	} else if a.neg {
		return false
	}
	return f < twoTo64 && uint64(f) == a.mag
}

// bytesEqual compares a longstr or byte-array value p with d. RabbitMQ decodes
// both types to an Erlang binary, so they compare equal by content. isBytes is
// false when p is neither.
func bytesEqual(p, d any) (isBytes, equal bool) {
	switch p := p.(type) {
	case string:
		switch d := d.(type) {
		case string:
			return true, p == d
		case []byte:
			return true, string(d) == p // compared, not kept: no allocation
		}
		return true, false
	case []byte:
		switch d := d.(type) {
		case string:
			return true, string(p) == d
		case []byte:
			return true, bytes.Equal(p, d)
		}
		return true, false
	}
	return false, false
}

// isList reports whether v decodes to an Erlang list: a table or an array.
func isList(v any) bool {
	t := wireTag(v)
	return t == 'A' || t == 'F'
}

// listLen returns the length of a table or array value.
func listLen(v any) int {
	if a, ok := v.([]any); ok {
		return len(a)
	}
	return len(asTable(v))
}

// looseEqual is Erlang's == applied to two decoded header values, as RabbitMQ's
// headers exchange compares a binding argument p with a message header d.
func looseEqual(p, d any) bool {
	if pn, ok := toNumber(p); ok {
		dn, ok := toNumber(d)
		return ok && pn.equal(dn)
	}
	if isBytes, equal := bytesEqual(p, d); isBytes {
		return equal
	}
	if isList(p) {
		if !isList(d) {
			return false
		}
		// An empty table and an empty array both decode to [].
		if listLen(p) == 0 || listLen(d) == 0 {
			return listLen(p) == listLen(d)
		}
		if wireTag(p) != wireTag(d) {
			return false
		}
		// Inside lists every element carries its type, so compare typed.
		return typedEqual(p, d, false)
	}
	// bool, Decimal and void: only equal to the same kind of value.
	return typedEqual(p, d, false)
}
