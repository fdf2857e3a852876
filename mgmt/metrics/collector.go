package metrics

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenmq/warren/server"
)

// Label values RabbitMQ uses for the global counters of AMQP 0-9-1 and classic
// queues (Warren's only protocol and queue type so far).
const (
	protocolAMQP091    = "amqp091"
	queueTypeClassic   = "rabbit_classic_queue"
	strategyDisabled   = "disabled"
	strategyAtMostOnce = "at_most_once"
)

// endpoint is the shape of one exposition.
type endpoint int

const (
	aggregated endpoint = iota // one series per family
	perObject                  // one series per queue and connection
	detailed                   // the families a /metrics/detailed query selects
)

// String returns the rabbitmq_endpoint label value.
func (e endpoint) String() string {
	switch e {
	case perObject:
		return "per-object"
	case detailed:
		return "detailed"
	}
	return "aggregated"
}

// descs are the metric families one collector emits. Object families carry
// {vhost, queue} or {channel} labels on the per-object endpoint and none on
// the aggregated one.
type descs struct {
	identity, build *prometheus.Desc

	connections, channels, consumers, queues *prometheus.Desc

	// Groups summed over all channels (and, for the counters, the channels
	// closed before), and the churn counters; see families.go.
	churn, channel, channelExchange, channelQueue []*prometheus.Desc

	residentMemory, memoryLimit, memoryAlarm *prometheus.Desc
	diskLimit, diskAlarm                     *prometheus.Desc
	diskAvailable, openFDs, maxFDs           *prometheus.Desc
	openSockets, maxSockets                  *prometheus.Desc

	queueInfo                                     *prometheus.Desc // per-object only
	exchangeDelayed                               *prometheus.Desc
	queueReady, queueUnacked, queueMessages       *prometheus.Desc
	queueReadyBytes, queueConsumers, queuePub     *prometheus.Desc
	queueReadyRAM, queuePagedOut                  *prometheus.Desc
	connIncomingBytes, connOutgoingBytes          *prometheus.Desc
	globalReceived, globalRouted, globalConfirmed *prometheus.Desc
	globalReceivedConfirm                         *prometheus.Desc
	globalDropped, globalReturned                 *prometheus.Desc
	globalConsumers                               *prometheus.Desc
	globalDelivered, globalRedelivered, globAck   *prometheus.Desc
	globalConsumeManual, globalConsumeAuto        *prometheus.Desc
	globalGetManual, globalGetAuto, globalGetEmpt *prometheus.Desc
	deadLetteredExpired, deadLetteredMaxlen       *prometheus.Desc
}

