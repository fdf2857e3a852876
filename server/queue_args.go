package server

import (
	"fmt"
	"strconv"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// Overflow behaviours of a queue at its length limit.
const (
	overflowDropHead = iota
	overflowRejectPublish
	overflowRejectPublishDLX
)

// queueArgs are a queue's x-arguments, parsed and validated once at declare.
type queueArgs struct {
	messageTTL      int64 // ms; -1 = none
	expires         int64 // ms; 0 = none
	dlx             string
	hasDLX          bool
	dlrk            string
	hasDLRK         bool
	maxLength       int64 // messages; -1 = none
	maxLengthBytes  int64 // body bytes; -1 = none
	overflow        int
	maxPriority     uint8 // 0 = not a priority queue
	singleActive    bool
	deliveryLimit   int64 // -1 = none
	consumerTimeout time.Duration
	dedup           bool
	dedupCacheSize  int
	dedupCacheTTL   time.Duration
	stream          *streamArgs // set for x-queue-type=stream (stream_args.go)
	quorum          *quorumArgs // set for x-queue-type=quorum (quorum_args.go)
	// mirrored: a classic queue whose declaration carries a placement (an
	// ha-* policy matched it in a cluster, mirror.go). Read only to choose
	// the queue's kind: a policy change re-parses the arguments without it.
	mirrored bool
}

// argError is a 406 naming the offending argument, worded as RabbitMQ does.
func argError(q, vhost, arg string, reason string, args ...any) *amqp.Error {
	return amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare, "invalid arg '%s' for %s: %s",
		arg, describeQueue(q, vhost), fmt.Sprintf(reason, args...))
}

// intArg reads an integer-typed table value of any width.
func intArg(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	}
	return 0, false
}

// queueTypeArg validates x-queue-type, which RabbitMQ checks before any
// other argument, and returns it ("" when absent).
func queueTypeArg(name, vhost string, args amqp.Table) (string, *amqp.Error) {
	v, ok := args["x-queue-type"]
	if !ok {
		return "", nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", argError(name, vhost, "x-queue-type", "{unacceptable_type,%s}", argTypeName(v))
	}
	if s != "classic" && s != "quorum" && s != "stream" {
		return "", argError(name, vhost, "x-queue-type", "%q", "unsupported queue type '"+s+"'")
	}
	return s, nil
}

// parseQueueArgs validates the x-arguments RabbitMQ checks at declare time.
// A stream's are its own (stream_args.go).
func parseQueueArgs(name, vhost string, args amqp.Table) (queueArgs, *amqp.Error) {
	qa := queueArgs{messageTTL: -1, maxLength: -1, maxLengthBytes: -1, deliveryLimit: -1, dedupCacheSize: 0}
	qtype, err := queueTypeArg(name, vhost, args)
	if err != nil {
		return qa, err
	}
	if qtype == "stream" {
		sa, err := parseStreamArgs(name, vhost, args)
		if err != nil {
			return qa, err
		}
		qa.stream = &sa
		return qa, nil
	}
	if qtype == "quorum" {
		return parseQuorumArgs(name, vhost, args, qa)
	}
	return parseClassicQueueArgs(name, vhost, args, qa)
}

// maxExpiry is the longest x-expires and x-message-ttl RabbitMQ takes, ten
// years in ms (rabbit_misc:check_expiry).
const maxExpiry = 315_360_000_000

// classicRefusedArgs are the arguments of RabbitMQ's quorum and stream types
// that a classic queue refuses (rabbit_queue_type:arguments(queue_arguments)
// less the classic type's). x-delivery-limit is not among them: Warren's
// classic queues honour it.
var classicRefusedArgs = []string{
	"x-dead-letter-strategy", "x-max-in-memory-length", "x-max-in-memory-bytes",
	"x-quorum-initial-group-size", "x-queue-leader-locator", "x-max-age",
	"x-stream-max-segment-size-bytes", "x-initial-cluster-size",
}

