package route

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Rendering of field values as RabbitMQ's error texts show them: the type is the
// atom rabbit_binary_parser decodes the tag to, and the value is printed as
// Erlang's ~p prints the decoded term. The server package formats its
// argument errors with these too, so there is one rendering for both.

// ErlangType returns RabbitMQ's name for v's field type.
func ErlangType(v any) string {
	switch wireTag(v) {
	case 't':
		return "bool"
	case 'b':
		return "byte"
	case 'B':
		return "unsignedbyte"
	case 's':
		return "short"
	case 'u':
		return "unsignedshort"
	case 'I':
		return "signedint"
	case 'i':
		return "unsignedint"
	case 'l':
		return "long"
	case 'f':
		return "float"
	case 'd':
		return "double"
	case 'D':
		return "decimal"
	case 'S':
		return "longstr"
	case 'x':
		return "binary"
	case 'A':
		return "array"
	case 'T':
		return "timestamp"
	case 'F':
		return "table"
	}
	return "void"
}

// ErlangTerm renders v's decoded value as an Erlang term.
func ErlangTerm(v any) string {
	return string(AppendErlangTerm(nil, v))
}

// AppendErlangTerm appends v's decoded value, rendered as an Erlang term, to b.
// Values are rendered as the wire carries them: a uint64 as the signed 'l' it
// is written as, a timestamp as unsigned seconds, a decimal's value unsigned.
func AppendErlangTerm(b []byte, v any) []byte {
	switch v := v.(type) {
	case bool:
		return strconv.AppendBool(b, v)
	case int8:
		return strconv.AppendInt(b, int64(v), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10)
	case int16:
		return strconv.AppendInt(b, int64(v), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(v), 10)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10)
	case int64, int, uint64:
		return strconv.AppendInt(b, asLong(v), 10)
	case float32:
		return appendErlFloat(b, float64(v))
	case float64:
		return appendErlFloat(b, v)
	case amqp.Decimal:
		// Decoded as {Scale, Value} with Value read unsigned.
		b = append(b, '{')
		b = strconv.AppendUint(b, uint64(v.Scale), 10)
		b = append(b, ',')
		b = strconv.AppendUint(b, uint64(uint32(v.Value)), 10)
		return append(b, '}')
	case string:
		return appendErlBinary(b, v)
	case []byte:
		return appendErlBinary(b, string(v))
	case time.Time:
		return strconv.AppendUint(b, uint64(v.Unix()), 10)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = append(b, ErlangType(e)...)
			b = append(b, ',')
			b = AppendErlangTerm(b, e)
			b = append(b, '}')
		}
		return append(b, ']')
	case amqp.Table, map[string]any:
		t := asTable(v)
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the order amqp.AppendTable puts on the wire
		b = append(b, '[')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = appendErlBinary(b, k)
			b = append(b, ',')
			b = append(b, ErlangType(t[k])...)
			b = append(b, ',')
			b = AppendErlangTerm(b, t[k])
			b = append(b, '}')
		}
		return append(b, ']')
	}
	return append(b, "undefined"...)
}

// appendErlBinary renders a binary as ~p does with Erlang's default
// printable range (Latin-1): <<"text">> when every byte, read as a Latin-1
// character, is printable, with the bytes written as they are (RabbitMQ
// 3.10.8 answers <<"é">> for the UTF-8 bytes of é, <<"\xe9">> for the
// single byte 0xe9), and a list of byte values otherwise (<<226,130,172>>
// for €, whose UTF-8 bytes include 0x82).
func appendErlBinary(b []byte, s string) []byte {
	if s == "" {
		return append(b, "<<>>"...)
	}
	printable := true
	for i := 0; i < len(s) && printable; i++ {
		printable = erlPrintable(rune(s[i]))
	}
	if !printable {
		b = append(b, "<<"...)
		for i := 0; i < len(s); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(s[i]), 10)
		}
		return append(b, ">>"...)
	}
	b = append(b, `<<"`...)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\v':
			b = append(b, `\v`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case 0x1b:
			b = append(b, `\e`...)
		default:
			b = append(b, c)
		}
	}
	return append(b, `">>`...)
}

// erlPrintable is io_lib's printable Latin-1 test.
func erlPrintable(r rune) bool {
	switch {
	case r >= ' ' && r <= '~', r >= 0xa0 && r <= 0xff:
		return true
	}
	return strings.ContainsRune("\n\r\t\v\b\f\x1b", r)
}

// appendErlFloat renders f as Erlang prints floats: the shortest digits that
// read back exactly, always with a fraction, in whichever of plain or
// exponent notation is shorter (1.0, 0.1, 100.0, 1.0e6, 1.5e-7).
func appendErlFloat(b []byte, f float64) []byte {
	if f == 0 {
		if 1/f < 0 {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	// Go gives d.ddde±XX; take the digits and the decimal point's place.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	return appendDecimal(b, digits, x+1)
}

// appendDecimal places the decimal point place digits into digits, choosing
// between plain and exponent notation as io_lib_format does.
func appendDecimal(b []byte, digits string, place int) []byte {
	n := len(digits)
	if place > 0 && place < n {
		b = append(b, digits[:place]...)
		b = append(b, '.')
		return append(b, digits[place:]...)
	}
	if place == 0 {
		b = append(b, "0."...)
		return append(b, digits...)
	}
	expStr := strconv.Itoa(place - 1)
	expDot := 1
	if n == 1 {
		expDot = 2
	}
	expCost := len(expStr) + 1 + expDot
	if place < 0 {
		if 2-place <= expCost {
			b = append(b, "0."...)
			b = append(b, strings.Repeat("0", -place)...)
			return append(b, digits...)
		}
	} else if place-n+2 <= expCost {
		b = append(b, digits...)
		b = append(b, strings.Repeat("0", place-n)...)
		return append(b, ".0"...)
	}
	b = append(b, digits[0])
	if n == 1 {
		b = append(b, ".0"...)
	} else {
		b = append(b, '.')
		b = append(b, digits[1:]...)
	}
	b = append(b, 'e')
	return append(b, expStr...)
}
