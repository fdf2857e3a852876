package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/server/route"
)

// Stream defaults and bounds.
const (
	// defaultStreamSegmentSize is RabbitMQ's default x-stream-max-segment-size-bytes.
	defaultStreamSegmentSize = 500_000_000
	// maxDeclaredSegmentSize is the largest segment size RabbitMQ 3.10 accepts
	// (rabbit_stream_queue:check_max_segment_size_bytes, and the
	// stream-max-segment-size-bytes policy validator).
	maxDeclaredSegmentSize = 3_000_000_000
	// maxStreamSegmentSize is what a msgstore segment can address.
	maxStreamSegmentSize = msgstore.MaxSegmentSize
	// minStreamSegmentSize is the smallest segment msgstore accepts.
	minStreamSegmentSize = 1024
)

// streamArgs are the stream-specific x-arguments of a stream queue.
type streamArgs struct {
	maxBytes    int64         // x-max-length-bytes; 0 = unlimited
	maxAge      time.Duration // x-max-age; 0 = unlimited
	segmentSize int64         // x-stream-max-segment-size-bytes, as declared
	// hasFlush is set when x-stream-flush overrides the server's flush policy;
	// flushInterval and flushMessages are 0 where the server's apply.
	hasFlush      bool
	flush         msgstore.FlushPolicy
	flushInterval time.Duration // x-stream-flush-ms
	flushMessages int           // x-stream-flush-messages
}

// storeSegmentSize is the segment size given to msgstore for a declared one.
// RabbitMQ's osiris takes any size from 0 to 3e9 and starts a new segment
// after the chunk that passes it; msgstore's segments hold at least 1024 and
// at most 2 GiB (positions are 32 bits), so the declared size is clamped
// into that: a smaller size only means more files, a larger one is not
// addressable.
func storeSegmentSize(n int64) int64 {
	return min(max(n, minStreamSegmentSize), maxStreamSegmentSize)
}

// streamUnsupportedArgs are the arguments a stream refuses: those of
// RabbitMQ 3.10's other queue types that its stream type does not take
// (rabbit_queue_type:arguments(queue_arguments) less the stream's), and
// Warren's x-message-deduplication, which a stream cannot honour.
var streamUnsupportedArgs = []string{
	"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
	"x-max-length", "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-version",
	"x-single-active-consumer", "x-queue-master-locator", "x-dead-letter-strategy",
	"x-max-in-memory-length", "x-max-in-memory-bytes", "x-quorum-initial-group-size",
	"x-delivery-limit", "x-message-deduplication",
}

// queueLeaderLocators are RabbitMQ 3.10's x-queue-leader-locator values
// (rabbit_queue_location:queue_leader_locators). A single node has one
// choice, so the value is only validated.
var queueLeaderLocators = []string{"client-local", "balanced", "random", "least-leaders"}

// parseStreamArgs validates the arguments of a stream queue declaration in
// RabbitMQ's order (rabbit_amqqueue:check_declare_arguments): the values of
// the arguments a stream takes, then the arguments it refuses; Warren's own
// flush arguments last.
func parseStreamArgs(name, vhost string, args amqp.Table) (streamArgs, *amqp.Error) {
	sa := streamArgs{segmentSize: defaultStreamSegmentSize}
	if err := parseStreamRetention(name, vhost, args, &sa); err != nil {
		return sa, err
	}
	if err := checkStreamPlacement(name, vhost, args); err != nil {
		return sa, err
	}
	for _, k := range streamUnsupportedArgs {
		if _, ok := args[k]; ok {
			// RabbitMQ 3.10's words, checked against a running node.
			return sa, amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare,
				"invalid arg '%s' for %s of queue type rabbit_stream_queue", k, describeQueue(name, vhost))
		}
	}
	if err := parseStreamFlush(name, vhost, args, &sa); err != nil {
		return sa, err
	}
	return sa, nil
}

// storedQueueArgs returns the arguments of a queue stored in meta.db to
// parse at start. Earlier Warren releases accepted on a stream arguments
// that RabbitMQ refuses and that did nothing there (streamUnsupportedArgs
// and any x-initial-cluster-size or x-queue-leader-locator); such a stream
// must still start, so those are left out of the parse. The queue keeps its
// arguments as declared, so redeclares compare against them.
func storedQueueArgs(args amqp.Table) amqp.Table {
	if args["x-queue-type"] != "stream" {
		return args
	}
	parsed := maps.Clone(args)
	for _, k := range streamUnsupportedArgs {
		delete(parsed, k)
	}
	delete(parsed, "x-initial-cluster-size")
	delete(parsed, "x-queue-leader-locator")
	return parsed
}

