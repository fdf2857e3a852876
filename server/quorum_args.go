package server

import (
	"slices"

	"github.com/warrenmq/warren/amqp"
)

// Quorum queue declare rules, as RabbitMQ 3.10.8 applies them
// (rabbit_amqqueue:check_declare_arguments, rabbit_quorum_queue:declare and
// rabbit_queue_type_util's checks): first the values of the arguments the
// quorum type takes, in declare_args order; then the arguments of the other
// types it does not take; then the queue's properties (auto-delete,
// exclusive, non-durable, in that order).

// defaultQuorumGroupSize is x-quorum-initial-group-size when absent
// (RabbitMQ's quorum_cluster_size default).
const defaultQuorumGroupSize = 3

// quorumArgs are a quorum queue's own arguments.
type quorumArgs struct {
	// groupSize is x-quorum-initial-group-size: how many replicas the
	// declaring node places (capped at the cluster's alive members).
	groupSize int
	// leaderLocator is x-queue-leader-locator as declared ("" when absent).
	leaderLocator string
	// atLeastOnceAsked: x-dead-letter-strategy at-least-once, effective
	// with a dead-letter exchange and reject-publish (quorumDLStrategy).
	atLeastOnceAsked bool
}

// quorumRefusedArgs are rabbit_queue_type:arguments(queue_arguments) less
// the quorum type's (RabbitMQ 3.10.8's capabilities of the classic and
// stream types): "invalid arg '~s' for ~s of queue type rabbit_quorum_queue".
var quorumRefusedArgs = []string{
	"x-max-priority", "x-queue-mode", "x-queue-version", "x-queue-master-locator",
	"x-max-age", "x-stream-max-segment-size-bytes", "x-initial-cluster-size",
}

// parseQuorumArgs validates the arguments of a quorum queue declaration.
func parseQuorumArgs(name, vhost string, args amqp.Table, qa queueArgs) (queueArgs, *amqp.Error) {
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
	if err := parseDeadLettering(name, vhost, args, &qa); err != nil {
		return qa, err
	}
	atLeastOnce, err := checkDeadLetterStrategy(name, vhost, args)
	if err != nil {
		return qa, err
	}
	for _, k := range []string{"x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes"} {
		n, ok, err := optNonNegIntArg(name, vhost, k, args)
		switch {
		case err != nil:
			return qa, err
		case ok && k == "x-max-length":
			qa.maxLength = n
		case ok && k == "x-max-length-bytes":
			qa.maxLengthBytes = n
		}
		// x-max-in-memory-length and -bytes are validated and, as in
		// RabbitMQ 3.10 (rabbit_fifo v2 keeps no bodies in memory), have
		// no effect: Warren's leader keeps its messages in memory (doc.go).
	}
	if err := parseOverflow(name, vhost, args, &qa); err != nil {
		return qa, err
	}
	if qa.overflow == overflowRejectPublishDLX {
		// rabbit_quorum_queue:overflow/3 logs "Invalid overflow strategy"
		// and uses its default, drop-head.
		qa.overflow = overflowDropHead
	}
	if v, ok := args["x-single-active-consumer"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return qa, argError(name, vhost, "x-single-active-consumer", "{unacceptable_type,%s}", argTypeName(v))
		}
		qa.singleActive = b
	}
	qq := quorumArgs{groupSize: defaultQuorumGroupSize, atLeastOnceAsked: atLeastOnce}
	if v, ok := args["x-quorum-initial-group-size"]; ok {
		n, err := nonNegIntArg(name, vhost, "x-quorum-initial-group-size", v)
		if err != nil {
			return qa, err
		}
		if n == 0 {
			return qa, argError(name, vhost, "x-quorum-initial-group-size", "{value_zero,0}")
		}
		qq.groupSize = int(min(n, 1<<16))
	}
	if v, ok := args["x-queue-leader-locator"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return qa, argError(name, vhost, "x-queue-leader-locator", "{unacceptable_type,%s}", argTypeName(v))
		}
		if !slices.Contains(queueLeaderLocators, s) {
			return qa, argError(name, vhost, "x-queue-leader-locator", "invalid_queue_locator_arg")
		}
		qq.leaderLocator = s
	}
	for _, k := range quorumRefusedArgs {
		if _, ok := args[k]; ok {
			return qa, amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare,
				"invalid arg '%s' for %s of queue type rabbit_quorum_queue", k, describeQueue(name, vhost))
		}
	}
	qa.quorum = &qq
	return parseQueueExtensions(name, vhost, args, qa)
}

