package route

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// refHeadersMatch restates RabbitMQ's headers_match: walk the binding arguments
// and the headers, both sorted by key, merge-style, tracking "all matched so
// far" and "any matched so far". It shares only the value comparison
// (looseEqual, tested on its own below) with the implementation.
func refHeadersMatch(args, headers amqp.Table) bool {
	mode, _ := args["x-match"].(string)
	withX := mode == "all-with-x" || mode == "any-with-x"
	anyMode := mode == "any" || mode == "any-with-x"
	pk := sortedKeys(args)
	hk := sortedKeys(headers)
	all, anyOK := true, false
	i, j := 0, 0
	for i < len(pk) {
		k := pk[i]
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			i++
			continue
		}
		if j == len(hk) {
			all = false
			break
		}
		switch {
		case k > hk[j]:
			j++
		case k < hk[j]:
			all = false
			i++
		default:
			if wireTag(args[k]) == 'V' || looseEqual(args[k], headers[hk[j]]) {
				anyOK = true
			} else {
				all = false
			}
			i++
			j++
		}
	}
	if anyMode {
		return anyOK
	}
	return all
}

func sortedKeys(t amqp.Table) []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestHeadersModes(t *testing.T) {
	h := amqp.Table{"format": "pdf", "type": "report", "x-tenant": "acme"}
	tests := []struct {
		name string
		args amqp.Table
		want bool
	}{
		{"default is all: all present", amqp.Table{"format": "pdf", "type": "report"}, true},
		{"default is all: one differs", amqp.Table{"format": "pdf", "type": "log"}, false},
		{"default is all: one missing", amqp.Table{"format": "pdf", "size": "a4"}, false},
		{"all: all present", amqp.Table{"x-match": "all", "format": "pdf", "type": "report"}, true},
		{"all: one differs", amqp.Table{"x-match": "all", "format": "doc", "type": "report"}, false},
		{"all: no arguments matches everything", amqp.Table{"x-match": "all"}, true},
		{"all: nil args match everything", nil, true},
		{"all: ignores x- arguments", amqp.Table{"x-match": "all", "format": "pdf", "x-tenant": "other"}, true},
		{"all: only x- arguments matches everything", amqp.Table{"x-match": "all", "x-tenant": "other"}, true},
		{"all-with-x: x- argument equal", amqp.Table{"x-match": "all-with-x", "format": "pdf", "x-tenant": "acme"}, true},
		{"all-with-x: x- argument differs", amqp.Table{"x-match": "all-with-x", "format": "pdf", "x-tenant": "other"}, false},
		{"all-with-x: x- argument missing", amqp.Table{"x-match": "all-with-x", "x-region": "eu"}, false},
		{"all-with-x: no arguments", amqp.Table{"x-match": "all-with-x"}, true},
		{"any: one matches", amqp.Table{"x-match": "any", "format": "doc", "type": "report"}, true},
		{"any: none matches", amqp.Table{"x-match": "any", "format": "doc", "type": "log"}, false},
		{"any: none present", amqp.Table{"x-match": "any", "size": "a4"}, false},
		{"any: no arguments matches nothing", amqp.Table{"x-match": "any"}, false},
		{"any: ignores x- arguments", amqp.Table{"x-match": "any", "x-tenant": "acme"}, false},
		{"any-with-x: x- argument matches", amqp.Table{"x-match": "any-with-x", "x-tenant": "acme"}, true},
		{"any-with-x: x- argument differs", amqp.Table{"x-match": "any-with-x", "x-tenant": "other", "format": "doc"}, false},
		{"any-with-x: no arguments", amqp.Table{"x-match": "any-with-x"}, false},
		{"void argument: header present", amqp.Table{"type": nil}, true},
		{"void argument: header absent", amqp.Table{"size": nil}, false},
		{"void argument in any", amqp.Table{"x-match": "any", "size": nil, "format": nil}, true},
		{"void x- argument with-x", amqp.Table{"x-match": "all-with-x", "x-tenant": nil}, true},
		{"invalid x-match acts as all", amqp.Table{"x-match": "foo", "format": "pdf", "type": "log"}, false},
		{"invalid x-match acts as all (match)", amqp.Table{"x-match": "foo", "format": "pdf"}, true},
		{"non-string x-match acts as all", amqp.Table{"x-match": []byte("any"), "format": "doc", "type": "report"}, false},
		{"x-match upper case acts as all", amqp.Table{"x-match": "ANY", "format": "doc", "type": "report"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkHeaders(t, tc.args, h, tc.want)
		})
	}
	t.Run("no headers", func(t *testing.T) {
		checkHeaders(t, amqp.Table{"a": "1"}, nil, false)
		checkHeaders(t, amqp.Table{"x-match": "any", "a": "1"}, nil, false)
		checkHeaders(t, amqp.Table{"x-match": "all"}, nil, true)
		checkHeaders(t, amqp.Table{"x-match": "all", "x-a": "1"}, nil, true)
		checkHeaders(t, amqp.Table{"x-match": "all-with-x", "x-a": "1"}, nil, false)
	})
}

