package metrics

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/warrenmq/warren/server"
)

// /metrics/detailed serves the groups a query names with family=..., one
// series per object, under the rabbitmq_detailed_ prefix, as
// rabbitmq_prometheus does: no family gives only the info families, an
// unknown family is ignored, and vhost=... (repeatable) keeps the queues of
// those vhosts in the queue groups (a vhost that does not exist selects
// nothing). The values are the objects' own, not folded into node totals.

const detailedPrefix = "rabbitmq_detailed_"

// detailedGroup is one group /metrics/detailed can serve.
type detailedGroup struct {
	name   string // the family= value: RabbitMQ's table name
	defs   []metricDef
	labels []string
	// emit sends the group's rows, filtered by d.vhosts when the group is
	// per queue.
	emit func(e emitter, descs []*prometheus.Desc, d *detailedData)
}

// detailedGroups are the groups served, in RabbitMQ's exposition order.
var detailedGroups = []detailedGroup{
	{"connection_churn_metrics", connectionChurnDefs, nil, emitChurn},
	{"queue_coarse_metrics", queueCoarseDefs, queueLabels, emitQueueCoarse},
	{"queue_consumer_count", queueConsumerCountDefs, queueLabels, emitQueueConsumers},
	{"queue_metrics", queueMetricsDefs, queueLabels, emitQueueMetrics},
	{"channel_metrics", channelDefs, channelLabel, emitChannels},
	{"connection_coarse_metrics", connectionCoarseDefs, channelLabel, emitConnCoarse},
	{"connection_metrics", connectionDefs, channelLabel, emitConns},
}

var (
	queueLabels = []string{"vhost", "queue"}
	// channelLabel is RabbitMQ's label of channel and connection rows.
	channelLabel = []string{"channel"}
)

// detailedData is what one detailed scrape reads.
type detailedData struct {
	snap server.MetricsSnapshot
	// vhosts selects queues by vhost; nil selects every queue.
	vhosts map[string]bool
	srv    *server.Server
}

func (d *detailedData) queues(yield func(*server.QueueMetrics) bool) {
	for i := range d.snap.Queues {
		q := &d.snap.Queues[i]
		if d.vhosts != nil && !d.vhosts[q.Vhost] {
			continue
		}
		if !yield(q) {
			return
		}
	}
}

func emitChurn(e emitter, descs []*prometheus.Desc, d *detailedData) {
	emitRow(e, descs, connectionChurnDefs, churnValues(d.snap.ConnectionsAccepted, d.snap.Churn))
}

func emitQueueCoarse(e emitter, descs []*prometheus.Desc, d *detailedData) {
	for q := range d.queues {
		emitRow(e, descs, queueCoarseDefs, []float64{float64(q.Ready), float64(q.Unacked), float64(q.Ready + q.Unacked)},
			labelValue(q.Vhost), labelValue(q.Name))
	}
}

func emitQueueConsumers(e emitter, descs []*prometheus.Desc, d *detailedData) {
	for q := range d.queues {
		emitRow(e, descs, queueConsumerCountDefs, []float64{float64(q.Consumers)}, labelValue(q.Vhost), labelValue(q.Name))
	}
}

func emitQueueMetrics(e emitter, descs []*prometheus.Desc, d *detailedData) {
	for q := range d.queues {
		emitRow(e, descs, queueMetricsDefs,
			[]float64{float64(q.Consumers), float64(q.InMemory), float64(q.ReadyBytes), float64(q.OnDisk)},
			labelValue(q.Vhost), labelValue(q.Name))
	}
}

func emitChannels(e emitter, descs []*prometheus.Desc, d *detailedData) {
	for _, ch := range d.srv.Channels() {
		g := server.ChannelGauges{Consumers: ch.Consumers, Unacked: ch.Unacked, Unconfirmed: ch.Unconfirmed,
			Prefetch: uint64(ch.Prefetch), GlobalPrefetch: uint64(ch.GlobalPrefetch)}
		// RabbitMQ's channel name, as its management API shows it.
		name := fmt.Sprintf("%s (%d)", ch.ConnName, ch.Number)
		emitRow(e, descs, channelDefs, channelGaugeValues(g), labelValue(name))
	}
}

func emitConnCoarse(e emitter, descs []*prometheus.Desc, d *detailedData) {
	for i := range d.snap.Connections {
		c := &d.snap.Connections[i]
		emitRow(e, descs, connectionCoarseDefs, []float64{float64(c.RecvOct), float64(c.SendOct)}, labelValue(c.Name))
	}
}

func emitConns(e emitter, descs []*prometheus.Desc, d *detailedData) {
	for _, c := range d.srv.ConnectionDetails() {
		emitRow(e, descs, connectionDefs, []float64{float64(c.RecvCnt), float64(c.Channels)}, labelValue(c.Name))
	}
}

// detailedCollector serves one /metrics/detailed request.
type detailedCollector struct {
	srv    *server.Server
	opts   Options
	info   *descs
	groups []detailedGroup
	vhosts map[string]bool
}

// Describe sends nothing: the collector is built per request and its
// families depend on the query, so the registry does not check them.
func (c *detailedCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *detailedCollector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch}
	d := &detailedData{snap: c.srv.MetricsSnapshot(), vhosts: c.vhosts, srv: c.srv}
	for _, g := range c.groups {
		g.emit(e, descsOf(detailedPrefix, g.defs, g.labels), d)
	}
	emitInfo(e, c.srv, c.opts, c.info, &d.snap, detailed)
}

// detailedHandler answers /metrics/detailed.
func detailedHandler(s *server.Server, opts Options) http.Handler {
	info := newDescs(aggregated)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		c := &detailedCollector{srv: s, opts: opts, info: info, groups: selectGroups(q["family"])}
		if names, ok := q["vhost"]; ok {
			c.vhosts = make(map[string]bool, len(names))
			for _, name := range names {
				// Only existing vhosts select, as RabbitMQ's filter does.
				if s.Vhost(name) != nil {
					c.vhosts[name] = true
				}
			}
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{
			ErrorLog:      errorLogger{opts.Logger},
			ErrorHandling: promhttp.ContinueOnError,
		}).ServeHTTP(w, r)
	})
}

// selectGroups returns the groups named, in exposition order. As in
// RabbitMQ, queue_consumer_count is left out when queue_metrics (which has
// queue_consumers too) is asked for.
func selectGroups(names []string) []detailedGroup {
	asked := make(map[string]bool, len(names))
	for _, n := range names {
		asked[n] = true
	}
	var out []detailedGroup
	for _, g := range detailedGroups {
		if !asked[g.name] || (g.name == "queue_consumer_count" && asked["queue_metrics"]) {
			continue
		}
		out = append(out, g)
	}
	return out
}
