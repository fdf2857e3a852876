package route

import (
	"errors"
	"strconv"

	"github.com/warrenmq/warren/amqp"
)

// HashSource is what an x-consistent-hash exchange hashes, from its arguments:
// the routing key (the default), the header named by hash-header, or the
// property named by hash-property. The zero value hashes the routing key.
type HashSource struct {
	kind hashKind
	name string // the header or property name
}

type hashKind uint8

const (
	hashRoutingKey hashKind = iota
	hashHeader
	hashProperty
)

// ErrInvalidHashArgs means an x-consistent-hash exchange's hash-header or
// hash-property argument is rejected; ParseHashSource wraps it in an
// *ArgsError carrying the reply text.
var ErrInvalidHashArgs = errors.New("route: invalid consistent-hash arguments")

// ParseHashSource validates an x-consistent-hash exchange's arguments as the
// plugin's validate/1 does, with its reply texts for the two cases it words:
// both arguments set, and an unknown property. A hash-header or hash-property
// that is not a longstr crashes the plugin (541 INTERNAL_ERROR, connection
// closed); Warren refuses it with a 406 saying so instead.
func ParseHashSource(args amqp.Table) (HashSource, error) {
	header, hasHeader := args["hash-header"]
	property, hasProperty := args["hash-property"]
	h, hok := header.(string)
	p, pok := property.(string)
	switch {
	case hasHeader && !hok:
		return HashSource{}, hashArgsError("hash-header must be a longstr, not " + ErlangType(header))
	case hasProperty && !pok:
		return HashSource{}, hashArgsError("hash-property must be a longstr, not " + ErlangType(property))
	case hasHeader && hasProperty:
		return HashSource{}, hashArgsError("hash-header and hash-property are mutually exclusive")
	case hasHeader:
		return HashSource{kind: hashHeader, name: h}, nil
	case hasProperty:
		switch p {
		case "correlation_id", "message_id", "timestamp":
			return HashSource{kind: hashProperty, name: p}, nil
		}
		return HashSource{}, hashArgsError("Unsupported property: " + p)
	}
	return HashSource{}, nil
}

func hashArgsError(text string) error { return &ArgsError{Text: text, Err: ErrInvalidHashArgs} }

// hash returns phash2 of the term the plugin hashes for d:
//   - the routing key (the first of the message's routing keys) as a binary;
//   - rabbit_misc:table_lookup(Headers, Name): {Type, Value}, or the atom
//     undefined when the header (or every header) is absent;
//   - the property as a binary, the timestamp as its decimal digits, or
//     undefined when the property is absent.
func (s HashSource) hash(d *Delivery) uint32 {
	var t termHash
	switch s.kind {
	case hashHeader:
		v, ok := d.Headers[s.name]
		if !ok {
			t.atom(atomUndefined)
			break
		}
		t.field(v)
	case hashProperty:
		s.hashProperty(&t, d.Properties)
	default:
		return phash2Binary(d.RoutingKey)
	}
	return t.sum()
}

func (s HashSource) hashProperty(t *termHash, p *amqp.Properties) {
	if p == nil {
		t.atom(atomUndefined)
		return
	}
	switch s.name {
	case "correlation_id":
		if p.Flags&amqp.FlagCorrelationID != 0 {
			t.binary(p.CorrelationID)
			return
		}
	case "message_id":
		if p.Flags&amqp.FlagMessageID != 0 {
			t.binary(p.MessageID)
			return
		}
	case "timestamp":
		if p.Flags&amqp.FlagTimestamp != 0 {
			var buf [20]byte
			t.bytes(strconv.AppendUint(buf[:0], p.Timestamp, 10))
			return
		}
	}
	t.atom(atomUndefined)
}
