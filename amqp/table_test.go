package amqp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSameValue makes sure the comparison the round-trip tests rely on sees
// differences, so those tests can fail.
func TestSameValue(t *testing.T) {
	base := sampleTable()
	if !sameValue(base, sampleTable()) {
		t.Fatal("equal tables compare different")
	}
	changes := []func(Table){
		func(t Table) { t["int8"] = int8(-4) },
		func(t Table) { t["int8"] = uint8(251) },
		func(t Table) { t["bytes"] = []byte{0, 1, 2} },
		func(t Table) { t["array"].([]any)[1] = "three" },
		func(t Table) { t["table"].(Table)["nested"].(Table)["deep"] = "no" },
		func(t Table) { t["time"] = time.Unix(1700000001, 0).UTC() },
		func(t Table) { t["float64"] = math.NaN() },
		func(t Table) { delete(t, "void") },
		func(t Table) { t["void"] = false },
	}
	for i, change := range changes {
		other := sampleTable()
		change(other)
		if sameValue(base, other) {
			t.Errorf("change %d not detected", i)
		}
	}
	nan := math.Float64frombits(0x7ff8000000000001)
	if !sameValue(Table{"n": nan}, Table{"n": nan}) {
		t.Error("the same NaN compares different")
	}
	if !sameValue(&BasicPublish{Exchange: "x"}, &BasicPublish{Exchange: "x"}) || sameValue(&BasicPublish{}, &BasicPublish{Immediate: true}) {
		t.Error("method structs compare wrongly")
	}
}

// TestTableKnownBytes decodes one value of each type from bytes written out by
// hand, and checks AppendTable writes exactly those bytes back.
func TestTableKnownBytes(t *testing.T) {
	tests := []struct {
		tag  byte
		raw  []byte
		want any
	}{
		{'t', []byte{1}, true},
		{'t', []byte{0}, false},
		{'b', []byte{0xfe}, int8(-2)},
		{'B', []byte{0xfe}, uint8(254)},
		{'s', []byte{0xff, 0xfe}, int16(-2)},
		{'u', []byte{0xff, 0xfe}, uint16(65534)},
		{'I', []byte{0xff, 0xff, 0xff, 0xfe}, int32(-2)},
		{'i', []byte{0xff, 0xff, 0xff, 0xfe}, uint32(0xfffffffe)},
		{'l', []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, int64(-2)},
		{'f', []byte{0x3f, 0xc0, 0, 0}, float32(1.5)},
		{'d', []byte{0xc0, 0x02, 0, 0, 0, 0, 0, 0}, float64(-2.25)},
		{'D', []byte{3, 0xff, 0xff, 0xff, 0xfe}, Decimal{Scale: 3, Value: -2}},
		{'S', []byte{0, 0, 0, 2, 'h', 'i'}, "hi"},
		{'S', []byte{0, 0, 0, 0}, ""},
		{'x', []byte{0, 0, 0, 3, 0, 0xff, 7}, []byte{0, 0xff, 7}},
		{'A', []byte{0, 0, 0, 7, 'b', 1, 'S', 0, 0, 0, 0}, []any{int8(1), ""}},
		{'A', []byte{0, 0, 0, 0}, []any(nil)},
		{'T', []byte{0, 0, 0, 0, 0x65, 0x53, 0xf1, 0x00}, time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)},
		{'F', []byte{0, 0, 0, 3, 1, 'k', 'V'}, Table{"k": nil}},
		{'V', nil, nil},
	}
	for _, tc := range tests {
		body := append([]byte{1, 'v', tc.tag}, tc.raw...)
		enc := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		enc = append(enc, body...)
		got, err := DecodeTable(enc)
		if err != nil {
			t.Errorf("tag %c %x: %v", tc.tag, tc.raw, err)
			continue
		}
		if v, ok := got["v"]; !ok || !sameValue(v, tc.want) {
			t.Errorf("tag %c %x: decoded %#v, want %#v", tc.tag, tc.raw, got["v"], tc.want)
		}
		if re := AppendTable(nil, Table{"v": tc.want}); !bytes.Equal(re, enc) {
			t.Errorf("tag %c: AppendTable wrote %x, want %x", tc.tag, re, enc)
		}
	}
}