func newDescs(e endpoint) *descs {
	var queueLabels, connLabels, exchangeLabels []string
	if e == perObject {
		queueLabels = []string{"vhost", "queue"}
		exchangeLabels = []string{"vhost", "exchange"}
		connLabels = []string{"channel"}
	}
	protocol := []string{"protocol"}
	protocolQueueType := []string{"protocol", "queue_type"}
	deadLetter := []string{"queue_type", "dead_letter_strategy"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("rabbitmq_"+name, help, labels, nil)
	}
	ds := &descs{
		identity: d("identity_info", "RabbitMQ node & cluster identity info",
			[]string{"rabbitmq_node", "rabbitmq_cluster", "rabbitmq_cluster_permanent_id", "rabbitmq_endpoint"}),
		build: d("build_info", "RabbitMQ & Erlang/OTP version info",
			[]string{"rabbitmq_version", "prometheus_plugin_version", "prometheus_client_version", "erlang_version", "product_name", "product_version"}),

		connections: d("connections", "Connections currently open", nil),
		channels:    d("channels", "Channels currently open", nil),
		consumers:   d("consumers", "Consumers currently connected", nil),
		queues:      d("queues", "Queues available", nil),

		churn:           descsOf("rabbitmq_", connectionChurnDefs, nil),
		channel:         descsOf("rabbitmq_", channelDefs, nil),
		channelExchange: descsOf("rabbitmq_", channelExchangeDefs, nil),
		channelQueue:    descsOf("rabbitmq_", channelQueueDefs, nil),

		residentMemory: d("process_resident_memory_bytes", "Memory used in bytes", nil),
		memoryLimit:    d("resident_memory_limit_bytes", "Memory high watermark in bytes", nil),
		memoryAlarm:    d("alarms_memory_used_watermark", "is 1 if VM memory watermark alarm is in effect", nil),
		diskLimit:      d("disk_space_available_limit_bytes", "Free disk space low watermark in bytes", nil),
		diskAlarm:      d("alarms_free_disk_space_watermark", "is 1 if free disk space watermark alarm is in effect", nil),
		diskAvailable:  d("disk_space_available_bytes", "Disk space available in bytes", nil),
		openFDs:        d("process_open_fds", "Open file descriptors", nil),
		maxFDs:         d("process_max_fds", "Open file descriptors limit", nil),
		openSockets:    d("process_open_tcp_sockets", "Open TCP sockets", nil),
		maxSockets:     d("process_max_tcp_sockets", "Open TCP sockets limit", nil),

		queueReady:      d("queue_messages_ready", "Messages ready to be delivered to consumers", queueLabels),
		queueUnacked:    d("queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged", queueLabels),
		queueMessages:   d("queue_messages", "Sum of ready and unacknowledged messages - total queue depth", queueLabels),
		queueReadyBytes: d("queue_messages_ready_bytes", "Size in bytes of ready messages", queueLabels),
		queueConsumers:  d("queue_consumers", "Consumers on a queue", queueLabels),
		queuePub:        d("queue_messages_published_total", "Total number of messages published to queues", queueLabels),
		queueReadyRAM:   d("queue_messages_ready_ram", "Ready messages stored in memory", queueLabels),
		queuePagedOut:   d("queue_messages_paged_out", "Messages paged out to disk", queueLabels),

		// Not in rabbitmq_prometheus: the delayed-message plugin's
		// messages_delayed, for the exchanges that delay messages.
		exchangeDelayed: d("exchange_messages_delayed", "Messages held by an x-delayed-message exchange until their x-delay passes", exchangeLabels),

		connIncomingBytes: d("connection_incoming_bytes_total", "Total number of bytes received on a connection", connLabels),
		connOutgoingBytes: d("connection_outgoing_bytes_total", "Total number of bytes sent on a connection", connLabels),

		globalReceived:  d("global_messages_received_total", "Total number of messages received from publishers", protocol),
		globalRouted:    d("global_messages_routed_total", "Total number of messages routed to queues or streams", protocol),
		globalConfirmed: d("global_messages_confirmed_total", "Total number of messages confirmed to publishers", protocol),
		globalReceivedConfirm: d("global_messages_received_confirm_total",
			"Total number of messages received from publishers expecting confirmations", protocol),
		globalDropped: d("global_messages_unroutable_dropped_total",
			"Total number of messages published as non-mandatory into an exchange and dropped as unroutable", protocol),
		globalReturned: d("global_messages_unroutable_returned_total",
			"Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable", protocol),
		globalConsumers:   d("global_consumers", "Current number of consumers", protocol),
		globalDelivered:   d("global_messages_delivered_total", "Total number of messages delivered to consumers", protocolQueueType),
		globalRedelivered: d("global_messages_redelivered_total", "Total number of messages redelivered to consumers", protocolQueueType),
		globAck:           d("global_messages_acknowledged_total", "Total number of messages acknowledged by consumers", protocolQueueType),
		globalConsumeManual: d("global_messages_delivered_consume_manual_ack_total",
			"Total number of messages delivered to consumers using basic.consume with manual acknowledgment", protocolQueueType),
		globalConsumeAuto: d("global_messages_delivered_consume_auto_ack_total",
			"Total number of messages delivered to consumers using basic.consume with automatic acknowledgment", protocolQueueType),
		globalGetManual: d("global_messages_delivered_get_manual_ack_total",
			"Total number of messages delivered to consumers using basic.get with manual acknowledgment", protocolQueueType),
		globalGetAuto: d("global_messages_delivered_get_auto_ack_total",
			"Total number of messages delivered to consumers using basic.get with automatic acknowledgment", protocolQueueType),
		globalGetEmpt: d("global_messages_get_empty_total",
			"Total number of times basic.get operations fetched no message", protocolQueueType),

		deadLetteredExpired: d("global_messages_dead_lettered_expired_total", "Total number of messages dead-lettered due to message TTL exceeded", deadLetter),
		deadLetteredMaxlen:  d("global_messages_dead_lettered_maxlen_total", "Total number of messages dead-lettered due to overflow drop-head or reject-publish-dlx", deadLetter),
	}
	if e == perObject {
		ds.queueInfo = d("queue_info", "A metric with a constant '1' value and labels that provide some queue details",
			[]string{"vhost", "queue", "queue_type", "membership"})
	}
	return ds
}

