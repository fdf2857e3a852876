package server

import (
	"slices"
	"strings"
)

// This file holds the read-only accessors the Prometheus exporter
// (mgmt/metrics) needs. Everything here copies state out under the owning
// object's lock and releases it before returning: callers format and encode
// without holding any server lock.

// MetricsSnapshot is a point-in-time copy of the node's counters and gauges,
// taken object by object (each object is consistent with itself, the whole is
// not one atomic cut).
type MetricsSnapshot struct {
	// ProductVersion is the broker's version (Config.ProductVersion).
	ProductVersion string
	// ClusterName is the cluster name set through the management API or
	// definitions (ClusterName), or "" when none is set.
	ClusterName string
	// DataDir is the configured data directory, whose file system's free
	// space the exporter reports.
	DataDir string
	// ConnectionsAccepted counts TCP connections accepted since start,
	// including those that never finished the AMQP handshake.
	ConnectionsAccepted uint64
	// MemoryUsed is what the memory alarm compares with the watermark
	// (MemoryUsed()), in bytes.
	MemoryUsed uint64
	// MemoryHighWatermark is the memory alarm threshold in bytes; 0 means the
	// alarm is off.
	MemoryHighWatermark uint64
	// MemoryAlarm reports whether the memory alarm is raised.
	MemoryAlarm bool
	// DiskFreeLimit is the disk-free alarm threshold in bytes; 0 means the
	// alarm is off. DiskAlarm reports whether it is raised.
	DiskFreeLimit uint64
	DiskAlarm     bool
	// Queues are all queues of all vhosts, in no particular order (sorting
	// 10,000 names would cost a scrape more than copying them; the
	// exposition is sorted by the Prometheus client anyway).
	Queues []QueueMetrics
	// Exchanges are all exchanges of all vhosts, ordered by vhost then name.
	Exchanges []ExchangeMetrics
	// Connections are the connections past their handshake, ordered by id.
	Connections []ConnInfo
	// Channels is the number of open channels.
	Channels int
	// ChannelGauges sums the open channels' gauges.
	ChannelGauges ChannelGauges
	// Churn are the node's connection, channel and queue lifecycle counters.
	Churn ChurnCounters
	// Messages are each vhost's message counters (VhostCounters): those of
	// its open channels plus those its closed channels and API calls left.
	Messages map[string]MessageCounters
}

// QueueMetrics is one queue's snapshot plus what the exporter needs beyond
// QueueInfo.
type QueueMetrics struct {
	QueueInfo
	// Queue identifies the queue object: a queue deleted and declared again
	// under the same name is a different *Queue, so its counters start over.
	Queue *Queue
	// HasDeadLetterExchange reports whether the queue dead-letters (from its
	// arguments or a policy); DeadLetterExchange is then the exchange, which
	// may be "" (the default exchange).
	HasDeadLetterExchange bool
	DeadLetterExchange    string
}

// ExchangeMetrics is a snapshot of one exchange's routing counters.
type ExchangeMetrics struct {
	// Exchange identifies the exchange object (see QueueMetrics.Queue).
	Exchange *Exchange
	// Vhost, Name and Type describe the exchange; Name is "" for the default
	// exchange.
	Vhost, Name, Type string
	// PublishIn counts messages the exchange routed, including those that
	// reached it over exchange-to-exchange bindings, as an alternate exchange
	// or as a dead-letter exchange.
	PublishIn uint64
	// PublishOut counts publishes to this exchange that reached at least one
	// queue (or a direct reply-to consumer).
	PublishOut uint64
	// MessagesDelayed is how many messages a delaying exchange holds for
	// later (delayed.go); -1 for the other exchanges.
	MessagesDelayed int64
}