// expiryArg is x-expires (positive) or x-message-ttl (not negative), in
// rabbit_amqqueue's checks and words; ok is false when key is absent.
func expiryArg(name, vhost, key string, args amqp.Table) (n int64, ok bool, err *amqp.Error) {
	v, ok := args[key]
	if !ok {
		return 0, false, nil
	}
	n, isInt := intArg(v)
	switch {
	case !isInt:
		return 0, false, argError(name, vhost, key, "%q", "expected integer, got "+argTypeName(v))
	case n == 0 && key == "x-expires":
		return 0, false, argError(name, vhost, key, "{value_zero,0}")
	case n < 0:
		return 0, false, argError(name, vhost, key, "{value_negative,%d}", n)
	case n > maxExpiry:
		return 0, false, argError(name, vhost, key, "{value_too_large,%d}", n)
	}
	return n, true, nil
}

// optNonNegIntArg is nonNegIntArg for an argument that may be absent.
func optNonNegIntArg(name, vhost, key string, args amqp.Table) (int64, bool, *amqp.Error) {
	v, ok := args[key]
	if !ok {
		return 0, false, nil
	}
	n, err := nonNegIntArg(name, vhost, key, v)
	return n, err == nil, err
}

// parseClassicQueueArgs validates the arguments of a classic queue into
// qa, with RabbitMQ 3.10's checks and reply texts.
func parseClassicQueueArgs(name, vhost string, args amqp.Table, qa queueArgs) (queueArgs, *amqp.Error) {
	for _, k := range classicRefusedArgs {
		if _, ok := args[k]; ok {
			return qa, amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare,
				"invalid arg '%s' for %s of queue type rabbit_classic_queue", k, describeQueue(name, vhost))
		}
	}
	if err := parseDeadLettering(name, vhost, args, &qa); err != nil {
		return qa, err
	}
	if n, ok, err := expiryArg(name, vhost, "x-expires", args); err != nil {
		return qa, err
	} else if ok {
		qa.expires = n
	}
	if n, ok, err := expiryArg(name, vhost, "x-message-ttl", args); err != nil {
		return qa, err
	} else if ok {
		qa.messageTTL = n
	}
	if err := parseQueueLimits(name, vhost, args, &qa); err != nil {
		return qa, err
	}
	if err := parseQueueModes(name, vhost, args, &qa); err != nil {
		return qa, err
	}
	return parseQueueExtensions(name, vhost, args, qa)
}

// parseDeadLettering reads x-dead-letter-exchange and -routing-key.
func parseDeadLettering(name, vhost string, args amqp.Table, qa *queueArgs) *amqp.Error {
	if v, ok := args["x-dead-letter-exchange"]; ok {
		s, isStr := v.(string)
		if !isStr {
			// rabbit_channel's words: it checks the name before the queue's arguments.
			return amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare,
				"invalid type '%s' for arg 'x-dead-letter-exchange' in %s", argTypeName(v), describeQueue(name, vhost))
		}
		qa.dlx, qa.hasDLX = s, true
	}
	if v, ok := args["x-dead-letter-routing-key"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return argError(name, vhost, "x-dead-letter-routing-key", "{unacceptable_type,%s}", argTypeName(v))
		}
		if !qa.hasDLX {
			return argError(name, vhost, "x-dead-letter-routing-key", "routing_key_but_no_dlx_defined")
		}
		qa.dlrk, qa.hasDLRK = s, true
	}
	return nil
}

// parseQueueLimits reads x-max-length, x-max-length-bytes, x-max-priority and x-overflow.
func parseQueueLimits(name, vhost string, args amqp.Table, qa *queueArgs) *amqp.Error {
	if n, ok, err := optNonNegIntArg(name, vhost, "x-max-length", args); err != nil {
		return err
	} else if ok {
		qa.maxLength = n
	}
	if n, ok, err := optNonNegIntArg(name, vhost, "x-max-length-bytes", args); err != nil {
		return err
	} else if ok {
		qa.maxLengthBytes = n
	}
	if n, ok, err := optNonNegIntArg(name, vhost, "x-max-priority", args); err != nil {
		return err
	} else if ok {
		if n > 255 {
			return argError(name, vhost, "x-max-priority", "{max_value_exceeded,%d}", n)
		}
		qa.maxPriority = uint8(n)
	}
	return parseOverflow(name, vhost, args, qa)
}