// checkHeaders binds args and matches headers, checking the result both
// against want and against the merge-style reference.
func checkHeaders(t *testing.T, args, headers amqp.Table, want bool) {
	t.Helper()
	if ref := refHeadersMatch(args, headers); ref != want {
		t.Errorf("reference: args %v headers %v = %v, want %v", args, headers, ref, want)
	}
	m := NewHeaders[string]()
	m.Add(Binding[string]{Dest: "q", Args: args})
	got := len(collect(t, Matcher[string](m), "ignored", headers)) == 1
	if got != want {
		t.Errorf("args %v headers %v = %v, want %v", args, headers, got, want)
	}
}

// TestHeadersValueTypes pins how values of different types compare. RabbitMQ's
// headers_match compares the decoded values with Erlang's ==, ignoring the
// field type: integers of any width, floats and timestamps compare as numbers,
// and strings equal byte arrays. Inside tables and arrays each element still
// carries its type, so there the type must match too.
func TestHeadersValueTypes(t *testing.T) {
	ts := time.Unix(1700000000, 0).UTC()
	tests := []struct {
		name     string
		arg, hdr any
		want     bool
	}{
		{"int32 1 = int64 1", int32(1), int64(1), true},
		{"int8 1 = uint32 1", int8(1), uint32(1), true},
		{"int 1 = int16 1", 1, int16(1), true},
		{"uint8 255 = int16 255", uint8(255), int16(255), true},
		{"int8 -1 != uint8 255", int8(-1), uint8(255), false},
		{"int64 -5 = int32 -5", int64(-5), int32(-5), true},
		{"int64 min = itself", int64(math.MinInt64), int64(math.MinInt64), true},
		{"int64 1 = double 1.0", int64(1), 1.0, true},
		{"int32 1 = float 1.0", int32(1), float32(1), true},
		{"double -2.0 = int8 -2", -2.0, int8(-2), true},
		{"double 1.5 != int 1", 1.5, int64(1), false},
		{"double 2^53 != 2^53+1", float64(1 << 53), int64(1<<53 + 1), false},
		{"double 2^53 = 2^53", float64(1 << 53), int64(1 << 53), true},
		{"double 2^63 != int64 min", float64(1 << 63), int64(math.MinInt64), false},
		{"double -2^63 = int64 min", -float64(1 << 63), int64(math.MinInt64), true},
		{"double 1e300 != int", 1e300, int64(math.MaxInt64), false},
		{"double 2^63 = timestamp 2^63", float64(1 << 63), time.Unix(math.MinInt64, 0), true},
		{"double 1e30 != timestamp 2^63", 1e30, time.Unix(math.MinInt64, 0), false},
		{"double +Inf != int", math.Inf(1), int64(math.MaxInt64), false},
		{"double NaN != NaN", math.NaN(), math.NaN(), false},
		{"double 0.0 = -0.0", 0.0, math.Copysign(0, -1), true},
		{"int 0 = double -0.0", int32(0), math.Copysign(0, -1), true},
		{"float 0.5 = double 0.5", float32(0.5), 0.5, true},
		{"float 0.1 != double 0.1", float32(0.1), 0.1, false},
		{"timestamp = its seconds", ts, int64(1700000000), true},
		{"timestamp = timestamp", ts, ts.Local(), true},
		{"timestamp != other seconds", ts, int64(1700000001), false},
		{"string = string", "abc", "abc", true},
		{"string != string", "abc", "abd", false},
		{"string = bytes", "abc", []byte("abc"), true},
		{"bytes = string", []byte("abc"), "abc", true},
		{"bytes = bytes", []byte{0, 1}, []byte{0, 1}, true},
		{"empty string = empty bytes", "", []byte{}, true},
		{"string 1 != int 1", "1", int32(1), false},
		{"int 1 != string 1", int32(1), "1", false},
		{"bool = bool", true, true, true},
		{"bool != bool", true, false, false},
		{"bool true != int 1", true, int8(1), false},
		{"int 1 != bool true", int8(1), true, false},
		{"decimal = decimal", amqp.Decimal{Scale: 2, Value: 314}, amqp.Decimal{Scale: 2, Value: 314}, true},
		{"decimal scale differs", amqp.Decimal{Scale: 2, Value: 314}, amqp.Decimal{Scale: 1, Value: 314}, false},
		{"decimal 1.0 != int 1", amqp.Decimal{Scale: 0, Value: 1}, int32(1), false},
		{"string != void header", "x", nil, false},
		{"table = table", amqp.Table{"a": int32(1)}, amqp.Table{"a": int32(1)}, true},
		{"table = map", amqp.Table{"a": "s"}, map[string]any{"a": "s"}, true},
		{"nested int32 != int64", amqp.Table{"a": int32(1)}, amqp.Table{"a": int64(1)}, false},
		{"nested string != bytes", amqp.Table{"a": "s"}, amqp.Table{"a": []byte("s")}, false},
		{"nested table differs", amqp.Table{"a": "s"}, amqp.Table{"a": "t"}, false},
		{"nested table extra key", amqp.Table{"a": "s"}, amqp.Table{"a": "s", "b": "t"}, false},
		{"array = array", []any{"a", int32(2)}, []any{"a", int32(2)}, true},
		{"array order matters", []any{"a", "b"}, []any{"b", "a"}, false},
		{"array element types", []any{int32(2)}, []any{int64(2)}, false},
		{"array nested float", []any{0.0}, []any{math.Copysign(0, -1)}, true},
		{"empty table = empty array", amqp.Table{}, []any{}, true},
		{"empty array = nil table", []any(nil), amqp.Table(nil), true},
		{"empty table != table", amqp.Table{}, amqp.Table{"a": "b"}, false},
		{"table != array", amqp.Table{"a": "b"}, []any{"b"}, false},
		{"array != string", []any{"b"}, "b", false},
		{"unknown arg type is void: presence", struct{}{}, "anything", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := looseEqual(tc.arg, tc.hdr); got != tc.want && wireTag(tc.arg) != 'V' {
				t.Errorf("looseEqual(%#v, %#v) = %v, want %v", tc.arg, tc.hdr, got, tc.want)
			}
			for _, mode := range []string{"all", "any", "all-with-x", "any-with-x"} {
				checkHeaders(t, amqp.Table{"x-match": mode, "k": tc.arg}, amqp.Table{"k": tc.hdr, "other": "x"}, tc.want)
			}
		})
	}
}

