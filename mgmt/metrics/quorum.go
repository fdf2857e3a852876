package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenmq/warren/server"
)

// quorumDescs are the replicated-queue families: rabbitmq_prometheus
// 3.10's ra_metrics that Warren's replicas have an equivalent for (term,
// commit index, last written index; summed on the aggregated endpoint as
// RabbitMQ sums them), and Warren's own for what Ra does not export
// (leadership, membership, replication lag, elections, commit latency).
type quorumDescs struct {
	term, commitIndex, lastWritten *prometheus.Desc
	// Per-object only.
	leader, members, online, inSync, elections *prometheus.Desc
	lagRecords, lagSeconds                     *prometheus.Desc
	// Node-wide, on every endpoint.
	led, commitLatency *prometheus.Desc
}

func newQuorumDescs(e endpoint) *quorumDescs {
	var queueLabels []string
	if e == perObject {
		queueLabels = []string{"vhost", "queue"}
	}
	r := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("rabbitmq_"+name, help, queueLabels, nil)
	}
	w := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("warren_"+name, help, labels, nil)
	}
	qd := &quorumDescs{
		term:        r("raft_term_total", "Current Raft term number"),
		commitIndex: r("raft_log_commit_index", "Raft log commit index"),
		lastWritten: r("raft_log_last_written_index", "Raft log last written index"),
		led:         w("quorum_queues_led", "Replicated queues this node leads"),
		commitLatency: w("quorum_commit_latency_seconds",
			"Time from a confirmed publish's append on this node's quorum queue leaders to its commit on the in-sync replicas"),
	}
	if e == perObject {
		qd.leader = w("quorum_queue_leader", "1 if this node leads the replicated queue, 0 if it holds a mirror", "vhost", "queue")
		qd.members = w("quorum_queue_members", "Members (replicas) of the replicated queue", "vhost", "queue")
		qd.online = w("quorum_queue_members_online", "Members of the replicated queue whose node is up", "vhost", "queue")
		qd.inSync = w("quorum_queue_members_in_sync", "Members of the replicated queue in its in-sync set", "vhost", "queue")
		qd.elections = w("quorum_queue_leader_elections_total", "Leader elections of the replicated queue since it was declared", "vhost", "queue")
		qd.lagRecords = w("quorum_replication_lag_records",
			"Records the leader holds that a mirror has not made durable, on the leader", "vhost", "queue", "member")
		qd.lagSeconds = w("quorum_replication_lag_seconds",
			"Age of a mirror's oldest record not acknowledged to the leader, on the leader", "vhost", "queue", "member")
	}
	return qd
}

func (qd *quorumDescs) all() []*prometheus.Desc {
	out := []*prometheus.Desc{qd.term, qd.commitIndex, qd.lastWritten, qd.led, qd.commitLatency}
	if qd.leader != nil {
		out = append(out, qd.leader, qd.members, qd.online, qd.inSync, qd.elections, qd.lagRecords, qd.lagSeconds)
	}
	return out
}

// collectQuorum emits the replicated-queue families for the replicas this
// node holds.
func (c *collector) collectQuorum(e emitter) {
	qd := c.quorum
	var term, commit, written uint64
	led := 0
	for _, rq := range c.srv.ReplicatedQueues() {
		if !rq.Local {
			continue // forwarded only: another node reports it
		}
		if rq.Leading {
			led++
		}
		term, commit, written = term+rq.Epoch, commit+rq.CommitOffset, written+rq.LastOffset
		if c.endpoint == perObject {
			collectQuorumQueue(e, qd, &rq)
		}
	}
	if c.endpoint != perObject {
		e.counter(qd.term, term)
		e.gauge(qd.commitIndex, float64(commit))
		e.gauge(qd.lastWritten, float64(written))
	}
	e.gauge(qd.led, float64(led))
	h := c.srv.QuorumCommitLatency()
	buckets := make(map[float64]uint64, len(server.CommitLatencyBuckets))
	var cum uint64
	for i, le := range server.CommitLatencyBuckets {
		cum += h.Counts[i]
		buckets[le] = cum
	}
	cum += h.Counts[len(h.Counts)-1]
	m, err := prometheus.NewConstHistogram(qd.commitLatency, cum, h.Sum.Seconds(), buckets)
	if err != nil {
		m = prometheus.NewInvalidMetric(qd.commitLatency, err)
	}
	e.ch <- m
}

func collectQuorumQueue(e emitter, qd *quorumDescs, rq *server.ReplicatedQueue) {
	vhost, name := labelValue(rq.Vhost), labelValue(rq.Name)
	e.counter(qd.term, rq.Epoch, vhost, name)
	e.gauge(qd.commitIndex, float64(rq.CommitOffset), vhost, name)
	e.gauge(qd.lastWritten, float64(rq.LastOffset), vhost, name)
	leader := 0.0
	if rq.Leading {
		leader = 1
	}
	e.gauge(qd.leader, leader, vhost, name)
	e.gauge(qd.members, float64(len(rq.Members)), vhost, name)
	e.gauge(qd.online, float64(len(rq.Online)), vhost, name)
	e.gauge(qd.inSync, float64(len(rq.ISR)), vhost, name)
	e.counter(qd.elections, rq.Elections, vhost, name)
	for _, m := range rq.Mirrors {
		member := labelValue(m.Node)
		e.gauge(qd.lagRecords, float64(rq.LastOffset-min(m.Durable, rq.LastOffset)), vhost, name, member)
		e.gauge(qd.lagSeconds, m.Lag.Seconds(), vhost, name, member)
	}
}
