package server

import (
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server/route"
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
func argTypeName(v any) string { return route.ErlangType(v) }

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
		if x.Unix() < 0 {
			// Read unsigned, a pre-1970 timestamp is above every 'l'.
			return erlComposite(canonicalArgs(amqp.Table{"": x}))
		}
		return x.Unix() // a timestamp is its seconds, equal to that integer
	case nil:
		return erlAtom("undefined")
	case uint64:
		return int64(x) // written as a signed 'l', so that is what RabbitMQ sees
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
	return route.ErlangTerm(v)
}
