package server

import (
	"errors"
	"math"
	"strconv"

	"github.com/warrenmq/warren/amqp"
)

// Delayed messages, as the rabbitmq-delayed-message-exchange plugin (3.10.2)
// offers them: an exchange of type x-delayed-message routes with the matcher
// of its x-delayed-type argument, and a message with an x-delay header of a
// delay in milliseconds is held until its time comes and then routed to the
// queues bound at that moment. LavinMQ's x-delayed-exchange: true argument
// makes an exchange of an ordinary type delay messages the same way.
//
// What the plugin does, checked against RabbitMQ 3.10.8 with the plugin:
//   - a missing or non-string x-delayed-type is 406 "Invalid argument,
//     'x-delayed-type' must be an existing exchange type"; x-delayed-message
//     itself is 406 "Invalid argument, 'x-delayed-message' can't be used for
//     'x-delayed-type'"; an unknown type is 503 "unknown exchange type 'T'".
//   - a delay is an integer header, or a float (truncated), or a string of
//     decimal digits; it delays the message when 0 < delay <= 2^32-1 ms.
//     Anything else (no header, zero, negative, larger, a boolean, a table)
//     routes the message at once. A string that is not an integer, or a
//     decimal, crashes the plugin's routing and RabbitMQ closes the
//     connection with 541 INTERNAL_ERROR; Warren answers the same.
//   - a delayed message has no queue when it is published, so a mandatory
//     one is returned at once (312 NO_ROUTE) and still delivered later; the
//     confirm does not wait for the delivery.
//   - the delivered message keeps its headers as published (x-delay too).
//   - the exchange's management object has messages_delayed.
//
// Unlike the plugin, Warren keeps delayed messages in the vhost's message
// store and a queue index per exchange, confirms a delayed publish only when
// it is stored under the vhost's flush policy, keeps a bounded head of them in
// memory (delayHeadMax), and drops an exchange's delayed messages when the
// exchange is deleted (the plugin routes them through a redeclared exchange
// of the same name).

const (
	kindDelayed = "x-delayed-message"
	// argDelayedType names the type an x-delayed-message exchange routes as.
	argDelayedType = "x-delayed-type"
	// argDelayedExchange is LavinMQ's switch for delaying on any type.
	argDelayedExchange = "x-delayed-exchange"
	// headerDelay is the publisher's delay in milliseconds.
	headerDelay = "x-delay"
	// maxDelay is the largest delay the plugin accepts: Erlang's longest
	// timer, 2^32-1 ms (about 49.7 days). A larger one routes at once.
	maxDelay = math.MaxUint32
)

// matchKind returns the type whose matcher routes an exchange of kind with
// args: x-delayed-type for x-delayed-message, else kind itself. ok is false
// for an x-delayed-message exchange without a string x-delayed-type.
func matchKind(kind string, args amqp.Table) (string, bool) {
	if kind != kindDelayed {
		return kind, true
	}
	t, ok := args[argDelayedType].(string)
	return t, ok
}

// isDelayedExchange reports whether an exchange of kind with args delays
// messages with an x-delay header.
func isDelayedExchange(kind string, args amqp.Table) bool {
	if kind == kindDelayed {
		return true
	}
	v, ok := args[argDelayedExchange].(bool)
	return ok && v
}

// checkDelayedType validates an x-delayed-message exchange's x-delayed-type
// with the plugin's errors, but for an unknown type, which route.New finds.
func checkDelayedType(args amqp.Table) *amqp.Error {
	t, ok := args[argDelayedType].(string)
	switch {
	case !ok:
		return amqp.NewError(amqp.PreconditionFailed, methodExchangeDeclare,
			"Invalid argument, 'x-delayed-type' must be an existing exchange type")
	case t == kindDelayed:
		return amqp.NewError(amqp.PreconditionFailed, methodExchangeDeclare,
			"Invalid argument, 'x-delayed-message' can't be used for 'x-delayed-type'")
	}
	return nil // newExchange refuses an unknown type, naming it
}

// errDelayCrash is RabbitMQ's answer to an x-delay its plugin cannot convert:
// the channel process crashes and the connection is closed with 541.
var errDelayCrash = &amqp.Error{Code: amqp.InternalError}

// messageDelay reads m's x-delay header as the plugin does and returns the
// delay in milliseconds, 0 when m is to be routed at once, or errDelayCrash.
func messageDelay(m *Message) (int64, *amqp.Error) {
	if amqp.PeekFlags(m.RawProps)&amqp.FlagHeaders == 0 {
		return 0, nil
	}
	p, err := m.sharedProperties()
	if err != nil { // validated at publish
		return 0, nil
	}
	v, ok := p.Headers[headerDelay]
	if !ok {
		return 0, nil
	}
	d, aerr := delayValue(v)
	if aerr != nil || d <= 0 || d > maxDelay {
		return 0, aerr
	}
	return d, nil
}

