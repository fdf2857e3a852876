package route

import (
	"math"
	"sort"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Erlang's erlang:phash2/1, bit for bit, for the terms RabbitMQ's hashing
// exchanges hash: binaries (routing keys, property values), atoms, integers,
// floats, tuples and lists (a decoded header value is a {Type, Value} tuple).
// phash2 is make_hash2 in erts/emulator/beam/utils.c masked to 27 bits; it is
// documented as portable across machines and OTP releases, which is what lets
// Warren route a key to the same queue as RabbitMQ.
//
// make_hash2 folds a term in pre-order into one 32-bit state: every leaf (and
// every tuple header) mixes into the hash left by the previous one, so a
// term's hash is computed here by calling the leaf methods in the order the
// term's parts appear: a tuple's arity, then its elements; a list's elements,
// then the empty list that ends it.

// Bob Jenkins' lookup2 constants as erts names them: HCONST is the golden
// ratio, HCONST_n is HCONST * n mod 2^32.
const (
	hconst   uint32 = 0x9e3779b9
	hconst2  uint32 = 0x3c6ef372
	hconst3  uint32 = 0xdaa66d2b
	hconst9  uint32 = 0x8ff34781
	hconst10 uint32 = 0x2e2ac13a
	hconst11 uint32 = 0xcc623af3
	hconst12 uint32 = 0x6a99b4ac
	hconst13 uint32 = 0x08d12e65

	// nilHashFirst is what make_hash2 returns for [] as the whole term.
	nilHashFirst uint32 = 3468870702
	// nilDef is erts' NIL_DEF, mixed when [] ends a list; mixing it into a zero
	// hash gives nilHashFirst.
	nilDef uint32 = 2
	// phash2Mask keeps the 27 bits phash2/1 returns.
	phash2Mask uint32 = 1<<27 - 1
)

// mix is lookup2's MIX(a, b, c).
func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= b
	a -= c
	a ^= c >> 13
	b -= c
	b -= a
	b ^= a << 8
	c -= a
	c -= b
	c ^= b >> 13
	a -= b
	a -= c
	a ^= c >> 12
	b -= c
	b -= a
	b ^= a << 16
	c -= a
	c -= b
	c ^= b >> 5
	a -= b
	a -= c
	a ^= c >> 3
	b -= c
	b -= a
	b ^= a << 10
	c -= a
	c -= b
	c ^= b >> 15
	return a, b, c
}

// blockHash is erts' block_hash over the bytes of b with initial value init.
func blockHash[T ~string | ~[]byte](b T, init uint32) uint32 {
	a, bb, c := hconst, hconst, init
	le := func(i int) uint32 {
		return uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
	}
	n := len(b)
	i := 0
	for ; n-i >= 12; i += 12 {
		a += le(i)
		bb += le(i + 4)
		c += le(i + 8)
		a, bb, c = mix(a, bb, c)
	}
	c += uint32(n) // the byte length, truncated to 32 bits as erts does
	rest := b[i:]
	switch len(rest) { // the cases fall through, as in C
	case 11:
		c += uint32(rest[10]) << 24
		fallthrough
	case 10:
		c += uint32(rest[9]) << 16
		fallthrough
	case 9:
		c += uint32(rest[8]) << 8
		fallthrough
	case 8:
		bb += uint32(rest[7]) << 24
		fallthrough
	case 7:
		bb += uint32(rest[6]) << 16
		fallthrough
	case 6:
		bb += uint32(rest[5]) << 8
		fallthrough
	case 5:
		bb += uint32(rest[4])
		fallthrough
	case 4:
		a += uint32(rest[3]) << 24
		fallthrough
	case 3:
		a += uint32(rest[2]) << 16
		fallthrough
	case 2:
		a += uint32(rest[1]) << 8
		fallthrough
	case 1:
		a += uint32(rest[0])
	}
	_, _, c = mix(a, bb, c)
	return c
}

// atomHash is the hash erts keeps for an atom (atom_hash in atom.c: hashpjw over
// the name's bytes). Only ASCII atom names are used here, for which erts'
// Latin-1 adjustment does nothing.
func atomHash(name string) uint32 {
	var h uint32
	for i := 0; i < len(name); i++ {
		h = h<<4 + uint32(name[i])
		if g := h & 0xf0000000; g != 0 {
			h ^= g >> 24
			h ^= g
		}
	}
	return h
}

// termHash is make_hash2's running state.
type termHash struct{ h uint32 }

// sum returns phash2 of the term fed so far.
func (t *termHash) sum() uint32 { return t.h & phash2Mask }

// mix2 is UINT32_HASH_2(x, y, k).
func (t *termHash) mix2(x, y, k uint32) { _, _, t.h = mix(k+x, k+y, t.h) }

func (t *termHash) binary(s string) {
	con := hconst13 + t.h
	if s == "" {
		t.h = con
		return
	}
	t.h = blockHash(s, con)
}

func (t *termHash) bytes(b []byte) {
	con := hconst13 + t.h
	if len(b) == 0 {
		t.h = con
		return
	}
	t.h = blockHash(b, con)
}

// atom mixes an atom whose precomputed atomHash is hv.
func (t *termHash) atom(hv uint32) {
	if t.h == 0 {
		t.h = hv
		return
	}
	t.mix2(hv, 0, hconst3)
}