// parseOverflow reads x-overflow.
func parseOverflow(name, vhost string, args amqp.Table, qa *queueArgs) *amqp.Error {
	if v, ok := args["x-overflow"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return argError(name, vhost, "x-overflow", "{unacceptable_type,%s}", argTypeName(v))
		}
		switch s {
		case "drop-head":
			qa.overflow = overflowDropHead
		case "reject-publish":
			qa.overflow = overflowRejectPublish
		case "reject-publish-dlx":
			qa.overflow = overflowRejectPublishDLX
		default:
			return argError(name, vhost, "x-overflow", "invalid_overflow")
		}
	}
	return nil
}

// parseQueueModes validates x-queue-mode and x-queue-version, which choose
// RabbitMQ's storage layout (Warren has one), and reads
// x-single-active-consumer.
func parseQueueModes(name, vhost string, args amqp.Table, qa *queueArgs) *amqp.Error {
	if v, ok := args["x-queue-mode"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return argError(name, vhost, "x-queue-mode", "{unacceptable_type,%s}", argTypeName(v))
		}
		if s != "default" && s != "lazy" {
			return argError(name, vhost, "x-queue-mode", "%q", "unsupported queue mode '"+s+"'")
		}
	}
	if n, ok, err := optNonNegIntArg(name, vhost, "x-queue-version", args); err != nil {
		return err
	} else if ok && n != 1 && n != 2 {
		return argError(name, vhost, "x-queue-version", "%q", "unsupported queue version '"+strconv.FormatInt(n, 10)+"'")
	}
	if v, ok := args["x-single-active-consumer"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return argError(name, vhost, "x-single-active-consumer", "{unacceptable_type,%s}", argTypeName(v))
		}
		qa.singleActive = b
	}
	return nil
}

// parseQueueExtensions reads x-delivery-limit (a quorum queue argument that
// Warren's classic queues honour too), x-consumer-timeout and Warren's
// x-message-deduplication.
func parseQueueExtensions(name, vhost string, args amqp.Table, qa queueArgs) (queueArgs, *amqp.Error) {
	if n, ok, err := optNonNegIntArg(name, vhost, "x-delivery-limit", args); err != nil {
		return qa, err
	} else if ok {
		qa.deliveryLimit = n
	}
	if n, ok, err := optNonNegIntArg(name, vhost, "x-consumer-timeout", args); err != nil {
		return qa, err
	} else if ok {
		if n == 0 {
			return qa, argError(name, vhost, "x-consumer-timeout", "{value_zero,0}")
		}
		qa.consumerTimeout = time.Duration(n) * time.Millisecond
	}
	if v, ok := args["x-message-deduplication"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return qa, argError(name, vhost, "x-message-deduplication", "{unacceptable_type,%s}", argTypeName(v))
		}
		qa.dedup = b
		size, ttl, err := parseDedupArgs(args, func(arg, reason string, a ...any) *amqp.Error {
			return argError(name, vhost, arg, reason, a...)
		})
		if err != nil {
			return qa, err
		}
		qa.dedupCacheSize, qa.dedupCacheTTL = size, ttl
	}
	return qa, nil
}

// defaultDedupCacheSize bounds a deduplication cache declared without x-cache-size.
const defaultDedupCacheSize = 10000

// parseDedupArgs reads x-cache-size and x-cache-ttl (ms).
func parseDedupArgs(args amqp.Table, fail func(arg, reason string, a ...any) *amqp.Error) (int, time.Duration, *amqp.Error) {
	size := defaultDedupCacheSize
	var ttl time.Duration
	if v, ok := args["x-cache-size"]; ok {
		n, isInt := intArg(v)
		if !isInt || n <= 0 {
			return 0, 0, fail("x-cache-size", "{invalid_value,%v}", v)
		}
		size = int(min(n, 10_000_000))
	}
	if v, ok := args["x-cache-ttl"]; ok {
		n, isInt := intArg(v)
		if !isInt || n <= 0 {
			return 0, 0, fail("x-cache-ttl", "{invalid_value,%v}", v)
		}
		ttl = time.Duration(n) * time.Millisecond
	}
	return size, ttl, nil
}
