package server

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// Validation of runtime parameters, as RabbitMQ 3.10's components do it
// (rabbit_parameter_validation and each component's validate/5), so a
// definition RabbitMQ refuses is refused here with the same text, and a
// definitions file moved to RabbitMQ loads there. The shovel package runs
// the shovel parameters, the federation package the federation upstreams.

// ParameterError is a runtime parameter, global parameter or limit refused
// by validation. Reason is RabbitMQ's text: "Validation failed\n\n" and one
// line per error for parameters, the bare error for user limits.
type ParameterError struct{ Reason string }

func (e *ParameterError) Error() string { return e.Reason }

// Unwrap makes a ParameterError an ErrInvalid.
func (e *ParameterError) Unwrap() error { return ErrInvalid }

func validationFailed(errs []string) *ParameterError {
	var b strings.Builder
	b.WriteString("Validation failed\n\n")
	for _, e := range errs {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return &ParameterError{Reason: b.String()}
}

// paramCtx is what a component's validation may look at: the server and
// the user making the change ("" for a definitions import, which RabbitMQ
// validates without a user).
type paramCtx struct {
	srv  *Server
	user string
}

// check validates one value of a key and returns its errors, in RabbitMQ's
// order.
type check func(ctx paramCtx, key string, v any) []string

// constraint is one {Key, Fun, mandatory|optional} of RabbitMQ's proplist/3.
type constraint struct {
	key       string
	check     check
	mandatory bool
}

func optional(key string, c check) constraint  { return constraint{key, c, false} }
func mandatory(key string, c check) constraint { return constraint{key, c, true} }

// erlMsg formats a message whose last part is a JSON value printed with ~p.
func erlMsg(prefix string, v any) string { return erlMsgAt(prefix, erlTermOf(v)) }

// proplist is rabbit_parameter_validation:proplist/3 on a JSON object: each
// constraint's errors in reverse constraint order (its fold prepends), led
// by the keys no constraint knows.
func proplist(ctx paramCtx, name string, cs []constraint, v any) []string {
	m, ok := v.(map[string]any)
	var leftover termList // what no constraint takes, as RabbitMQ prints it
	if !ok {
		l, isList := v.([]any)
		if !isList {
			// RabbitMQ fails here with a 500; say what is wrong instead.
			return []string{erlMsg(name+" should be an object, actually was ", v)}
		}
		// A list is a proplist with no {Key, Value} in it: every element
		// is left over.
		m, leftover = map[string]any{}, erlTermOf(l).(termList)
	}
	var results [][]string
	seen := make(map[string]bool, len(cs))
	for _, c := range cs {
		val, present := m[c.key]
		switch {
		case present:
			seen[c.key] = true
			results = append(results, c.check(ctx, c.key, val))
		case c.mandatory:
			results = append(results, []string{fmt.Sprintf("Key \"%s\" not found in %s", c.key, name)})
		}
	}
	var out []string
	rest := map[string]any{}
	for k, val := range m {
		if !seen[k] {
			rest[k] = val
		}
	}
	if len(rest) > 0 {
		leftover = erlProplist(rest)
	}
	if len(leftover) > 0 {
		out = append(out, erlMsgAt("Unrecognised terms ", leftover)+" in "+name)
	}
	for i := len(results) - 1; i >= 0; i-- {
		out = append(out, results[i]...)
	}
	return out
}

// The type checks of rabbit_parameter_validation.

func isNumber(v any) bool {
	_, ok := erlTermOf(v).(termFloat)
	return ok || isInteger(v)
}

func isInteger(v any) bool {
	_, ok := erlTermOf(v).(termInt)
	return ok
}

func checkNumber(_ paramCtx, key string, v any) []string {
	if isNumber(v) {
		return nil
	}
	return []string{erlMsg(key+" should be a number, actually was ", v)}
}

func checkInteger(_ paramCtx, key string, v any) []string {
	if isInteger(v) {
		return nil
	}
	return []string{erlMsg(key+" should be a number, actually was ", v)}
}

func checkBinary(_ paramCtx, key string, v any) []string {
	if _, ok := v.(string); ok {
		return nil
	}
	return []string{erlMsg(key+" should be binary, actually was ", v)}
}

func checkBoolean(_ paramCtx, key string, v any) []string {
	if _, ok := v.(bool); ok {
		return nil
	}
	return []string{erlMsg(key+" should be boolean, actually was ", v)}
}

func checkEnum(options ...string) check {
	list := make(termList, len(options))
	for i, o := range options {
		list[i] = termBin(o)
	}
	return func(_ paramCtx, key string, v any) []string {
		s, ok := v.(string)
		if !ok {
			return []string{erlMsg(key+" should be binary, actually was ", v)}
		}
		if slices.Contains(options, s) {
			return nil
		}
		return []string{erlMsgAt(erlMsgAt(key+" should be one of ", list)+", actually was ", termBin(s))}
	}
}

// checkQueueName is amqp091_queue_name: a binary of at most 255 bytes.
func checkQueueName(ctx paramCtx, key string, v any) []string {
	s, ok := v.(string)
	if !ok {
		return checkBinary(ctx, key, v)
	}
	if len(s) > 255 {
		return []string{fmt.Sprintf("%s should be less than 255 bytes, actually was %d", key, len(s))}
	}
	return nil
}

// checkKeysIn accepts an object whose keys are all in keys; RabbitMQ's
// shovel checks queue and consumer arguments only by name.
func checkKeysIn(keys ...string) check {
	cs := make([]constraint, len(keys))
	for i, k := range keys {
		cs[i] = optional(k, func(paramCtx, string, any) []string { return nil })
	}
	return func(ctx paramCtx, key string, v any) []string { return proplist(ctx, key, cs, v) }
}

// isIntegerAtLeast reports whether v is an integer >= min.
func isIntegerAtLeast(v any, min int64) bool {
	n, ok := erlTermOf(v).(termInt)
	if !ok {
		return false
	}
	i, ok := new(big.Int).SetString(string(n), 10)
	return ok && i.Cmp(big.NewInt(min)) >= 0
}
