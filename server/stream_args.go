package server

import (
	"fmt"
	"strconv"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
)

// Stream defaults and bounds.
const (
	// defaultStreamSegmentSize is RabbitMQ's default x-stream-max-segment-size-bytes.
	defaultStreamSegmentSize = 500_000_000
	// maxStreamSegmentSize is what a msgstore segment can address.
	maxStreamSegmentSize = 2 << 30
	// minStreamSegmentSize is the smallest segment msgstore accepts.
	minStreamSegmentSize = 1024
)

// streamArgs are the stream-specific x-arguments of a stream queue.
type streamArgs struct {
	maxBytes    int64         // x-max-length-bytes; 0 = unlimited
	maxAge      time.Duration // x-max-age; 0 = unlimited
	segmentSize int64         // x-stream-max-segment-size-bytes
	// hasFlush is set when x-stream-flush overrides the server's flush policy;
	// flushInterval and flushMessages are 0 where the server's apply.
	hasFlush      bool
	flush         msgstore.FlushPolicy
	flushInterval time.Duration // x-stream-flush-ms
	flushMessages int           // x-stream-flush-messages
}

// streamUnsupportedArgs are classic-queue arguments a stream refuses, as
// RabbitMQ does for arguments its stream queue type does not support.
var streamUnsupportedArgs = []string{
	"x-message-ttl", "x-expires", "x-max-length", "x-max-priority", "x-dead-letter-exchange",
	"x-dead-letter-routing-key", "x-overflow", "x-delivery-limit", "x-message-deduplication",
	"x-single-active-consumer",
}

// parseStreamArgs validates the arguments of a stream queue declaration.
func parseStreamArgs(name, vhost string, args amqp.Table) (streamArgs, *amqp.Error) {
	sa := streamArgs{segmentSize: defaultStreamSegmentSize}
	for _, k := range streamUnsupportedArgs {
		if _, ok := args[k]; ok {
			// RabbitMQ 3.10's words, checked against a running node.
			return sa, amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare,
				"invalid arg '%s' for %s of queue type rabbit_stream_queue", k, describeQueue(name, vhost))
		}
	}
	if err := parseStreamRetention(name, vhost, args, &sa); err != nil {
		return sa, err
	}
	if err := parseStreamFlush(name, vhost, args, &sa); err != nil {
		return sa, err
	}
	return sa, nil
}

// parseStreamRetention reads x-max-length-bytes, x-max-age and
// x-stream-max-segment-size-bytes into sa, leaving absent ones as they are.
func parseStreamRetention(name, vhost string, args amqp.Table, sa *streamArgs) *amqp.Error {
	if v, ok := args["x-max-length-bytes"]; ok {
		n, isInt := intArg(v)
		if !isInt || n < 0 {
			return argError(name, vhost, "x-max-length-bytes", "{invalid_value,%v}", v)
		}
		sa.maxBytes = n
	}
	if v, ok := args["x-max-age"]; ok {
		d, ok := streamMaxAge(v)
		if !ok {
			return argError(name, vhost, "x-max-age", "{invalid_value,%v}", v)
		}
		sa.maxAge = d
	}
	if v, ok := args["x-stream-max-segment-size-bytes"]; ok {
		n, ok := streamSegmentSize(v)
		if !ok {
			return argError(name, vhost, "x-stream-max-segment-size-bytes", "{invalid_value,%v}", v)
		}
		sa.segmentSize = n
	}
	return nil
}

// streamMaxAge parses a max-age value: a positive interval string ("7D").
func streamMaxAge(v any) (time.Duration, bool) {
	s, isStr := v.(string)
	if !isStr {
		return 0, false
	}
	d, err := parseStreamInterval(s)
	return d, err == nil && d > 0
}

// streamSegmentSize parses a segment size within what msgstore accepts.
func streamSegmentSize(v any) (int64, bool) {
	n, isInt := intArg(v)
	return n, isInt && n >= minStreamSegmentSize && n <= maxStreamSegmentSize
}

// streamPolicyKeys are the policy definition keys that configure streams,
// with the x-argument each stands for.
var streamPolicyKeys = map[string]string{
	"max-length-bytes":              "x-max-length-bytes",
	"max-age":                       "x-max-age",
	"stream-max-segment-size-bytes": "x-stream-max-segment-size-bytes",
}