func TestTableRoundTripSample(t *testing.T) {
	want := sampleTable()
	enc := AppendTable([]byte("xyz"), want)
	if string(enc[:3]) != "xyz" {
		t.Fatal("AppendTable overwrote the buffer's prefix")
	}
	got, err := DecodeTable(enc[3:])
	if err != nil {
		t.Fatal(err)
	}
	if !sameValue(got, want) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
	}
}

func TestTableRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		want := randTable(r, 4)
		enc := AppendTable(nil, want)
		got, err := DecodeTable(enc)
		if err != nil {
			t.Fatalf("DecodeTable(%x): %v", enc, err)
		}
		if !sameValue(got, want) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
		}
		if again := AppendTable(nil, got); !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not deterministic:\n got %x\nwant %x", again, enc)
		}
	}
}

// TestAppendTableGoTypes covers the Go types AppendTable accepts beyond the
// decoded ones, and its sorted key order.
func TestAppendTableGoTypes(t *testing.T) {
	in := Table{
		"c-int":    int(-3),
		"b-uint64": uint64(math.MaxUint64),
		"a-map":    map[string]any{"x": "y"},
		"d-chan":   make(chan int),
		"e-empty":  Table{},
	}
	want := Table{
		"c-int":    int64(-3),
		"b-uint64": int64(-1),
		"a-map":    Table{"x": "y"},
		"d-chan":   nil,
		"e-empty":  Table(nil),
	}
	enc := AppendTable(nil, in)
	got, err := DecodeTable(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !sameValue(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	var keys []string
	for off := 4; off < len(enc); {
		key, next, err := readShortstrBytes(enc, off)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(key))
		if _, off, err = readFieldValue(enc, next, 0); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"a-map", "b-uint64", "c-int", "d-chan", "e-empty"}; !sameValue(keys, want) {
		t.Fatalf("keys written in order %q, want %q", keys, want)
	}
	if enc := AppendTable(nil, nil); !bytes.Equal(enc, []byte{0, 0, 0, 0}) {
		t.Fatalf("nil table encodes as %x", enc)
	}
	if got, err := DecodeTable([]byte{0, 0, 0, 0}); got != nil || err != nil {
		t.Fatalf("empty table decodes as %#v, %v", got, err)
	}
}

// nestTables returns a table with depth tables nested below it.
func nestTables(depth int) Table {
	t := Table{"leaf": int32(1)}
	for range depth {
		t = Table{"t": t}
	}
	return t
}

// nestArrays returns a table holding depth arrays nested in one another.
func nestArrays(depth int) Table {
	var v any = "leaf"
	for range depth {
		v = []any{v}
	}
	return Table{"a": v}
}

// nestMixed alternates tables and arrays below the top-level table.
func nestMixed(depth int) Table {
	var v any = "leaf"
	for i := range depth {
		if i%2 == 0 {
			v = []any{v}
		} else {
			v = Table{"t": v}
		}
	}
	return Table{"m": v}
}

func TestTableDepth(t *testing.T) {
	for name, nest := range map[string]func(int) Table{"tables": nestTables, "arrays": nestArrays, "mixed": nestMixed} {
		t.Run(name, func(t *testing.T) {
			deepest := nest(MaxTableDepth)
			got, err := DecodeTable(AppendTable(nil, deepest))
			if err != nil {
				t.Fatalf("%d nested levels: %v", MaxTableDepth, err)
			}
			if !sameValue(got, deepest) {
				t.Fatalf("%d nested levels decoded wrongly", MaxTableDepth)
			}
			for _, depth := range []int{MaxTableDepth + 1, MaxTableDepth + 2, 10 * MaxTableDepth} {
				if _, err := DecodeTable(AppendTable(nil, nest(depth))); !errors.Is(err, ErrTableDepth) {
					t.Errorf("%d nested levels: error %v, want ErrTableDepth", depth, err)
				}
			}
		})
	}
}

// TestTableDepthInMethod checks the bound holds where a peer would use it: in a
// method's arguments and in message headers.
func TestTableDepthInMethod(t *testing.T) {
	m := &QueueDeclare{Queue: "q", Arguments: nestTables(MaxTableDepth + 1)}
	if _, err := DecodeMethod(m.AppendTo(nil)); !errors.Is(err, ErrTableDepth) {
		t.Errorf("queue.declare: error %v, want ErrTableDepth", err)
	}
	p := Properties{Flags: FlagHeaders, Headers: nestArrays(MaxTableDepth + 1)}
	if err := new(Properties).Decode(p.AppendTo(nil)); !errors.Is(err, ErrTableDepth) {
		t.Errorf("properties: error %v, want ErrTableDepth", err)
	}
}

// withLength returns body prefixed with its 32-bit length.
func withLength(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// TestTableTruncatedValue cuts a one-entry table of each type inside the entry
// while keeping the table's length consistent with the cut, so the error comes
// from the value decoder, not the outer length check.
func TestTableTruncatedValue(t *testing.T) {
	for key, v := range sampleTable() {
		enc := AppendTable(nil, Table{key: v})
		body := enc[4:]
		for cut := 1; cut < len(body); cut++ {
			if _, err := DecodeTable(withLength(body[:cut])); !errors.Is(err, ErrTruncated) {
				t.Errorf("%s cut at %d of %d: error %v, want ErrTruncated", key, cut, len(body), err)
			}
		}
	}
}

// TestTableTruncatedEverywhere cuts a rich table at every byte, both as is and
// with its length fixed up to the cut. Nothing may panic; the plain cut must
// report ErrTruncated.
func TestTableTruncatedEverywhere(t *testing.T) {
	enc := AppendTable(nil, sampleTable())
	for cut := range len(enc) {
		if _, err := DecodeTable(enc[:cut]); !errors.Is(err, ErrTruncated) {
			t.Errorf("cut at %d of %d: error %v, want ErrTruncated", cut, len(enc), err)
		}
	}
	body := enc[4:]
	for cut := range len(body) {
		got, err := DecodeTable(withLength(body[:cut]))
		if err == nil {
			// The cut fell between entries: what decoded must be a subset.
			for k, v := range got {
				if !sameValue(v, sampleTable()[k]) {
					t.Errorf("cut at %d: key %q decoded %#v", cut, k, v)
				}
			}
		}
	}
}

func TestTableTrailingBytes(t *testing.T) {
	enc := AppendTable(nil, Table{"a": "b"})
	if _, err := DecodeTable(append(enc, 0)); !errors.Is(err, ErrTrailingBytes) {
		t.Fatalf("error %v, want ErrTrailingBytes", err)
	}
}

func TestTableUnknownFieldType(t *testing.T) {
	// Tags from other AMQP dialects that RabbitMQ neither reads nor writes.
	for _, tag := range []byte{'U', 'L', 'c', 'e', 'Z', 0, 0xff} {
		if _, err := DecodeTable(withLength([]byte{1, 'k', tag, 0, 0, 0, 0, 0, 0, 0, 0})); !errors.Is(err, ErrFieldType) {
			t.Errorf("tag %q in a table: error %v, want ErrFieldType", tag, err)
		}
		arr := withLength([]byte{'b', 1, tag, 0, 0})
		if _, err := DecodeTable(withLength(append([]byte{1, 'a', 'A'}, arr...))); !errors.Is(err, ErrFieldType) {
			t.Errorf("tag %q in an array: error %v, want ErrFieldType", tag, err)
		}
	}
}

// TestTableLengthOverflow uses lengths near 2^32, which must not wrap offsets.
func TestTableLengthOverflow(t *testing.T) {
	inputs := [][]byte{
		{0xff, 0xff, 0xff, 0xff, 1},
		withLength([]byte{1, 'k', 'S', 0xff, 0xff, 0xff, 0xff}),
		withLength([]byte{1, 'k', 'x', 0xff, 0xff, 0xff, 0xfc, 1}),
		withLength([]byte{1, 'k', 'A', 0xff, 0xff, 0xff, 0xff}),
		withLength([]byte{1, 'k', 'F', 0x80, 0, 0, 0}),
		withLength([]byte{0xff, 'k'}),
	}
	for _, in := range inputs {
		if _, err := DecodeTable(in); !errors.Is(err, ErrTruncated) {
			t.Errorf("DecodeTable(%x): error %v, want ErrTruncated", in, err)
		}
	}
}

// TestTableBytesAreCopied checks that a decoded table owns its byte arrays:
// tables such as message headers outlive the read buffer.
func TestTableBytesAreCopied(t *testing.T) {
	enc := AppendTable(nil, Table{"x": []byte("abc"), "s": "def"})
	got, err := DecodeTable(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 0
	}
	if !sameValue(got, Table{"x": []byte("abc"), "s": "def"}) {
		t.Fatalf("decoded table changed with its input: %#v", got)
	}
}
