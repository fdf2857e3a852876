package server

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Validation of policies and their definition keys, with RabbitMQ's texts.

// policyKeyKind says how a definition key is validated.
type policyKeyKind int

const (
	keyString   policyKeyKind = iota
	keyNonNeg                 // integer ≥ 0
	keyPositive               // integer ≥ 1
	keyEnum
	keyAny         // stored only (ha-* keys for the cluster work)
	keyAge         // an interval string such as "7D" (streams' max-age)
	keySegmentSize // a stream segment size in bytes
	keyIntEnum     // one of ints
	keyRange       // an integer from ints[0] to ints[1]
	keyPattern     // a regular expression
)

type policyKey struct {
	kind policyKeyKind
	enum []string
	ints []int64 // keyIntEnum's values; min and max for keyRange
	// what names the value in RabbitMQ's validation error text.
	what string
	// bad is the whole text, %s the value, where RabbitMQ's is not
	// "<value> is not a valid <what>".
	bad string
	// arg is the queue x-argument the key stands for; "" when it does not
	// configure queues (alternate-exchange, queue-mode, ha-*).
	arg string
	// argWins reports whether a declared x-argument wins over the policy;
	// otherwise the smaller of the two applies, as RabbitMQ's res_min.
	argWins bool
}

// policyKeys are the definition keys Warren accepts in policies: those of
// RabbitMQ 3.10 to 4.x, validated as RabbitMQ validates them, so a
// definitions file exported from any of them imports. The rule for a key
// whose feature Warren does not have on one node (mirroring, replica
// placement, federation links, per-queue memory limits, a second classic
// queue format): it is accepted, validated, stored and exported with the
// policy, and the README's policy key table says it has no effect; arg is ""
// for those, so nothing claims it configured a queue.
var policyKeys = map[string]policyKey{
	"message-ttl":             {kind: keyNonNeg, what: "message TTL", arg: "x-message-ttl"},
	"expires":                 {kind: keyPositive, what: "queue expiry", arg: "x-expires"},
	"max-length":              {kind: keyNonNeg, what: "maximum length", arg: "x-max-length"},
	"max-length-bytes":        {kind: keyNonNeg, what: "maximum length in bytes", arg: "x-max-length-bytes"},
	"delivery-limit":          {kind: keyNonNeg, what: "delivery limit", arg: "x-delivery-limit"},
	"consumer-timeout":        {kind: keyPositive, what: "consumer timeout", arg: "x-consumer-timeout"},
	"overflow":                {kind: keyEnum, enum: []string{"drop-head", "reject-publish", "reject-publish-dlx"}, what: "overflow value", arg: "x-overflow", argWins: true},
	"dead-letter-exchange":    {kind: keyString, what: "dead letter exchange name", arg: "x-dead-letter-exchange", argWins: true},
	"dead-letter-routing-key": {kind: keyString, what: "dead letter routing key", arg: "x-dead-letter-routing-key", argWins: true},
	"alternate-exchange":      {kind: keyString, what: "alternate exchange name"},
	// A quorum queue's (quorumPolicyArgs), with no argument to merge into:
	// a classic queue refuses x-dead-letter-strategy.
	"dead-letter-strategy":   {kind: keyEnum, enum: []string{"at-most-once", "at-least-once"}, what: "dead letter strategy"},
	"queue-mode":             {kind: keyEnum, enum: []string{"default", "lazy"}, what: "queue-mode value"},
	"ha-mode":                {kind: keyEnum, enum: []string{"all", "exactly", "nodes"}, what: "ha-mode value"},
	"ha-params":              {kind: keyAny},
	"ha-sync-mode":           {kind: keyEnum, enum: []string{"manual", "automatic"}, what: "ha-sync-mode value"},
	"ha-sync-batch-size":     {kind: keyPositive, what: "ha-sync-batch-size value"},
	"ha-promote-on-shutdown": {kind: keyEnum, enum: []string{"when-synced", "always"}, what: "ha-promote-on-shutdown value"},
	"ha-promote-on-failure":  {kind: keyEnum, enum: []string{"when-synced", "always"}, what: "ha-promote-on-failure value"},
	// Warren's own: how many in-sync replicas a mirrored queue needs to
	// commit (design §6.3), 1 when absent.
	"ha-min-isr": {kind: keyPositive, what: "ha-min-isr value"},

	// Accepted with RabbitMQ's validation; no effect on a single Warren node
	// (see the README's policy key table).
	"queue-version":               {kind: keyIntEnum, ints: []int64{1, 2}, what: "queue-version value"},
	"queue-master-locator":        {kind: keyEnum, enum: []string{"min-masters", "client-local", "random"}, bad: "%s invalid queue-master-locator value"},
	"queue-leader-locator":        {kind: keyEnum, enum: []string{"client-local", "balanced", "random", "least-leaders"}, what: "queue leader locator value"},
	"max-in-memory-length":        {kind: keyNonNeg, what: "maximum memory in bytes"}, // sic, RabbitMQ's text
	"max-in-memory-bytes":         {kind: keyNonNeg, what: "maximum memory in bytes"},
	"initial-cluster-size":        {kind: keyNonNeg, what: "cluster size"},
	"target-group-size":           {kind: keyPositive, what: "qq target count value"},
	"stream-filter-size-bytes":    {kind: keyRange, ints: []int64{16, 255}, what: "filter size. Valid range is 16-255"},
	"federation-upstream":         {kind: keyString, what: "federation upstream name"},
	"federation-upstream-set":     {kind: keyString, what: "federation upstream set name"},
	"federation-upstream-pattern": {kind: keyPattern, what: "federation upstream pattern name"},

	// Stream retention (streamPolicyKeys); max-length-bytes above applies to
	// streams too.
	"max-age":                       {kind: keyAge, what: "max age"},
	"stream-max-segment-size-bytes": {kind: keySegmentSize, what: "segment size"},
}

