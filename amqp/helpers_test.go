package amqp

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"time"
)

// sameValue reports whether a and b hold equal values, walking pointers,
// structs, maps, slices and interfaces. Floats compare by bit pattern so that a
// NaN decoded from the wire equals itself after a round trip, and time.Time
// compares with Equal. A nil and an empty map or slice are equal: the codec
// decodes an empty table or array as nil.
func sameValue(a, b any) bool {
	return sameReflect(reflect.ValueOf(a), reflect.ValueOf(b))
}

func sameReflect(a, b reflect.Value) bool {
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	if a.Type() != b.Type() {
		return false
	}
	if a.Type() == reflect.TypeFor[time.Time]() {
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameReflect(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameReflect(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !sameReflect(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Type().Elem().Kind() == reflect.Uint8 {
			return bytes.Equal(a.Bytes(), b.Bytes())
		}
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameReflect(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Float32:
		return math.Float32bits(float32(a.Float())) == math.Float32bits(float32(b.Float()))
	case reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return a.Uint() == b.Uint()
	case reflect.String:
		return a.String() == b.String()
	}
	panic(fmt.Sprintf("sameValue: unhandled kind %s", a.Kind()))
}

// allMethodIDs returns every class and method id pair newMethod knows, found by
// asking it about every possible pair rather than by copying the spec's list.
func allMethodIDs() []uint32 {
	var ids []uint32
	for class := uint32(0); class < 256; class++ {
		for method := uint32(0); method < 256; method++ {
			if newMethod(class<<16|method) != nil {
				ids = append(ids, class<<16|method)
			}
		}
	}
	return ids
}

// randString returns a string of n random bytes, never empty when n > 0.
func randString(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

// randBytes returns 1 to max random bytes of any value.
func randBytes(r *rand.Rand, max int) []byte {
	b := make([]byte, 1+r.IntN(max))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sampleTable holds one value of every type RabbitMQ reads and writes, with a
// nested table and an array, as decoding would produce them.
func sampleTable() Table {
	return Table{
		"bool":    true,
		"int8":    int8(-5),
		"uint8":   uint8(250),
		"int16":   int16(-30000),
		"uint16":  uint16(60000),
		"int32":   int32(-2000000000),
		"uint32":  uint32(4000000000),
		"int64":   int64(-9000000000000000000),
		"float32": float32(1.5),
		"float64": float64(-2.25e100),
		"decimal": Decimal{Scale: 2, Value: -12345},
		"string":  "héllo, wörld",
		"bytes":   []byte{0, 1, 2, 0xff},
		"array":   []any{int32(1), "two", []any{false}, Table{"x": nil}},
		"time":    time.Unix(1700000000, 0).UTC(),
		"table":   Table{"nested": Table{"deep": "yes"}, "n": int64(7)},
		"void":    nil,
	}
}

// randTable returns a table of random values of every decodable type, nested at
// most depth levels.
func randTable(r *rand.Rand, depth int) Table {
	n := 1 + r.IntN(6)
	t := make(Table, n)
	for range n {
		t[randString(r, 1+r.IntN(12))] = randFieldValue(r, depth)
	}
	return t
}

func randFieldValue(r *rand.Rand, depth int) any {
	kinds := 17
	if depth <= 0 {
		kinds = 15 // no tables or arrays
	}
	switch r.IntN(kinds) {
	case 0:
		return r.IntN(2) == 1
	case 1:
		return int8(r.Uint32())
	case 2:
		return uint8(r.Uint32())
	case 3:
		return int16(r.Uint32())
	case 4:
		return uint16(r.Uint32())
	case 5:
		return int32(r.Uint32())
	case 6:
		return r.Uint32()
	case 7:
		return int64(r.Uint64())
	case 8:
		return math.Float32frombits(r.Uint32())
	case 9:
		return math.Float64frombits(r.Uint64())
	case 10:
		return Decimal{Scale: uint8(r.Uint32()), Value: int32(r.Uint32())}
	case 11:
		return randString(r, r.IntN(40))
	case 12:
		return randBytes(r, 40)
	case 13:
		return time.Unix(int64(r.Uint32()), 0).UTC()
	case 14:
		return nil
	case 15:
		a := make([]any, 1+r.IntN(4))
		for i := range a {
			a[i] = randFieldValue(r, depth-1)
		}
		return a
	default:
		return randTable(r, depth-1)
	}
}

// fillRandom sets every field of the struct v points to a random non-zero
// value: numbers, strings, byte slices and tables. Booleans are set from bits.
func fillRandom(r *rand.Rand, v any, bits uint64) {
	rv := reflect.ValueOf(v).Elem()
	bit := 0
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(bits&(1<<bit) != 0)
			bit++
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			mask := ^uint64(0) >> (64 - f.Type().Bits())
			x := r.Uint64()
			for x&mask == 0 { // a value that truncates to zero would hide a dropped field
				x = r.Uint64()
			}
			f.SetUint(x)
		case reflect.String:
			f.SetString(randString(r, 1+r.IntN(255)))
		case reflect.Slice:
			f.SetBytes(randBytes(r, 300))
		case reflect.Map:
			f.Set(reflect.ValueOf(randTable(r, 2)))
		default:
			panic(fmt.Sprintf("fillRandom: field %s has unhandled kind %s", rv.Type().Field(i).Name, f.Kind()))
		}
	}
}

// boolFields returns the number of bit arguments of a method struct.
func boolFields(m Method) int {
	rv := reflect.ValueOf(m).Elem()
	n := 0
	for i := range rv.NumField() {
		if rv.Field(i).Kind() == reflect.Bool {
			n++
		}
	}
	return n
}

// randProperties returns properties with the given flags and random values for
// the properties they name.
func randProperties(r *rand.Rand, flags uint16) Properties {
	p := Properties{Flags: flags}
	str := func(flag uint16, dst *string) {
		if flags&flag != 0 {
			*dst = randString(r, r.IntN(256))
		}
	}
	str(FlagContentType, &p.ContentType)
	str(FlagContentEncoding, &p.ContentEncoding)
	if flags&FlagHeaders != 0 {
		p.Headers = randTable(r, 2)
	}
	if flags&FlagDeliveryMode != 0 {
		p.DeliveryMode = uint8(r.Uint32())
	}
	if flags&FlagPriority != 0 {
		p.Priority = uint8(r.Uint32())
	}
	str(FlagCorrelationID, &p.CorrelationID)
	str(FlagReplyTo, &p.ReplyTo)
	str(FlagExpiration, &p.Expiration)
	str(FlagMessageID, &p.MessageID)
	if flags&FlagTimestamp != 0 {
		p.Timestamp = r.Uint64()
	}
	str(FlagType, &p.Type)
	str(FlagUserID, &p.UserID)
	str(FlagAppID, &p.AppID)
	str(FlagClusterID, &p.ClusterID)
	return p
}

// allPropertyFlags is every property flag of the basic class.
const allPropertyFlags = FlagContentType | FlagContentEncoding | FlagHeaders | FlagDeliveryMode |
	FlagPriority | FlagCorrelationID | FlagReplyTo | FlagExpiration | FlagMessageID | FlagTimestamp |
	FlagType | FlagUserID | FlagAppID | FlagClusterID