// delayValue converts an x-delay value as the plugin's get_delay does:
// integers as they are, floats truncated, strings by binary_to_integer (a
// crash when they are not an integer, as a decimal is); any other type is
// "no delay", here 0.
func delayValue(v any) (int64, *amqp.Error) {
	if n, ok := intArg(v); ok {
		return n, nil
	}
	switch x := v.(type) {
	case float32:
		return truncDelay(float64(x)), nil
	case float64:
		return truncDelay(x), nil
	case string:
		return parseDelayString(x)
	case amqp.Decimal:
		return 0, errDelayCrash // trunc/1 of the plugin's {Scale, Value} tuple
	}
	return 0, nil
}

// truncDelay truncates a float delay towards zero; one out of range (or not
// a number, which Erlang has no term for) routes at once.
func truncDelay(f float64) int64 {
	if math.IsNaN(f) || f <= 0 || f > maxDelay {
		return 0
	}
	return int64(f)
}

// parseDelayString is binary_to_integer: an optional sign and decimal digits,
// of any size; a number too large for a delay routes at once.
func parseDelayString(s string) (int64, *amqp.Error) {
	digits := s
	if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, errDelayCrash
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, errDelayCrash
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // only out of range is left: far beyond maxDelay either way
		return 0, nil
	}
	return n, nil
}

// holdDelayed gives m to each delaying exchange that holds it for delay ms.
// It has no queue yet, so it does not count as routed (a mandatory one is
// returned, as by the plugin); its confirm waits for the durable copies.
func (vh *Vhost) holdDelayed(exs []*Exchange, m *Message, delay int64, res *routeResult) {
	for _, ex := range exs {
		stored, err := ex.delay.put(m, delay)
		if err != nil {
			if !errors.Is(err, errDelayIndexDown) && !errors.Is(err, errDelayStoreRefused) {
				vh.log.Error("a delayed message could not be stored; it is refused", "exchange", ex.name, "err", err)
			}
			res.rejected = true
			continue
		}
		res.stored = res.stored || stored
	}
}

// withBCC returns m as the delayed-message plugin keeps it: with the BCC
// header that sender-selected distribution removed before routing put back,
// so its keys route it when it fires (bccForFiring). m itself is returned
// when it had no BCC keys.
func withBCC(m *Message) *Message {
	p, err := m.sharedProperties()
	if err != nil || len(m.ccKeys) == 0 {
		return m
	}
	cc, _ := p.Headers["CC"].([]any)
	nCC := len(appendKeys(nil, cc))
	if len(m.ccKeys) <= nCC {
		return m
	}
	bcc := make([]any, 0, len(m.ccKeys)-nCC)
	for _, k := range m.ccKeys[nCC:] {
		bcc = append(bcc, k)
	}
	headers := make(amqp.Table, len(p.Headers)+1)
	for k, v := range p.Headers {
		headers[k] = v
	}
	headers["BCC"] = bcc
	p.Headers = headers
	p.Flags |= amqp.FlagHeaders
	c := *m
	c.RawProps = p.AppendTo(nil)
	c.props = nil
	c.ccKeys = m.ccKeys[:nCC:nCC]
	return &c
}

// bccForFiring prepares a fired message that carries a BCC header (withBCC)
// as the plugin's firing does: the BCC keys route it and the header goes.
// Re-encoding the properties then shows the plugin's x-delay swap, which
// RabbitMQ sends only when it re-encodes them: x-delay becomes -delay.
func bccForFiring(m *Message) {
	p, err := m.Properties()
	if err != nil {
		return
	}
	bcc, ok := p.Headers["BCC"].([]any)
	if !ok {
		return
	}
	m.ccKeys = appendKeys(m.ccKeys, bcc)
	headers := make(amqp.Table, len(p.Headers))
	for k, v := range p.Headers {
		if k != "BCC" {
			headers[k] = v
		}
	}
	if d, err := delayValue(headers[headerDelay]); err == nil && d > 0 {
		headers[headerDelay] = negatedDelay(d)
	}
	p.Headers = headers
	m.RawProps = p.AppendTo(nil)
}

// negatedDelay is -d as the plugin writes it: a signed 32-bit integer
// (Warren uses 64 bits where -d does not fit, instead of wrapping it).
func negatedDelay(d int64) any {
	if d <= math.MaxInt32 {
		return int32(-d)
	}
	return -d
}