// MetricsSnapshot copies the node's metrics. It takes each lock briefly and
// holds none when it returns: a vhost's read lock while its queue pointers
// are copied (publishers share it), then each queue's lock while that queue
// is read. Its cost grows with the number of queues, exchanges and
// connections.
func (s *Server) MetricsSnapshot() MetricsSnapshot {
	snap := MetricsSnapshot{
		ProductVersion:      s.cfg.ProductVersion,
		ClusterName:         s.ClusterName(),
		DataDir:             s.cfg.DataDir,
		ConnectionsAccepted: s.nextID.Load(),
		MemoryUsed:          MemoryUsed(),
		MemoryHighWatermark: s.watermark.Load(),
		MemoryAlarm:         s.MemoryAlarm(),
		DiskFreeLimit:       s.diskLimit.Load(),
		DiskAlarm:           s.DiskAlarm(),
	}
	var queues []*Queue
	for _, vh := range s.Vhosts() {
		queues = vh.appendQueues(queues)
		snap.Exchanges = vh.appendExchangeMetrics(snap.Exchanges)
	}
	snap.Queues = make([]QueueMetrics, len(queues))
	for i, q := range queues {
		snap.Queues[i] = q.metrics()
	}
	snap.Connections = s.Connections()
	chs := s.admin.liveChannels()
	snap.Channels = len(chs)
	for _, ch := range chs {
		snap.ChannelGauges.add(ch.gauges())
	}
	snap.Churn = s.churn.snapshot()
	snap.Messages = s.VhostCounters()
	return snap
}

// metrics returns the queue's snapshot for the exporter.
func (q *Queue) metrics() QueueMetrics {
	q.mu.Lock()
	hasDLX, dlx := q.qa.hasDLX, q.qa.dlx
	q.mu.Unlock()
	return QueueMetrics{QueueInfo: q.Info(), Queue: q, HasDeadLetterExchange: hasDLX, DeadLetterExchange: dlx}
}

// appendQueues appends the vhost's queues homed on this node, unsorted.
func (vh *Vhost) appendQueues(dst []*Queue) []*Queue {
	vh.mu.RLock()
	defer vh.mu.RUnlock()
	for _, q := range vh.queues {
		if q.homedHere() { // a queue homed on another node is exported there, as rabbitmq_prometheus does
			dst = append(dst, q)
		}
	}
	return dst
}

// appendExchangeMetrics appends the vhost's exchanges, sorted by name. The
// name, type and vhost of an exchange never change, and its counters are
// atomics, so only the map walk needs vh.mu.
func (vh *Vhost) appendExchangeMetrics(dst []ExchangeMetrics) []ExchangeMetrics {
	vh.mu.RLock()
	start := len(dst)
	for _, ex := range vh.exchanges {
		dst = append(dst, ExchangeMetrics{Exchange: ex, Vhost: vh.name, Name: ex.name, Type: ex.kind})
	}
	vh.mu.RUnlock()
	added := dst[start:]
	slices.SortFunc(added, func(a, b ExchangeMetrics) int { return strings.Compare(a.Name, b.Name) })
	for i := range added {
		added[i].PublishIn = added[i].Exchange.stats.publishIn.value()
		added[i].PublishOut = added[i].Exchange.stats.publishOut.value()
		added[i].MessagesDelayed = added[i].Exchange.MessagesDelayed()
	}
	return dst
}

// ChannelGauges are a channel's current figures, as RabbitMQ's
// channel_metrics (summed over channels in MetricsSnapshot).
type ChannelGauges struct {
	Consumers, Unacked int
	Unconfirmed        uint64
	Prefetch           uint64 // basic.qos global=false
	GlobalPrefetch     uint64 // basic.qos global=true
}

func (g *ChannelGauges) add(o ChannelGauges) {
	g.Consumers += o.Consumers
	g.Unacked += o.Unacked
	g.Unconfirmed += o.Unconfirmed
	g.Prefetch += o.Prefetch
	g.GlobalPrefetch += o.GlobalPrefetch
}

// gauges reads the channel's gauges, each under its own leaf lock, without
// the string formatting info does.
func (ch *channel) gauges() ChannelGauges {
	g := ChannelGauges{
		Prefetch:       uint64(ch.stats.prefetch.Load()),
		GlobalPrefetch: uint64(ch.globalPrefetch.Load()),
	}
	ch.cmu.Lock()
	g.Consumers = len(ch.consumers)
	ch.cmu.Unlock()
	ch.umu.Lock()
	g.Unacked = ch.unacked.len()
	ch.umu.Unlock()
	_, g.Unconfirmed = ch.confirmState()
	return g
}