// all lists every family, for Describe.
func (ds *descs) all() []*prometheus.Desc {
	out := []*prometheus.Desc{
		ds.identity, ds.build, ds.connections, ds.channels, ds.consumers, ds.queues,
		ds.residentMemory, ds.memoryLimit, ds.memoryAlarm, ds.diskLimit, ds.diskAlarm, ds.diskAvailable, ds.openFDs, ds.maxFDs,
		ds.openSockets, ds.maxSockets,
		ds.queueReady, ds.queueUnacked, ds.queueMessages, ds.queueReadyBytes, ds.queueConsumers, ds.queuePub,
		ds.queueReadyRAM, ds.queuePagedOut,
		ds.connIncomingBytes, ds.connOutgoingBytes,
		ds.globalReceived, ds.globalRouted, ds.globalConfirmed, ds.globalReceivedConfirm, ds.globalDropped, ds.globalReturned,
		ds.globalConsumers, ds.globalDelivered, ds.globalRedelivered, ds.globAck,
		ds.globalConsumeManual, ds.globalConsumeAuto, ds.globalGetManual, ds.globalGetAuto, ds.globalGetEmpt,
		ds.deadLetteredExpired, ds.deadLetteredMaxlen, ds.exchangeDelayed,
	}
	for _, group := range [][]*prometheus.Desc{ds.churn, ds.channel, ds.channelExchange, ds.channelQueue} {
		out = append(out, group...)
	}
	if ds.queueInfo != nil {
		out = append(out, ds.queueInfo)
	}
	return out
}

// collector is a prometheus.Collector that reads the server at scrape time.
type collector struct {
	srv      *server.Server
	opts     Options
	endpoint endpoint
	descs    *descs
	quorum   *quorumDescs
	tally    *tally // shared by the endpoints of one Handler
}

func newCollector(s *server.Server, opts Options, e endpoint, t *tally) *collector {
	return &collector{srv: s, opts: opts, endpoint: e, descs: newDescs(e), quorum: newQuorumDescs(e), tally: t}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs.all() {
		ch <- d
	}
	for _, d := range c.quorum.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it copies the server's counters,
// folds them into the node-wide totals, then builds the metrics with no
// server lock held.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap, tot := c.tally.scrape(c.srv)
	ds, e := c.descs, emitter{ch}
	emitInfo(e, c.srv, c.opts, ds, &snap, c.endpoint)

	consumers := 0
	for i := range snap.Queues {
		consumers += snap.Queues[i].Consumers
	}
	e.gauge(ds.connections, float64(len(snap.Connections)))
	e.gauge(ds.channels, float64(snap.Channels))
	e.gauge(ds.consumers, float64(consumers))
	e.gauge(ds.queues, float64(len(snap.Queues)))
	emitRow(e, ds.churn, connectionChurnDefs, churnValues(snap.ConnectionsAccepted, snap.Churn))
	emitRow(e, ds.channel, channelDefs, channelGaugeValues(snap.ChannelGauges))
	exchangeValues, queueValues := channelCounterValues(&tot.msgs)
	emitRow(e, ds.channelExchange, channelExchangeDefs, exchangeValues)
	emitRow(e, ds.channelQueue, channelQueueDefs, queueValues)

	c.collectNode(e, &snap)
	c.collectQuorum(e)
	if c.endpoint == perObject {
		c.collectPerObject(e, &snap)
	} else {
		var ready, unacked, readyBytes, inMemory, onDisk int
		for i := range snap.Queues {
			q := &snap.Queues[i]
			ready += q.Ready
			unacked += q.Unacked
			readyBytes += q.ReadyBytes
			inMemory += q.InMemory
			onDisk += q.OnDisk
		}
		e.gauge(ds.queueReady, float64(ready))
		e.gauge(ds.queueUnacked, float64(unacked))
		e.gauge(ds.queueMessages, float64(ready+unacked))
		e.gauge(ds.queueReadyBytes, float64(readyBytes))
		e.gauge(ds.queueReadyRAM, float64(inMemory))
		e.gauge(ds.queuePagedOut, float64(onDisk))
		e.gauge(ds.queueConsumers, float64(consumers))
		e.counter(ds.queuePub, tot.published)
		var delayed int64
		for i := range snap.Exchanges {
			delayed += max(snap.Exchanges[i].MessagesDelayed, 0)
		}
		e.gauge(ds.exchangeDelayed, float64(delayed))
		e.counter(ds.connIncomingBytes, tot.recvBytes)
		e.counter(ds.connOutgoingBytes, tot.sendBytes)
	}

	m := &tot.msgs
	e.counter(ds.globalReceived, m.Publish, protocolAMQP091)
	e.counter(ds.globalRouted, tot.routed, protocolAMQP091)
	e.counter(ds.globalConfirmed, m.Confirm, protocolAMQP091)
	e.counter(ds.globalReceivedConfirm, m.PublishConfirm, protocolAMQP091)
	e.counter(ds.globalDropped, m.DropUnroutable, protocolAMQP091)
	e.counter(ds.globalReturned, m.ReturnUnroutable, protocolAMQP091)
	e.gauge(ds.globalConsumers, float64(consumers), protocolAMQP091)
	e.counter(ds.globalDelivered, m.Deliver+m.DeliverNoAck+m.Get+m.GetNoAck, protocolAMQP091, queueTypeClassic)
	e.counter(ds.globalConsumeManual, m.Deliver, protocolAMQP091, queueTypeClassic)
	e.counter(ds.globalConsumeAuto, m.DeliverNoAck, protocolAMQP091, queueTypeClassic)
	e.counter(ds.globalGetManual, m.Get, protocolAMQP091, queueTypeClassic)
	e.counter(ds.globalGetAuto, m.GetNoAck, protocolAMQP091, queueTypeClassic)
	e.counter(ds.globalGetEmpt, m.GetEmpty, protocolAMQP091, queueTypeClassic)
	e.counter(ds.globalRedelivered, m.Redeliver, protocolAMQP091, queueTypeClassic)
	e.counter(ds.globAck, m.Ack, protocolAMQP091, queueTypeClassic)
	for s, strategy := range [...]string{strategyDisabled, strategyAtMostOnce} {
		e.counter(ds.deadLetteredExpired, tot.expired[s], queueTypeClassic, strategy)
		e.counter(ds.deadLetteredMaxlen, tot.maxlen[s], queueTypeClassic, strategy)
	}
}