// nonNegIntArg is rabbit_amqqueue:check_non_neg_int_arg: an integer of any
// width (not a timestamp), not negative, refused with RabbitMQ's texts.
func nonNegIntArg(name, vhost, key string, v any) (int64, *amqp.Error) {
	n, ok := intArg(v)
	if !ok {
		return 0, argError(name, vhost, key, "%q", "expected integer, got "+argTypeName(v))
	}
	if n < 0 {
		return 0, argError(name, vhost, key, "{value_negative,%d}", n)
	}
	return n, nil
}

// checkStreamPlacement validates x-initial-cluster-size and
// x-queue-leader-locator, which place replicas in a cluster and mean
// nothing on one node, as RabbitMQ validates them.
func checkStreamPlacement(name, vhost string, args amqp.Table) *amqp.Error {
	if v, ok := args["x-initial-cluster-size"]; ok {
		n, err := nonNegIntArg(name, vhost, "x-initial-cluster-size", v)
		if err != nil {
			return err
		}
		if n == 0 {
			return argError(name, vhost, "x-initial-cluster-size", "{value_zero,0}")
		}
	}
	if v, ok := args["x-queue-leader-locator"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return argError(name, vhost, "x-queue-leader-locator", "{unacceptable_type,%s}", argTypeName(v))
		}
		if !slices.Contains(queueLeaderLocators, s) {
			return argError(name, vhost, "x-queue-leader-locator", "invalid_queue_locator_arg")
		}
	}
	return nil
}

// parseStreamRetention reads x-max-length-bytes, x-max-age and
// x-stream-max-segment-size-bytes into sa, leaving absent ones as they are.
// A segment size above maxDeclaredSegmentSize is refused later, by
// checkStreamDeclare, after the queue's properties, as RabbitMQ does.
func parseStreamRetention(name, vhost string, args amqp.Table, sa *streamArgs) *amqp.Error {
	if v, ok := args["x-max-length-bytes"]; ok {
		n, err := nonNegIntArg(name, vhost, "x-max-length-bytes", v)
		if err != nil {
			return err
		}
		sa.maxBytes = n
	}
	if v, ok := args["x-max-age"]; ok {
		if _, isStr := v.(string); !isStr {
			return argError(name, vhost, "x-max-age", "{unacceptable_type,%s}", argTypeName(v))
		}
		d, ok := streamMaxAge(v)
		if !ok {
			return argError(name, vhost, "x-max-age", "invalid_max_age")
		}
		sa.maxAge = d
	}
	if v, ok := args["x-stream-max-segment-size-bytes"]; ok {
		n, err := nonNegIntArg(name, vhost, "x-stream-max-segment-size-bytes", v)
		if err != nil {
			return err
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

// streamSegmentSize parses a segment size within what RabbitMQ accepts.
func streamSegmentSize(v any) (int64, bool) {
	n, isInt := intArg(v)
	return n, isInt && n >= 0 && n <= maxDeclaredSegmentSize
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

// maxStreamInterval is the longest interval parseStreamInterval returns.
const maxStreamInterval = time.Duration(1 << 62)

// parseStreamInterval parses RabbitMQ's interval form: a positive integer and
// one unit of Y (365 days), M (30 days), D, h, m or s, such as "7D" or "30m".
func parseStreamInterval(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("interval %q: want a number and a unit", s)
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	saturate := errors.Is(err, strconv.ErrRange) // all digits, just many
	if err != nil && !saturate {
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
	// RabbitMQ takes any length (Erlang integers have no bound); one past
	// maxStreamInterval (146 years) is as good as forever, and capping keeps
	// the arithmetic from overflowing.
	if saturate || n > uint64(maxStreamInterval/unit) {
		return maxStreamInterval, nil
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

// parseStreamOffset reads x-stream-offset: "first", "last", "next" (as a
// longstr or, as RabbitMQ also takes them, a binary), an integer offset, an
// AMQP timestamp, or an interval ("30m") that means "from now minus the
// interval". A negative offset starts at the first record, as in RabbitMQ,
// whose osiris starts any offset below the log's first at the first. now is
// passed for testability.
func parseStreamOffset(v any, now time.Time) (streamStart, error) {
	if b, ok := v.([]byte); ok {
		if s := string(b); s == "first" || s == "last" || s == "next" {
			v = s
		}
	}
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
	return streamStart{kind: streamStartOffset, offset: uint64(max(n, 0))}, nil
}

// streamOffsetError is RabbitMQ's 406 for an x-stream-offset it cannot
// parse. (For some such values RabbitMQ 3.10 fails with 541 INTERNAL_ERROR
// instead; Warren answers them all with the 406.)
func streamOffsetError(method uint32, q, vhost string, v any) *amqp.Error {
	return amqp.NewError(amqp.PreconditionFailed, method,
		"invalid arg 'x-stream-offset' for %s: {invalid_stream_offset_arg,{%s,%s}}",
		describeQueue(q, vhost), argTypeName(v), route.ErlangTerm(v))
}