// operatorPolicyKeys are the keys an operator policy may set (RabbitMQ's
// operator_policy_validator list, plus consumer-timeout as in later releases).
var operatorPolicyKeys = map[string]bool{
	"expires": true, "message-ttl": true, "max-length": true, "max-length-bytes": true,
	"delivery-limit": true, "consumer-timeout": true,
	"max-in-memory-length": true, "max-in-memory-bytes": true, "target-group-size": true,
}

// maxPolicyPatternLen bounds a policy pattern; Go's regexp is linear-time, so
// only the compiled size needs a limit.
const maxPolicyPatternLen = 4096

// htmlEscaper escapes what RabbitMQ's management API escapes in reasons.
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// policyError is RabbitMQ's policy validation text (HTML-escaped, as its
// management API returns it).
func policyError(format string, a ...any) error {
	return fmt.Errorf("%w: Validation failed\n\n%s\n", ErrInvalid, htmlEscaper.Replace(fmt.Sprintf(format, a...)))
}

// erlTerm renders a JSON-like value the way Erlang's ~p prints it in
// RabbitMQ's validation messages.
func erlTerm(v any) string {
	switch v := v.(type) {
	case string:
		return `<<"` + v + `">>`
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// ValidatePolicy checks a policy as RabbitMQ does before storing it: the name,
// a compilable pattern, apply-to, and every definition key and value. An
// operator policy accepts only the numeric limit keys.
func ValidatePolicy(p Policy, operator bool) error {
	if p.Name == "" {
		return fmt.Errorf("%w: policy name is empty", ErrInvalid)
	}
	if len(p.Pattern) > maxPolicyPatternLen {
		return policyError("pattern is longer than %d bytes", maxPolicyPatternLen)
	}
	if _, err := regexp.Compile(p.Pattern); err != nil {
		return policyError("%s is not a valid regular expression: %v", erlTerm(p.Pattern), err)
	}
	switch p.ApplyTo {
	case ApplyToQueues, ApplyToExchanges, ApplyToAll, ApplyToClassicQueues, ApplyToQuorumQueues, ApplyToStreams:
	default:
		// RabbitMQ 4.x's text, which lists the queue-type values 3.10 lacks.
		return policyError("apply-to '%s' unrecognised; should be one of: 'queues', 'classic_queues',  "+
			"'quorum_queues', 'streams', 'exchanges', or 'all'", p.ApplyTo)
	}
	if len(p.Definition) == 0 {
		return policyError("no policy provided")
	}
	var unknown []string
	for k := range p.Definition {
		_, known := policyKeys[k]
		if !known || (operator && !operatorPolicyKeys[k]) {
			unknown = append(unknown, erlTerm(k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return policyError("[%s] are not recognised policy settings", strings.Join(unknown, ","))
	}
	for _, k := range slices.Sorted(maps.Keys(p.Definition)) {
		if err := validatePolicyValue(k, p.Definition[k]); err != nil {
			return err
		}
	}
	if n := countFederationKeys(p.Definition); n > 1 {
		return policyError("cannot specify federation-upstream, federation-upstream-set or federation-upstream-pattern together")
	}
	if _, ok := p.Definition["ha-params"]; ok {
		if _, mode := p.Definition["ha-mode"]; !mode {
			return policyError("ha-params is set but ha-mode is not")
		}
	}
	if mode, ok := p.Definition["ha-mode"].(string); ok {
		return validateHAParams(mode, p.Definition["ha-params"])
	}
	return nil
}

// validateHAParams is rabbit_mirror_queue_misc:validate_policy's check of
// ha-params for an ha-mode (nil: absent), with its texts.
func validateHAParams(mode string, params any) error {
	switch mode {
	case "all":
		if params != nil {
			return policyError(`ha-mode="all" does not take parameters`)
		}
	case "exactly":
		if n, ok := haCount(params); !ok || n <= 0 {
			given := "none"
			if params != nil {
				given = erlTerm(params)
			}
			return policyError(`ha-mode="exactly" takes an integer, %s given`, given)
		}
	case "nodes":
		list, ok := params.([]any)
		switch {
		case !ok:
			given := "none"
			if params != nil {
				given = erlTerm(params)
			}
			return policyError(`ha-mode="nodes" takes a list, %s given`, given)
		case len(list) == 0:
			return policyError(`ha-mode="nodes" list must be non-empty`)
		}
		var bad []string
		for _, v := range list {
			if _, isStr := v.(string); !isStr {
				bad = append(bad, erlTerm(v))
			}
		}
		if len(bad) > 0 {
			return policyError(`ha-mode="nodes" takes a list of strings, [%s] was not a string`, strings.Join(bad, ","))
		}
	}
	return nil
}

func countFederationKeys(def map[string]any) int {
	n := 0
	for _, k := range []string{"federation-upstream", "federation-upstream-set", "federation-upstream-pattern"} {
		if _, ok := def[k]; ok {
			n++
		}
	}
	return n
}

func validatePolicyValue(k string, v any) error {
	spec := policyKeys[k]
	if spec.bad == "" {
		return checkPolicyValue(spec, v)
	}
	if err := checkPolicyValue(spec, v); err != nil {
		return policyError(spec.bad, erlTerm(v))
	}
	return nil
}

// checkPolicyValue validates v as spec says.
func checkPolicyValue(spec policyKey, v any) error {
	switch spec.kind {
	case keyString:
		if _, ok := v.(string); !ok {
			return policyError("%s is not a valid %s", erlTerm(v), spec.what)
		}
	case keyNonNeg, keyPositive:
		n, ok := v.(int64)
		if !ok || n < 0 || (spec.kind == keyPositive && n < 1) {
			return policyError("%s is not a valid %s", erlTerm(v), spec.what)
		}
	case keyEnum:
		s, ok := v.(string)
		if !ok || !slices.Contains(spec.enum, s) {
			return policyError("%s is not a valid %s", erlTerm(v), spec.what)
		}
	case keyIntEnum, keyRange:
		n, ok := v.(int64)
		if spec.kind == keyIntEnum {
			ok = ok && slices.Contains(spec.ints, n)
		} else {
			ok = ok && n >= spec.ints[0] && n <= spec.ints[1]
		}
		if !ok {
			return policyError("%s is not a valid %s", erlTerm(v), spec.what)
		}
	case keyPattern:
		s, ok := v.(string)
		if !ok {
			return policyError("%s is not a valid %s", erlTerm(v), spec.what)
		}
		if _, err := regexp.Compile(s); err != nil {
			return policyError("could not compile pattern %s to a regular expression. Error: %v", s, err)
		}
	case keyAge:
		if _, ok := streamMaxAge(v); !ok {
			return policyError("%s is not a valid %s", erlTerm(v), spec.what)
		}
	case keySegmentSize:
		_, isInt := v.(int64)
		if _, ok := streamSegmentSize(v); !isInt || !ok {
			return policyError("%s is not a valid %s", erlTerm(v), spec.what)
		}
	}
	return nil
}
