package server

import (
	"encoding/json"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// RabbitMQ's validation messages print the offending value with Erlang's
// ~p, so a client comparing texts sees <<"x">> for a string. These types
// are a JSON value as RabbitMQ 3.10 holds it after decoding (strings are
// binaries, null/true/false atoms, objects maps; a parameter's top-level
// object a proplist of {Key, Value} tuples), and erlFormat prints them as
// io_lib:format("~p") does when the term fits on its line.

type (
	termBin   string // <<"...">>
	termAtom  string
	termInt   string // decimal digits, any size
	termFloat float64
	termList  []any
	termTuple []any
	termMap   []termPair // sorted by key
	termPair  struct{ key, value any }
)

// erlTermOf converts a decoded JSON value (the management API's int64 and
// float64, meta.db's json.Number) to its Erlang term.
func erlTermOf(v any) any {
	switch v := v.(type) {
	case nil:
		return termAtom("null")
	case bool:
		return termAtom(strconv.FormatBool(v))
	case string:
		return termBin(v)
	case int:
		return termInt(strconv.Itoa(v))
	case int64:
		return termInt(strconv.FormatInt(v, 10))
	case float64:
		return termFloat(v)
	case json.Number:
		if _, ok := new(big.Int).SetString(v.String(), 10); ok {
			return termInt(v.String())
		}
		f, _ := v.Float64()
		return termFloat(f)
	case []any:
		l := make(termList, len(v))
		for i, e := range v {
			l[i] = erlTermOf(e)
		}
		return l
	case map[string]any:
		m := make(termMap, 0, len(v))
		for _, k := range sortedKeys(v) {
			m = append(m, termPair{termBin(k), erlTermOf(v[k])})
		}
		return m
	}
	return termAtom("undefined")
}

// erlProplist is maps:to_list of an object: [{<<"k">>, V}, ...] by key.
func erlProplist(m map[string]any) termList {
	l := make(termList, 0, len(m))
	for _, k := range sortedKeys(m) {
		l = append(l, termTuple{termBin(k), erlTermOf(m[k])})
	}
	return l
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// erlFormat prints t as ~p does on one line (or ~w).
func erlFormat(t any) string {
	var b strings.Builder
	erlWrite(&b, t)
	return b.String()
}

func erlWrite(b *strings.Builder, t any) {
	switch t := t.(type) {
	case termBin:
		erlWriteBinary(b, string(t))
	case termAtom:
		b.WriteString(string(t))
	case termInt:
		b.WriteString(string(t))
	case termFloat:
		b.WriteString(erlFloatString(float64(t)))
	case termList:
		erlWriteSeq(b, "[", []any(t), "]")
	case termTuple:
		erlWriteSeq(b, "{", []any(t), "}")
	case termMap:
		b.WriteString("#{")
		for i, p := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			erlWrite(b, p.key)
			b.WriteString(" => ")
			erlWrite(b, p.value)
		}
		b.WriteByte('}')
	}
}

func erlWriteSeq(b *strings.Builder, open string, items []any, end string) {
	b.WriteString(open)
	for i, e := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		erlWrite(b, e)
	}
	b.WriteString(end)
}

// erlWriteBinary prints a binary as ~p does: <<"text">> when every byte is
// printable Latin-1 (each byte shown as that character), else <<1,2,3>>.
func erlWriteBinary(b *strings.Builder, s string) {
	printable := true
	for i := 0; i < len(s) && printable; i++ {
		c := s[i]
		printable = (c >= 32 && c <= 126) || c >= 160 || strings.IndexByte("\n\r\t\v\b\f\x1b", c) >= 0
	}
	b.WriteString("<<")
	if !printable {
		for i := 0; i < len(s); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(s[i])))
		}
		b.WriteString(">>")
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\v':
			b.WriteString(`\v`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\x1b':
			b.WriteString(`\e`)
		default:
			// The byte as it is: RabbitMQ prints it as a Latin-1
			// character and sends that character as this byte.
			b.WriteByte(c)
		}
	}
	b.WriteString(`">>`)
}

// erlFloatString prints a float as Erlang's shortest round-trip form:
// plain ("100.0", "0.001") or scientific ("1.0e3", "1.0e-5"), whichever
// is shorter, plain on a tie.
func erlFloatString(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64) // JSON has neither
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// digits d1d2...dn and exponent e: f = 0.d1d2...dn * 10^e.
	sci := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±x
	mant, expStr, _ := strings.Cut(sci, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	frac := digits[1:]
	if frac == "" {
		frac = "0"
	}
	scientific := digits[:1] + "." + frac + "e" + strconv.Itoa(exp)
	var plain string
	switch {
	case exp < 0:
		plain = "0." + strings.Repeat("0", -exp-1) + digits
	case exp+1 >= len(digits):
		plain = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	default:
		plain = digits[:exp+1] + "." + digits[exp+1:]
	}
	if len(scientific) < len(plain) {
		return sign + scientific
	}
	return sign + plain
}
