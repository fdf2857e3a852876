// Package metrics exports Warren's counters to Prometheus under the names,
// types, units and labels of RabbitMQ's rabbitmq_prometheus plugin, so
// RabbitMQ's Grafana dashboards (RabbitMQ-Overview and friends) and Datadog's
// OpenMetrics check work against Warren unchanged.
//
// Handler serves two endpoints, as RabbitMQ does on port 15692:
//
//	/metrics             aggregated: one series per family, no per-object labels
//	/metrics/per-object  one series per queue ({vhost, queue}) and per
//	                     connection ({channel}, RabbitMQ's label key)
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
//     block the broker beyond the per-object locks MetricsSnapshot takes.
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
//     out rather than emitted as zero: rabbitmq_global_messages_received_confirm_total,
//     rabbitmq_global_publishers, rabbitmq_connections_closed_total,
//     rabbitmq_channels_opened_total/_closed_total, rabbitmq_queues_declared/
//     created/deleted_total, rabbitmq_global_messages_dead_lettered_rejected_total
//     and _delivery_limit_total, rabbitmq_disk_space_available_limit_bytes, the
//     disk and file-descriptor alarms, the message-size histogram, auth
//     attempts, per-channel families and /metrics/detailed.
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
