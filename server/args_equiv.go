package server

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// The arguments RabbitMQ 3.10 compares when a queue is redeclared, per queue
// type and in the order it compares them (each type's queue_arguments
// capability, used by rabbit_amqqueue:assert_args_equivalence): the first that
// differs is the one the 406 names. Arguments outside the list are not
// compared at all — a redeclare that differs only there is answered
// declare-ok and changes nothing — so Warren's own extensions (x-consumer-timeout,
// x-message-deduplication, x-stream-flush, ...) are not compared either.
var (
	classicEquivalenceArgs = []string{
		"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
		"x-queue-version", "x-single-active-consumer", "x-queue-type", "x-queue-master-locator",
	}
	quorumEquivalenceArgs = []string{
		"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-expires",
		"x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes",
		"x-overflow", "x-single-active-consumer", "x-queue-type", "x-quorum-initial-group-size",
		"x-delivery-limit", "x-message-ttl", "x-queue-leader-locator",
	}
	streamEquivalenceArgs = []string{
		"x-max-length-bytes", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes",
		"x-initial-cluster-size", "x-queue-leader-locator",
	}
	// exchangeEquivalenceArgs: of an exchange's arguments RabbitMQ compares
	// only alternate-exchange (rabbit_exchange:assert_args_equivalence).
	exchangeEquivalenceArgs = []string{"alternate-exchange"}
)

// queueEquivalenceArgs returns the compared arguments of a queue declared with args.
func queueEquivalenceArgs(args amqp.Table) []string {
	switch args["x-queue-type"] {
	case "stream":
		return streamEquivalenceArgs
	case "quorum":
		return quorumEquivalenceArgs
	}
	return classicEquivalenceArgs
}

// equivalentArgs compares the arguments keys of a redeclare (got) with those
// of the existing object (have) as rabbit_misc:assert_args_equivalence does:
// values are compared as Erlang terms, so an integer equals the same integer
// whatever its field-table width or signedness, a longstr equals a binary of
// the same bytes, and x-queue-type "classic" equals no x-queue-type.
func equivalentArgs(method uint32, what string, keys []string, got, have amqp.Table) *amqp.Error {
	for _, k := range keys {
		g, gok := got[k]
		h, hok := have[k]
		if argsEquivalent(k, g, gok, h, hok) {
			continue
		}
		return amqp.NewError(amqp.PreconditionFailed, method,
			"inequivalent arg '%s' for %s: received %s but current is %s", k, what,
			describeArg(g, gok, hok), describeArg(h, hok, gok))
	}
	return nil
}

func argsEquivalent(key string, got any, gok bool, have any, hok bool) bool {
	if gok && hok {
		return erlangTerm(got) == erlangTerm(have)
	}
	if !gok && !hok {
		return true
	}
	if key == "x-queue-type" {
		v := have
		if gok {
			v = got
		}
		return v == "classic"
	}
	return false
}

// describeArg renders one side of an inequivalence as RabbitMQ does: a bare
// quoted value when both sides have the argument, "the value '...' of type
// '...'" when only this side has it, and "none" when it is absent (or void
// beside a value).
func describeArg(v any, present, otherPresent bool) string {
	if !present {
		return "none"
	}
	if otherPresent {
		if v == nil {
			return "none" // rabbit_misc:val(undefined): a void value reads as absent
		}
		return "'" + erlangText(v) + "'"
	}
	return "the value '" + erlangText(v) + "' of type '" + argTypeName(v) + "'"
}

// argTypeName names a table value's type as RabbitMQ does in error texts
// (rabbit_binary_parser's type atoms).
func argTypeName(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int, uint64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case amqp.Decimal:
		return "decimal"
	case time.Time:
		return "timestamp"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case amqp.Table:
		return "table"
	case []any:
		return "array"
	}
	return "void"
}

// Erlang terms a field-table value decodes to in RabbitMQ, as comparable Go
// values: what erlangTerm returns for two values is == exactly when RabbitMQ
// finds them equivalent.
type (
	erlBinary    string // longstr and binary
	erlAtom      string // void decodes to undefined
	erlComposite string // a table, array or decimal, by its canonical encoding
)

