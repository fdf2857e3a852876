// Package metrics exports Warren's counters to Prometheus under the names,
// types, units and labels of RabbitMQ's rabbitmq_prometheus plugin, so
// RabbitMQ's Grafana dashboards (RabbitMQ-Overview and friends) and Datadog's
// OpenMetrics check work against Warren unchanged.
//
// Handler serves three endpoints, as RabbitMQ does on port 15692:
//
//	/metrics             aggregated: one series per family, no per-object labels
//	/metrics/per-object  one series per queue ({vhost, queue}) and per
//	                     connection ({channel}, RabbitMQ's label key)
//	/metrics/detailed    rabbitmq_detailed_* series of the groups named by
//	                     family= (connection_churn_metrics, queue_coarse_metrics,
//	                     queue_consumer_count, queue_metrics, channel_metrics,
//	                     connection_coarse_metrics, connection_metrics), the
//	                     queue groups filtered by vhost= (detailed.go)
//
// Names, types and HELP texts are RabbitMQ 3.10.8's (testdata/rabbitmq-3.10.8
// holds its scrapes, which the tests compare with), and every query of
// RabbitMQ's RabbitMQ-Overview Grafana dashboard (testdata/grafana) returns
// data from a real Prometheus scraping Warren (prometheus_test.go).
//
// Exporter runs Handler on its own listener (default :15692, IPv4 and IPv6).
//
// There is no central stats collector: a custom prometheus.Collector copies
// the counters that live in each queue, exchange and connection at scrape time
// (server.Server.MetricsSnapshot) and builds const metrics from the copy, with
// no server lock held while it formats.
//
// Invariants:
//   - rabbitmq_identity_info and rabbitmq_build_info are in every scrape:
//     every panel of RabbitMQ's dashboards joins on rabbitmq_identity_info.
//   - The aggregated endpoint's output size does not depend on the number of
//     queues or connections.
//   - Node-wide counters (rabbitmq_global_*_total and the aggregated *_total
//     families) never go down, even when the objects whose counters they sum
//     are deleted: each scrape adds what every live object gained since the
//     previous scrape (see tally). Per-object counters are the objects' own
//     and restart at zero when an object is deleted and declared again.
//   - Scrapes are serialised with each other (one tally lock); they never
//     block the broker beyond the per-object locks MetricsSnapshot takes (a
//     vhost's read lock while its queue pointers are copied, then each
//     queue's lock in turn). An aggregated scrape of 10,000 queues and 1,000
//     connections costs about 20-35 ms and 3 MB
//     (BenchmarkScrapeAggregated10kQueues1kConns).
//
// Caveats:
//   - Node-wide counters summed from queues, exchanges and connections
//     (routed, published to queues, connection bytes, dead-lettered) miss
//     what an object gained between the last scrape and its deletion; those
//     taken from the server's per-vhost channel counters (received,
//     confirmed, unroutable, delivered, acknowledged, get_empty) keep closed
//     channels' counts. The first scrape after start reports everything the
//     live objects counted before it.
//   - Families RabbitMQ has and Warren's server does not count yet are left
//     out rather than emitted as zero: rabbitmq_global_publishers,
//     rabbitmq_global_messages_dead_lettered_rejected_total and
//     _delivery_limit_total, the file-descriptor alarm, the message-size
//     histogram, auth
//     attempts, the transaction gauges of channel_metrics
//     (channel_messages_uncommitted, channel_acks_uncommitted), Erlang's
//     reductions and the io_* and schema_db_* families, of the raft_*
//     families raft_log_snapshot_index, raft_log_last_applied_index and
//     raft_entry_commit_latency_seconds (quorum.go has the others, with
//     Warren's warren_quorum_* families for leadership, membership,
//     replication lag, elections and a commit latency histogram); in
//     /metrics/detailed the groups channel_exchange_metrics,
//     channel_queue_metrics and channel_queue_exchange_metrics (Warren counts
//     per channel, not per channel and exchange or queue), node_*,
//     ra_metrics, auth_attempt_* and the rabbitmq_cluster_* groups.
//   - The aggregated raft_* families are sums over this node's replicas, as
//     RabbitMQ's are, so rabbitmq_raft_term_total drops when a quorum queue
//     is deleted (the one node-wide counter that may).
//   - The aggregated channel families (rabbitmq_channel_messages_*_total,
//     rabbitmq_channel_get_*_total) keep closed channels' counts and never go
//     down; RabbitMQ's drop when its stats GC removes a closed channel's rows.
//     The channel gauges (rabbitmq_channel_consumers, _messages_unacked,
//     _messages_unconfirmed) are read at the scrape, not every 5 s as
//     RabbitMQ's stats emission does.
//   - The churn counters count from the broker's start:
//     rabbitmq_connections_closed_total counts every accepted TCP connection
//     that ended (as _opened_total counts every accepted one);
//     rabbitmq_queues_declared_total counts non-passive declares, refused
//     ones included, as RabbitMQ 3.10 does.
//   - /metrics/detailed labels a channel row by its name ("peer -> local
//     (n)", as the management API shows it) where RabbitMQ uses the channel
//     process id.
//   - rabbitmq_connections_opened_total counts accepted TCP connections,
//     including those that never finish the AMQP handshake.
//   - rabbitmq_global_messages_dead_lettered_expired_total and _maxlen_total
//     attribute each queue's gains to the dead_letter_strategy the queue has
//     at the scrape ("at_most_once" with a dead-letter exchange, otherwise
//     "disabled"); maxlen counts drop-head overflow only, not
//     reject-publish-dlx.
//   - Per-object connection series use RabbitMQ's label key "channel" with the
//     connection's name ("peer -> local") as its value; per-object queue
//     counters carry {vhost, queue} only (RabbitMQ adds channel and exchange).
//   - rabbitmq_build_info reports erlang_version="n/a"; rabbitmq_version and
//     product_version are the broker's own version.
//   - The endpoints are unauthenticated, as rabbitmq_prometheus is by default.
package metrics