// effectiveStreamArgs returns a stream's arguments with a policy definition
// applied: max-length-bytes, max-age and stream-max-segment-size-bytes from
// the policy replace the declared x-arguments. RabbitMQ's stream queue type
// resolves these with policy_precedence (rabbit_stream_queue:update_stream_conf),
// unlike classic queues, where the smaller value wins. Other keys do not
// apply to streams. A policy value that does not parse (policies are
// validated, so it should) is ignored and logged by the caller.
func effectiveStreamArgs(name, vhost string, declared streamArgs, def map[string]any) (streamArgs, error) {
	if len(def) == 0 {
		return declared, nil
	}
	overrides := make(amqp.Table, len(streamPolicyKeys))
	for k, arg := range streamPolicyKeys {
		if v, ok := def[k]; ok {
			overrides[arg] = v
		}
	}
	if len(overrides) == 0 {
		return declared, nil
	}
	sa := declared
	if err := parseStreamRetention(name, vhost, overrides, &sa); err != nil {
		return declared, err
	}
	return sa, nil
}

// parseStreamFlush reads x-stream-flush (fsync, interval, messages or os),
// x-stream-flush-ms and x-stream-flush-messages: a per-stream flush policy
// that defaults to the server's.
func parseStreamFlush(name, vhost string, args amqp.Table, sa *streamArgs) *amqp.Error {
	if v, ok := args["x-stream-flush"]; ok {
		s, _ := v.(string)
		p, err := msgstore.ParseFlushPolicy(s)
		if err != nil {
			return argError(name, vhost, "x-stream-flush", "{unacceptable_value,<<\"%v\">>}", v)
		}
		sa.hasFlush, sa.flush = true, p
	}
	if v, ok := args["x-stream-flush-ms"]; ok {
		n, isInt := intArg(v)
		if !isInt || n <= 0 {
			return argError(name, vhost, "x-stream-flush-ms", "{invalid_value,%v}", v)
		}
		sa.flushInterval = time.Duration(n) * time.Millisecond
	}
	if v, ok := args["x-stream-flush-messages"]; ok {
		n, isInt := intArg(v)
		if !isInt || n <= 0 || n > 1<<30 {
			return argError(name, vhost, "x-stream-flush-messages", "{invalid_value,%v}", v)
		}
		sa.flushMessages = int(n)
	}
	return nil
}

// parseStreamInterval parses RabbitMQ's interval form: a positive integer and
// one unit of Y (365 days), M (30 days), D, h, m or s, such as "7D" or "30m".
func parseStreamInterval(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("interval %q: want a number and a unit", s)
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("interval %q: %w", s, err)
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'Y':
		unit = 365 * 24 * time.Hour
	case 'M':
		unit = 30 * 24 * time.Hour
	case 'D':
		unit = 24 * time.Hour
	case 'h':
		unit = time.Hour
	case 'm':
		unit = time.Minute
	case 's':
		unit = time.Second
	default:
		return 0, fmt.Errorf("interval %q: unknown unit %q", s, s[len(s)-1])
	}
	// n < 2^32 and the largest unit is about 2^55 ns: cap to avoid overflow.
	if n > uint64(1<<62)/uint64(unit) {
		return 0, fmt.Errorf("interval %q: too long", s)
	}
	return time.Duration(n) * unit, nil
}

// Kinds of stream start positions.
const (
	streamStartNext = iota // only records appended from now on (the default)
	streamStartFirst
	streamStartLast
	streamStartOffset
	streamStartTime // first record at or after at
)

// streamStart is a parsed x-stream-offset.
type streamStart struct {
	kind   int
	offset uint64
	at     time.Time
}

// parseStreamOffset reads x-stream-offset: "first", "last", "next", a
// non-negative integer offset, an AMQP timestamp, or an interval ("30m") that
// means "from now minus the interval". now is passed for testability.
func parseStreamOffset(v any, now time.Time) (streamStart, error) {
	switch x := v.(type) {
	case nil:
		return streamStart{kind: streamStartNext}, nil
	case string:
		switch x {
		case "first":
			return streamStart{kind: streamStartFirst}, nil
		case "last":
			return streamStart{kind: streamStartLast}, nil
		case "next":
			return streamStart{kind: streamStartNext}, nil
		}
		d, err := parseStreamInterval(x)
		if err != nil {
			return streamStart{}, err
		}
		return streamStart{kind: streamStartTime, at: now.Add(-d)}, nil
	case time.Time:
		return streamStart{kind: streamStartTime, at: x}, nil
	}
	n, ok := intArg(v)
	if !ok {
		return streamStart{}, fmt.Errorf("unacceptable type %s", argTypeName(v))
	}
	if n < 0 {
		return streamStart{}, fmt.Errorf("negative offset %d", n)
	}
	return streamStart{kind: streamStartOffset, offset: uint64(n)}, nil
}