// TestHeadersDecodedValues routes with tables that went through the wire
// codec, the way the exchange sees them.
func TestHeadersDecodedValues(t *testing.T) {
	decode := func(tb amqp.Table) amqp.Table {
		out, err := amqp.DecodeTable(amqp.AppendTable(nil, tb))
		if err != nil {
			t.Fatalf("DecodeTable: %v", err)
		}
		return out
	}
	args := decode(amqp.Table{"x-match": "all", "n": int32(5), "s": "v", "t": amqp.Table{"a": []any{true}}, "p": nil})
	hdrs := decode(amqp.Table{"n": 5, "s": []byte("v"), "t": map[string]any{"a": []any{true}}, "p": int8(0)})
	checkHeaders(t, args, hdrs, true)
	hdrs["t"] = decode(amqp.Table{"a": []any{int8(1)}})
	checkHeaders(t, args, hdrs, false)
}

func TestValidateHeadersArgs(t *testing.T) {
	ok := []amqp.Table{nil, {}, {"a": "b"}, {"x-match": "all"}, {"x-match": "any"}, {"x-match": "all-with-x"}, {"x-match": "any-with-x"}}
	for _, args := range ok {
		if err := ValidateHeadersArgs(args); err != nil {
			t.Errorf("ValidateHeadersArgs(%v) = %v, want nil", args, err)
		}
	}
	bad := []struct {
		val  any
		text string
	}{
		{"foo", `Invalid x-match field value <<"foo">>; expected all, any, all-with-x, or any-with-x`},
		{"ALL", `Invalid x-match field value <<"ALL">>; expected all, any, all-with-x, or any-with-x`},
		{"", `Invalid x-match field value <<>>; expected all, any, all-with-x, or any-with-x`},
		{`a"b\c`, `Invalid x-match field value <<"a\"b\\c">>; expected all, any, all-with-x, or any-with-x`},
		{"a\nb", `Invalid x-match field value <<"a\nb">>; expected all, any, all-with-x, or any-with-x`},
		// As RabbitMQ 3.10.8 answers binding to amq.headers with these: ~p
		// reads a binary's bytes as Latin-1 characters.
		{"é", `Invalid x-match field value <<"é">>; expected all, any, all-with-x, or any-with-x`},
		{"\xe9", "Invalid x-match field value <<\"\xe9\">>; expected all, any, all-with-x, or any-with-x"},
		{"€", `Invalid x-match field value <<226,130,172>>; expected all, any, all-with-x, or any-with-x`},
		{"a\x7f", `Invalid x-match field value <<97,127>>; expected all, any, all-with-x, or any-with-x`},
		{"\x01\xff", `Invalid x-match field value <<1,255>>; expected all, any, all-with-x, or any-with-x`},
		{[]byte("all"), `Invalid x-match field type binary (value <<"all">>); expected longstr`},
		{int32(1), `Invalid x-match field type signedint (value 1); expected longstr`},
		{int64(-7), `Invalid x-match field type long (value -7); expected longstr`},
		{uint8(200), `Invalid x-match field type unsignedbyte (value 200); expected longstr`},
		{true, `Invalid x-match field type bool (value true); expected longstr`},
		{nil, `Invalid x-match field type void (value undefined); expected longstr`},
		{1.0, `Invalid x-match field type double (value 1.0); expected longstr`},
		{float32(0.5), `Invalid x-match field type float (value 0.5); expected longstr`},
		{amqp.Decimal{Scale: 2, Value: 5}, `Invalid x-match field type decimal (value {2,5}); expected longstr`},
		{time.Unix(10, 0), `Invalid x-match field type timestamp (value 10); expected longstr`},
		{[]any{"all", int16(2)}, `Invalid x-match field type array (value [{longstr,<<"all">>},{short,2}]); expected longstr`},
		{amqp.Table{"b": int8(1), "a": "x"}, `Invalid x-match field type table (value [{<<"a">>,longstr,<<"x">>},{<<"b">>,byte,1}]); expected longstr`},
	}
	for _, tc := range bad {
		err := ValidateHeadersArgs(amqp.Table{"x-match": tc.val, "h": "v"})
		if err == nil {
			t.Errorf("ValidateHeadersArgs(x-match=%#v) = nil, want error", tc.val)
			continue
		}
		if !errors.Is(err, ErrInvalidXMatch) {
			t.Errorf("error %v does not wrap ErrInvalidXMatch", err)
		}
		var ae *ArgsError
		if !errors.As(err, &ae) || ae.Text != tc.text || err.Error() != tc.text {
			t.Errorf("x-match=%#v:\n got %q\nwant %q", tc.val, err.Error(), tc.text)
		}
	}
}

