package server

import (
	"fmt"
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
	return parseClassicQueueArgs(name, vhost, args, qa)
}

// parseClassicQueueArgs validates the arguments of a classic (or quorum) queue into qa.
func parseClassicQueueArgs(name, vhost string, args amqp.Table, qa queueArgs) (queueArgs, *amqp.Error) {
	nonNeg := func(key string, min int64) (int64, bool, *amqp.Error) {
		v, ok := args[key]
		if !ok {
			return 0, false, nil
		}
		n, isInt := intArg(v)
		if !isInt {
			return 0, false, argError(name, vhost, key, "{unacceptable_type,%s}", argTypeName(v))
		}
		if n < min {
			if min > 0 {
				return 0, false, argError(name, vhost, key, "{value_zero,%d}", n)
			}
			return 0, false, argError(name, vhost, key, "{value_negative,%d}", n)
		}
		return n, true, nil
	}
	if n, ok, err := nonNeg("x-message-ttl", 0); err != nil {
		return qa, err
	} else if ok {
		qa.messageTTL = n
	}
	if n, ok, err := nonNeg("x-expires", 1); err != nil {
		return qa, err
	} else if ok {
		qa.expires = n
	}
	if n, ok, err := nonNeg("x-max-length", 0); err != nil {
		return qa, err
	} else if ok {
		qa.maxLength = n
	}
	if n, ok, err := nonNeg("x-max-length-bytes", 0); err != nil {
		return qa, err
	} else if ok {
		qa.maxLengthBytes = n
	}
	if n, ok, err := nonNeg("x-delivery-limit", 0); err != nil {
		return qa, err
	} else if ok {
		qa.deliveryLimit = n
	}
	if n, ok, err := nonNeg("x-consumer-timeout", 1); err != nil {
		return qa, err
	} else if ok {
		qa.consumerTimeout = time.Duration(n) * time.Millisecond
	}
	if n, ok, err := nonNeg("x-max-priority", 0); err != nil {
		return qa, err
	} else if ok {
		if n > 255 {
			return qa, argError(name, vhost, "x-max-priority", "{value_too_large,%d,255}", n)
		}
		qa.maxPriority = uint8(n)
	}
	if v, ok := args["x-dead-letter-exchange"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return qa, argError(name, vhost, "x-dead-letter-exchange", "{unacceptable_type,%s}", argTypeName(v))
		}
		qa.dlx, qa.hasDLX = s, true
	}
	if v, ok := args["x-dead-letter-routing-key"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return qa, argError(name, vhost, "x-dead-letter-routing-key", "{unacceptable_type,%s}", argTypeName(v))
		}
		if !qa.hasDLX {
			return qa, argError(name, vhost, "x-dead-letter-routing-key", "Key x-dead-letter-exchange should be defined too")
		}
		qa.dlrk, qa.hasDLRK = s, true
	}
	if v, ok := args["x-overflow"]; ok {
		s, _ := v.(string)
		switch s {
		case "drop-head":
			qa.overflow = overflowDropHead
		case "reject-publish":
			qa.overflow = overflowRejectPublish
		case "reject-publish-dlx":
			qa.overflow = overflowRejectPublishDLX
		default:
			return qa, argError(name, vhost, "x-overflow", "{unacceptable_value,<<\"%v\">>}", v)
		}
	}
	if v, ok := args["x-single-active-consumer"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return qa, argError(name, vhost, "x-single-active-consumer", "{unacceptable_type,%s}", argTypeName(v))
		}
		qa.singleActive = b
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