// nil mixes [], the end of every proper list.
func (t *termHash) nil() {
	if t.h == 0 {
		t.h = nilHashFirst
		return
	}
	t.mix2(nilDef, 0, hconst2)
}

func (t *termHash) tuple(arity uint32) { t.mix2(arity, 0, hconst9) }

// int mixes a signed integer (a small or a bignum: erts hashes both alike).
func (t *termHash) int(v int64) {
	if v >= -(1<<27) && v < 1<<27 {
		y := int32(v)
		if y < 0 {
			t.mix2(uint32(-y), 0, hconst)
		}
		t.mix2(uint32(y), 0, hconst)
		return
	}
	if v < 0 {
		t.magnitude(uint64(-v), hconst10) // -MinInt64 wraps to 2^63, its magnitude
		return
	}
	t.magnitude(uint64(v), hconst11)
}

// uint mixes a non-negative integer that may not fit an int64.
func (t *termHash) uint(v uint64) {
	if v < 1<<27 {
		t.int(int64(v))
		return
	}
	t.magnitude(v, hconst11)
}

func (t *termHash) magnitude(m uint64, k uint32) { t.mix2(uint32(m), uint32(m>>32), k) }

func (t *termHash) float(f float64) {
	if f == 0 {
		f = 0 // -0.0 hashes as 0.0
	}
	bits := math.Float64bits(f)
	t.mix2(uint32(bits>>32), uint32(bits), hconst12)
}

// Hashes of the atoms that decoded field values contain.
var (
	atomUndefined     = atomHash("undefined")
	atomTrue          = atomHash("true")
	atomFalse         = atomHash("false")
	atomLongstr       = atomHash("longstr")
	atomBool          = atomHash("bool")
	atomByte          = atomHash("byte")
	atomUnsignedbyte  = atomHash("unsignedbyte")
	atomShort         = atomHash("short")
	atomUnsignedshort = atomHash("unsignedshort")
	atomSignedint     = atomHash("signedint")
	atomUnsignedint   = atomHash("unsignedint")
	atomLong          = atomHash("long")
	atomFloat         = atomHash("float")
	atomDouble        = atomHash("double")
	atomDecimal       = atomHash("decimal")
	atomBinary        = atomHash("binary")
	atomArray         = atomHash("array")
	atomTimestamp     = atomHash("timestamp")
	atomTable         = atomHash("table")
	atomVoid          = atomHash("void")
)

// field mixes a field value as rabbit_binary_parser decodes it inside an array
// and as rabbit_misc:table_lookup returns it: {Type, Value}.
func (t *termHash) field(v any) {
	t.tuple(2)
	t.typeAndValue(v)
}

// typeAndValue mixes the type atom and the decoded value of a field value.
func (t *termHash) typeAndValue(v any) {
	switch v := v.(type) {
	case string:
		t.atom(atomLongstr)
		t.binary(v)
	case []byte:
		t.atom(atomBinary)
		t.bytes(v)
	case bool:
		t.atom(atomBool)
		t.boolean(v)
	case int8:
		t.atom(atomByte)
		t.int(int64(v))
	case uint8:
		t.atom(atomUnsignedbyte)
		t.int(int64(v))
	case int16:
		t.atom(atomShort)
		t.int(int64(v))
	case uint16:
		t.atom(atomUnsignedshort)
		t.int(int64(v))
	case int32:
		t.atom(atomSignedint)
		t.int(int64(v))
	case uint32:
		t.atom(atomUnsignedint)
		t.int(int64(v))
	case int64, int, uint64:
		t.atom(atomLong)
		t.int(asLong(v))
	case float32:
		t.atom(atomFloat)
		t.float(float64(v))
	case float64:
		t.atom(atomDouble)
		t.float(v)
	case amqp.Decimal:
		t.atom(atomDecimal)
		t.tuple(2) // {Scale, Value}, both unsigned on the wire
		t.int(int64(v.Scale))
		t.int(int64(uint32(v.Value)))
	case time.Time:
		t.atom(atomTimestamp)
		t.uint(uint64(v.Unix())) // the wire's unsigned 64 bits
	case []any:
		t.atom(atomArray)
		for _, e := range v {
			t.field(e)
		}
		t.nil()
	case amqp.Table, map[string]any:
		t.atom(atomTable)
		t.table(asTable(v))
	default:
		t.atom(atomVoid)
		t.atom(atomUndefined)
	}
}

// table mixes a decoded table: a list of {Name, Type, Value}. RabbitMQ keeps the
// wire order, which a Go map has lost; keys are taken in sorted order, the
// order amqp.AppendTable writes them in.
func (t *termHash) table(tb amqp.Table) {
	keys := make([]string, 0, len(tb))
	for k := range tb {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.tuple(3)
		t.binary(k)
		t.typeAndValue(tb[k])
	}
	t.nil()
}

func (t *termHash) boolean(b bool) {
	if b {
		t.atom(atomTrue)
		return
	}
	t.atom(atomFalse)
}

// phash2Binary is erlang:phash2(<<s>>).
func phash2Binary(s string) uint32 {
	var t termHash
	t.binary(s)
	return t.sum()
}