func erlangTerm(v any) any {
	switch x := v.(type) {
	case bool:
		return x
	case float32:
		return float64(x)
	case float64:
		return x
	case string:
		return erlBinary(x)
	case []byte:
		return erlBinary(x)
	case time.Time:
		return x.Unix() // a timestamp is its seconds, equal to that integer
	case nil:
		return erlAtom("undefined")
	case uint64:
		if x > math.MaxInt64 {
			return erlComposite(canonicalArgs(amqp.Table{"": x}))
		}
		return int64(x)
	}
	if n, ok := intArg(v); ok {
		return n
	}
	return erlComposite(canonicalArgs(amqp.Table{"": v}))
}

// erlangText renders a value as RabbitMQ's error texts do: a binary as its
// bytes (~s), anything else as the Erlang term (~p).
func erlangText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	var b strings.Builder
	writeErlangTerm(&b, v)
	return b.String()
}

func writeErlangTerm(b *strings.Builder, v any) {
	switch x := v.(type) {
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case float32:
		b.WriteString(erlangFloat(float64(x)))
	case float64:
		b.WriteString(erlangFloat(x))
	case string:
		writeErlangBinary(b, []byte(x))
	case []byte:
		writeErlangBinary(b, x)
	case time.Time:
		b.WriteString(strconv.FormatInt(x.Unix(), 10))
	case nil:
		b.WriteString("undefined")
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case amqp.Decimal:
		b.WriteString("{" + strconv.Itoa(int(x.Scale)) + "," + strconv.FormatInt(int64(x.Value), 10) + "}")
	case amqp.Table:
		writeErlangTable(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("{" + argTypeName(e) + ",")
			writeErlangTerm(b, e)
			b.WriteByte('}')
		}
		b.WriteByte(']')
	default:
		if n, ok := intArg(v); ok {
			b.WriteString(strconv.FormatInt(n, 10))
		} else {
			b.WriteString("undefined")
		}
	}
}

// writeErlangTable writes a table as RabbitMQ holds it, a list of
// {Key,Type,Value}; Warren does not keep the wire order, so keys are sorted.
func writeErlangTable(b *strings.Builder, t amqp.Table) {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteByte('[')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('{')
		writeErlangBinary(b, []byte(k))
		b.WriteString("," + argTypeName(t[k]) + ",")
		writeErlangTerm(b, t[k])
		b.WriteByte('}')
	}
	b.WriteByte(']')
}

// writeErlangBinary writes <<"text">> for printable bytes, <<1,2,3>> otherwise.
func writeErlangBinary(b *strings.Builder, s []byte) {
	printable := true
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			printable = false
			break
		}
	}
	b.WriteString("<<")
	if printable {
		b.WriteByte('"')
		for _, c := range s {
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('"')
	} else {
		for i, c := range s {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(c)))
		}
	}
	b.WriteString(">>")
}

// erlangFloat formats f as Erlang's ~p does (io_lib_format:fwrite_g): the
// shortest digits that read back as f, in fixed notation unless the
// exponent form is shorter: 5.0, 0.5, 120.0, 1.2e3, 1.0e-5.
func erlangFloat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// 'e' with shortest precision: d.ddde±XX.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	return sign + erlangPlaceDigits(digits, x+1)
}

// erlangPlaceDigits is io_lib_format:insert_decimal: the value is
// 0.digits × 10^place.
func erlangPlaceDigits(s string, place int) string {
	l := len(s)
	if place >= 0 && place < l {
		if place == 0 {
			return "0." + s
		}
		return s[:place] + "." + s[place:]
	}
	expL := strconv.Itoa(place - 1)
	expDot := 1
	if l == 1 {
		expDot = 2
	}
	expCost := len(expL) + 1 + expDot
	if place < 0 {
		if 2-place <= expCost {
			return "0." + strings.Repeat("0", -place) + s
		}
	} else if place-l+2 <= expCost {
		return s + strings.Repeat("0", place-l) + ".0"
	}
	if l == 1 {
		return s + ".0e" + expL
	}
	return s[:1] + "." + s[1:] + "e" + expL
}
