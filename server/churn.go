package server

import "sync/atomic"

// churn counts object lifecycle events node-wide, as RabbitMQ's
// connection_churn_metrics do: they only grow, whatever happens to the objects
// afterwards, so rate() over them is the churn the dashboards chart.
type churn struct {
	connectionsClosed atomic.Uint64
	channelsOpened    atomic.Uint64
	channelsClosed    atomic.Uint64
	queuesDeclared    atomic.Uint64
	queuesCreated     atomic.Uint64
	queuesDeleted     atomic.Uint64
}

// ChurnCounters is a snapshot of the node's lifecycle counters.
type ChurnCounters struct {
	// ConnectionsClosed counts accepted TCP connections that have ended, so
	// MetricsSnapshot.ConnectionsAccepted minus it is the sockets still open.
	ConnectionsClosed uint64
	// ChannelsOpened and ChannelsClosed count channel.open accepted and
	// channels gone for any reason (close, channel error, connection end).
	ChannelsOpened, ChannelsClosed uint64
	// QueuesDeclared counts non-passive declares (AMQP or API, not
	// definitions imports) past the permission check, answered or refused,
	// as RabbitMQ counts them; QueuesCreated those that created a queue;
	// QueuesDeleted every queue
	// removed (delete, auto-delete, exclusive owner gone, x-expires, vhost
	// deleted).
	QueuesDeclared, QueuesCreated, QueuesDeleted uint64
}

func (c *churn) snapshot() ChurnCounters {
	return ChurnCounters{
		ConnectionsClosed: c.connectionsClosed.Load(),
		ChannelsOpened:    c.channelsOpened.Load(), ChannelsClosed: c.channelsClosed.Load(),
		QueuesDeclared: c.queuesDeclared.Load(), QueuesCreated: c.queuesCreated.Load(),
		QueuesDeleted: c.queuesDeleted.Load(),
	}
}

// countQueue adds one to a queue counter of vh's node; a vhost not attached
// to a server (some tests) counts nowhere.
func (vh *Vhost) countQueue(pick func(*churn) *atomic.Uint64) {
	if vh.srv != nil {
		pick(&vh.srv.churn).Add(1)
	}
}

func queuesDeclared(c *churn) *atomic.Uint64 { return &c.queuesDeclared }
func queuesCreated(c *churn) *atomic.Uint64  { return &c.queuesCreated }
func queuesDeleted(c *churn) *atomic.Uint64  { return &c.queuesDeleted }