// collectNode emits memory, alarm, disk and file-descriptor gauges.
func (c *collector) collectNode(e emitter, snap *server.MetricsSnapshot) {
	ds := c.descs
	e.gauge(ds.residentMemory, float64(snap.MemoryUsed))
	if snap.MemoryHighWatermark > 0 {
		// Without a watermark there is no limit to report; a 0 would make the
		// dashboards' headroom (limit - used) negative.
		e.gauge(ds.memoryLimit, float64(snap.MemoryHighWatermark))
	}
	alarm := 0.0
	if snap.MemoryAlarm {
		alarm = 1
	}
	e.untyped(ds.memoryAlarm, alarm)
	if snap.DiskFreeLimit > 0 {
		// As for memory: no limit, no series (the alerts predict free space
		// reaching it).
		e.gauge(ds.diskLimit, float64(snap.DiskFreeLimit))
	}
	alarm = 0
	if snap.DiskAlarm {
		alarm = 1
	}
	e.untyped(ds.diskAlarm, alarm)

	stat := func(desc *prometheus.Desc, v uint64, err error) {
		switch {
		case err == nil:
			e.gauge(desc, float64(v))
		case errors.Is(err, errUnsupported):
		default:
			e.ch <- prometheus.NewInvalidMetric(desc, err)
		}
	}
	if snap.DataDir != "" {
		v, err := diskAvailable(snap.DataDir)
		stat(ds.diskAvailable, v, err)
	}
	v, err := openFDs()
	stat(ds.openFDs, v, err)
	v, err = maxFDs()
	stat(ds.maxFDs, v, err)
	// The broker's socket share of the descriptors, AMQP and HTTP sockets
	// counted, as RabbitMQ reports its file handle cache's.
	if fds := c.srv.Descriptors(); fds.SocketsLimit > 0 {
		e.gauge(ds.openSockets, float64(fds.SocketsUsed))
		e.gauge(ds.maxSockets, float64(fds.SocketsLimit))
	}
}