// checkDeadLetterStrategy is rabbit_amqqueue:check_dlxstrategy_arg; it
// reports whether at-least-once was asked for (quorum_dlx.go serves it).
func checkDeadLetterStrategy(name, vhost string, args amqp.Table) (bool, *amqp.Error) {
	v, ok := args["x-dead-letter-strategy"]
	if !ok {
		return false, nil
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		return false, argError(name, vhost, "x-dead-letter-strategy", "{unacceptable_type,%s}", argTypeName(v))
	case s != "at-most-once" && s != "at-least-once":
		return false, argError(name, vhost, "x-dead-letter-strategy", "invalid_dlx_strategy")
	}
	return s == "at-least-once", nil
}

// checkQuorumDeclare refuses the properties a quorum queue cannot have, in
// rabbit_quorum_queue:declare's order.
func checkQuorumDeclare(vh *Vhost, name string, m *amqp.QueueDeclare) *amqp.Error {
	prop := ""
	switch {
	case m.AutoDelete:
		prop = "auto-delete"
	case m.Exclusive:
		prop = "exclusive-owner"
	case !m.Durable:
		prop = "non-durable"
	}
	if prop != "" {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueDeclare, "invalid property '%s' for %s", prop, describeQueue(name, vh.name))
	}
	return nil
}

// quorumConsumeRefusedArgs are the consume arguments of the other queue
// types (rabbit_queue_type:arguments(consumer_arguments) less the quorum
// type's x-priority and x-credit).
var quorumConsumeRefusedArgs = []string{"x-cancel-on-ha-failover", "x-stream-offset"}

// checkQuorumConsume refuses what RabbitMQ 3.10.8 refuses of a
// basic.consume on a quorum queue: another type's consume argument (406),
// and a channel with a global prefetch limit (540, "does not support
// global qos", rabbit_channel's words for global_qos_not_supported).
func checkQuorumConsume(q *Queue, args amqp.Table, globalQos bool) *amqp.Error {
	for _, k := range quorumConsumeRefusedArgs {
		if _, ok := args[k]; ok {
			return amqp.NewError(amqp.PreconditionFailed, methodBasicConsume,
				"invalid arg '%s' for %s of queue type rabbit_quorum_queue", k, describeQueue(q.name, q.vhost.name))
		}
	}
	if globalQos {
		return amqp.NewError(amqp.NotImplemented, methodBasicConsume, "%s does not support global qos", describeQueue(q.name, q.vhost.name))
	}
	return nil
}

// quorumDeletable is rabbit_quorum_queue:delete/4's refusal of
// queue.delete with if-unused or if-empty (540).
func quorumDeletable(q *Queue, ifUnused, ifEmpty bool) *amqp.Error {
	flag := ""
	switch {
	case ifUnused:
		flag = "if-unused"
	case ifEmpty:
		flag = "if-empty"
	default:
		return nil
	}
	return amqp.NewError(amqp.NotImplemented, methodQueueDelete,
		"cannot delete %s. queue.delete operations with %s flag set are not supported by quorum queues", describeQueue(q.name, q.vhost.name), flag)
}

// queueDeletable is the if-unused / if-empty check of queue.delete: the
// quorum type's refusal of both flags, else the handle's counts.
func queueDeletable(q *Queue, ifUnused, ifEmpty bool) *amqp.Error {
	if q.quorum {
		return quorumDeletable(q, ifUnused, ifEmpty)
	}
	return q.h.deletable(ifUnused, ifEmpty)
}