func TestErlFloat(t *testing.T) {
	tests := map[float64]string{
		1: "1.0", 0.1: "0.1", 100: "100.0", 1e6: "1.0e6", 123456: "123456.0", 1.5e-7: "1.5e-7",
		0.001: "0.001", -2.5: "-2.5", 0: "0.0", math.Copysign(0, -1): "-0.0", 12.345: "12.345", 1e21: "1.0e21",
	}
	for f, want := range tests {
		if got := ErlangTerm(f); got != want {
			t.Errorf("ErlangTerm(%v) = %q, want %q", f, got, want)
		}
	}
}

// FuzzHeaders decodes binding arguments and headers from wire bytes and checks
// that matching agrees with the merge-style reference, that validation never
// panics, and that a binding can always be removed with a fresh decoding of
// its own arguments (identity is reflexive, NaN included).
func FuzzHeaders(f *testing.F) {
	seeds := []struct{ args, hdrs amqp.Table }{
		{amqp.Table{"x-match": "any", "a": int32(1), "b": nil}, amqp.Table{"a": int64(1)}},
		{amqp.Table{"x-match": "all-with-x", "x-a": "v", "n": amqp.Table{"k": []any{1.5}}}, amqp.Table{"x-a": []byte("v"), "n": amqp.Table{"k": []any{1.5}}}},
		{amqp.Table{"x-match": "foo", "f": math.NaN()}, amqp.Table{"f": math.NaN()}},
		{amqp.Table{"t": time.Unix(5, 0), "d": amqp.Decimal{Scale: 1, Value: 5}}, amqp.Table{"t": int8(5), "d": amqp.Decimal{Scale: 1, Value: 5}}},
		{nil, nil},
	}
	for _, s := range seeds {
		f.Add(amqp.AppendTable(nil, s.args), amqp.AppendTable(nil, s.hdrs))
	}
	f.Fuzz(func(t *testing.T, argBytes, hdrBytes []byte) {
		args, err := amqp.DecodeTable(argBytes)
		if err != nil {
			return
		}
		hdrs, err := amqp.DecodeTable(hdrBytes)
		if err != nil {
			return
		}
		if err := ValidateHeadersArgs(args); err != nil && err.Error() == "" {
			t.Fatal("validation error with empty text")
		}
		m := NewHeaders[int]()
		m.Add(Binding[int]{Dest: 1, Args: args})
		got := 0
		m.Match("", hdrs, func(int) { got++ })
		if want := refHeadersMatch(args, hdrs); (got == 1) != want || got > 1 {
			t.Fatalf("args %v headers %v: visited %d times, reference says %v", args, hdrs, got, want)
		}
		again, err := amqp.DecodeTable(argBytes)
		if err != nil {
			t.Fatalf("second decode failed: %v", err)
		}
		if !m.Remove(Binding[int]{Dest: 1, Args: again}) || m.Len() != 0 {
			t.Fatalf("binding with args %v could not be removed with a fresh decoding", args)
		}
	})
}