// collectPerObject emits one series per queue and per connection.
func (c *collector) collectPerObject(e emitter, snap *server.MetricsSnapshot) {
	ds := c.descs
	for i := range snap.Queues {
		q := &snap.Queues[i]
		vhost, name := labelValue(q.Vhost), labelValue(q.Name)
		e.gauge(ds.queueInfo, 1, vhost, name, queueTypeLabel(q), membership(q, c.srv.NodeName()))
		e.gauge(ds.queueReady, float64(q.Ready), vhost, name)
		e.gauge(ds.queueUnacked, float64(q.Unacked), vhost, name)
		e.gauge(ds.queueMessages, float64(q.Ready+q.Unacked), vhost, name)
		e.gauge(ds.queueReadyBytes, float64(q.ReadyBytes), vhost, name)
		e.gauge(ds.queueReadyRAM, float64(q.InMemory), vhost, name)
		e.gauge(ds.queuePagedOut, float64(q.OnDisk), vhost, name)
		e.gauge(ds.queueConsumers, float64(q.Consumers), vhost, name)
		e.counter(ds.queuePub, q.Published, vhost, name)
	}
	for i := range snap.Exchanges {
		x := &snap.Exchanges[i]
		if x.MessagesDelayed >= 0 {
			e.gauge(ds.exchangeDelayed, float64(x.MessagesDelayed), labelValue(x.Vhost), labelValue(x.Name))
		}
	}
	for i := range snap.Connections {
		conn := &snap.Connections[i]
		name := labelValue(conn.Name)
		e.counter(ds.connIncomingBytes, conn.RecvOct, name)
		e.counter(ds.connOutgoingBytes, conn.SendOct, name)
	}
}

// queueTypeLabel is RabbitMQ's module name for a queue's type (its
// x-queue-type, as the management API reads it), the queue_type label.
func queueTypeLabel(q *server.QueueMetrics) string {
	t, _ := q.Arguments["x-queue-type"].(string)
	switch t {
	case "quorum":
		return "rabbit_quorum_queue"
	case "stream":
		return "rabbit_stream_queue"
	}
	return queueTypeClassic
}

// membership is this node's role for the queue in queue_info: a
// replicated queue's leader or follower; a node leads the other queues it
// reports.
func membership(q *server.QueueMetrics, node string) string {
	if q.Leader == "" || q.Leader == node {
		return "leader"
	}
	return "follower"
}

// emitter sends const metrics to a scrape.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) metric(desc *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(desc, t, v, labels...)
	if err != nil {
		// Only a label count that does not match the family gets here (label
		// values are made valid UTF-8 first): report it in the scrape, which
		// logs it, instead of panicking inside the broker.
		m = prometheus.NewInvalidMetric(desc, err)
	}
	e.ch <- m
}

func (e emitter) gauge(desc *prometheus.Desc, v float64, labels ...string) {
	e.metric(desc, prometheus.GaugeValue, v, labels...)
}

func (e emitter) counter(desc *prometheus.Desc, v uint64, labels ...string) {
	e.metric(desc, prometheus.CounterValue, float64(v), labels...)
}

// untyped is for the families RabbitMQ exposes untyped (info and alarms).
func (e emitter) untyped(desc *prometheus.Desc, v float64, labels ...string) {
	e.metric(desc, prometheus.UntypedValue, v, labels...)
}

// labelValue makes s a valid Prometheus label value: AMQP short strings may
// hold bytes that are not UTF-8, which the exposition format forbids.
func labelValue(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}

// emitInfo emits rabbitmq_identity_info and rabbitmq_build_info, which every
// endpoint serves: the dashboards select a cluster and node by them.
func emitInfo(e emitter, s *server.Server, opts Options, ds *descs, snap *server.MetricsSnapshot, ep endpoint) {
	node := s.NodeName()
	cluster := snap.ClusterName
	if cluster == "" {
		cluster = opts.ClusterName
	}
	if cluster == "" {
		cluster = node
	}
	// rabbitmq_cluster_permanent_id is the cluster's internal_cluster_id,
	// as rabbitmq_prometheus reports it (empty, hence absent to Prometheus,
	// on a cluster node the seed entry has not reached yet).
	e.untyped(ds.identity, 1, labelValue(node), labelValue(cluster), labelValue(s.InternalClusterID()), ep.String())
	version := labelValue(snap.ProductVersion)
	e.untyped(ds.build, 1, version, version, clientVersion, "n/a", labelValue(opts.ProductName), version)
}
