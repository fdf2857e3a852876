package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenmq/warren/server"
)

// metricDef is one family of a rabbitmq_prometheus group: its name without
// prefix, type and HELP text, as RabbitMQ 3.10 prints them.
type metricDef struct {
	name string
	typ  prometheus.ValueType
	help string
}

const (
	counterType = prometheus.CounterValue
	gaugeType   = prometheus.GaugeValue
)

// The groups below are rabbitmq_prometheus's metric groups (named after the
// ETS tables they read in RabbitMQ, and selected by those names with
// /metrics/detailed?family=...). Their order is the exposition's order.

// connectionChurnDefs is connection_churn_metrics.
var connectionChurnDefs = []metricDef{
	{"connections_opened_total", counterType, "Total number of connections opened"},
	{"connections_closed_total", counterType, "Total number of connections closed or terminated"},
	{"channels_opened_total", counterType, "Total number of channels opened"},
	{"channels_closed_total", counterType, "Total number of channels closed"},
	{"queues_declared_total", counterType, "Total number of queues declared"},
	{"queues_created_total", counterType, "Total number of queues created"},
	{"queues_deleted_total", counterType, "Total number of queues deleted"},
}

// queueCoarseDefs is queue_coarse_metrics (without the Erlang process's
// reductions).
var queueCoarseDefs = []metricDef{
	{"queue_messages_ready", gaugeType, "Messages ready to be delivered to consumers"},
	{"queue_messages_unacked", gaugeType, "Messages delivered to consumers but not yet acknowledged"},
	{"queue_messages", gaugeType, "Sum of ready and unacknowledged messages - total queue depth"},
}

// queueConsumerCountDefs is queue_consumer_count, a cheap subset of
// queue_metrics.
var queueConsumerCountDefs = []metricDef{
	{"queue_consumers", gaugeType, "Consumers on a queue"},
}

// queueMetricsDefs is the part of queue_metrics Warren's queues measure.
var queueMetricsDefs = []metricDef{
	{"queue_consumers", gaugeType, "Consumers on a queue"},
	{"queue_messages_ready_ram", gaugeType, "Ready messages stored in memory"},
	{"queue_messages_ready_bytes", gaugeType, "Size in bytes of ready messages"},
	{"queue_messages_paged_out", gaugeType, "Messages paged out to disk"},
}

// channelDefs is channel_metrics (without the transaction gauges).
var channelDefs = []metricDef{
	{"channel_consumers", gaugeType, "Consumers on a channel"},
	{"channel_messages_unacked", gaugeType, "Delivered but not yet acknowledged messages"},
	{"channel_messages_unconfirmed", gaugeType, "Published but not yet confirmed messages"},
	{"consumer_prefetch", gaugeType, "Limit of unacknowledged messages for each consumer"},
	{"channel_prefetch", gaugeType, "Total limit of unacknowledged messages for all consumers on a channel"},
}

// channelExchangeDefs is channel_exchange_metrics.
var channelExchangeDefs = []metricDef{
	{"channel_messages_published_total", counterType, "Total number of messages published into an exchange on a channel"},
	{"channel_messages_confirmed_total", counterType, "Total number of messages published into an exchange and confirmed on the channel"},
	{"channel_messages_unroutable_returned_total", counterType,
		"Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable"},
	{"channel_messages_unroutable_dropped_total", counterType,
		"Total number of messages published as non-mandatory into an exchange and dropped as unroutable"},
}

// channelQueueDefs is channel_queue_metrics. RabbitMQ's names pair "_ack"
// with manual acknowledgement: channel_get_total is basic.get with no-ack.
var channelQueueDefs = []metricDef{
	{"channel_get_ack_total", counterType, "Total number of messages fetched with basic.get in manual acknowledgement mode"},
	{"channel_get_total", counterType, "Total number of messages fetched with basic.get in automatic acknowledgement mode"},
	{"channel_messages_delivered_ack_total", counterType, "Total number of messages delivered to consumers in manual acknowledgement mode"},
	{"channel_messages_delivered_total", counterType, "Total number of messages delivered to consumers in automatic acknowledgement mode"},
	{"channel_messages_redelivered_total", counterType, "Total number of messages redelivered to consumers"},
	{"channel_messages_acked_total", counterType, "Total number of messages acknowledged by consumers"},
	{"channel_get_empty_total", counterType, "Total number of times basic.get operations fetched no message"},
}

// connectionCoarseDefs is connection_coarse_metrics (without reductions).
var connectionCoarseDefs = []metricDef{
	{"connection_incoming_bytes_total", counterType, "Total number of bytes received on a connection"},
	{"connection_outgoing_bytes_total", counterType, "Total number of bytes sent on a connection"},
}

// connectionDefs is the part of connection_metrics Warren measures.
var connectionDefs = []metricDef{
	{"connection_incoming_packets_total", counterType, "Total number of packets received on a connection"},
	{"connection_channels", gaugeType, "Channels on a connection"},
}

// descsOf builds one Desc per definition, named prefix+name, with labels.
func descsOf(prefix string, defs []metricDef, labels []string) []*prometheus.Desc {
	out := make([]*prometheus.Desc, len(defs))
	for i, d := range defs {
		out[i] = prometheus.NewDesc(prefix+d.name, d.help, labels, nil)
	}
	return out
}

// emitRow sends one row of a group: values[i] for defs[i].
func emitRow(e emitter, descs []*prometheus.Desc, defs []metricDef, values []float64, labels ...string) {
	for i, d := range defs {
		e.metric(descs[i], d.typ, values[i], labels...)
	}
}

// channelCounterValues are the aggregated channel_exchange_metrics and
// channel_queue_metrics values, in their defs' order.
func channelCounterValues(m *server.MessageCounters) (exchange, queue []float64) {
	exchange = []float64{float64(m.Publish), float64(m.Confirm), float64(m.ReturnUnroutable), float64(m.DropUnroutable)}
	queue = []float64{float64(m.Get), float64(m.GetNoAck), float64(m.Deliver), float64(m.DeliverNoAck),
		float64(m.Redeliver), float64(m.Ack), float64(m.GetEmpty)}
	return exchange, queue
}

// channelGaugeValues are channel_metrics values in channelDefs' order.
func channelGaugeValues(g server.ChannelGauges) []float64 {
	return []float64{float64(g.Consumers), float64(g.Unacked), float64(g.Unconfirmed), float64(g.Prefetch), float64(g.GlobalPrefetch)}
}

// churnValues are connection_churn_metrics values in connectionChurnDefs'
// order.
func churnValues(accepted uint64, c server.ChurnCounters) []float64 {
	return []float64{float64(accepted), float64(c.ConnectionsClosed), float64(c.ChannelsOpened), float64(c.ChannelsClosed),
		float64(c.QueuesDeclared), float64(c.QueuesCreated), float64(c.QueuesDeleted)}
}
