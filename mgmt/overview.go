package mgmt

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"time"

	"github.com/warrenmq/warren/server"
)

// exchangeTypes are the exchange types every node supports, described as
// RabbitMQ describes them (3.10 with the consistent-hash, sharding, random and
// delayed-message exchange plugins enabled; x-local-random as 4.0 does).
var exchangeTypes = []map[string]any{
	{"name": "direct", "description": "AMQP direct exchange, as per the AMQP specification", "enabled": true},
	{"name": "fanout", "description": "AMQP fanout exchange, as per the AMQP specification", "enabled": true},
	{"name": "headers", "description": "AMQP headers exchange, as per the AMQP specification", "enabled": true},
	{"name": "topic", "description": "AMQP topic exchange, as per the AMQP specification", "enabled": true},
	{"name": "x-consistent-hash", "description": "Consistent Hashing Exchange", "enabled": true},
	{"name": "x-delayed-message", "description": "Delayed Message Exchange.", "enabled": true},
	{"name": "x-local-random", "description": "Picks one random local binding (queue) to route via (to).", "enabled": true},
	{"name": "x-modulus-hash", "description": "Modulus Hashing Exchange", "enabled": true},
	{"name": "x-random", "description": "Randomly picks a binding (queue) to route via (to).", "enabled": true},
}

// mechanismDescriptions are RabbitMQ's descriptions of its SASL mechanisms
// (EXTERNAL's is rabbitmq_auth_mechanism_ssl's).
var mechanismDescriptions = map[string]string{
	"PLAIN":    "SASL PLAIN authentication mechanism",
	"AMQPLAIN": "QPid AMQPLAIN mechanism",
	"EXTERNAL": "SSL authentication mechanism using SASL EXTERNAL",
}

// authMechanisms lists the mechanisms the broker really offers in RabbitMQ's
// auth_mechanisms format.
func (a *API) authMechanisms() []map[string]any {
	names := a.srv.AuthMechanisms()
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"name": n, "description": mechanismDescriptions[n], "enabled": true})
	}
	return out
}

// listeners describes the AMQP and HTTP listeners.
func (a *API) listeners() []map[string]any {
	var out []map[string]any
	add := func(protocol, addr string) {
		host, port := server.SplitHostPort(addr)
		if host == "" || host == "0.0.0.0" {
			host = "::"
		}
		out = append(out, map[string]any{"node": a.srv.NodeName(), "protocol": protocol, "ip_address": host,
			"port": port, "socket_opts": map[string]any{}})
	}
	if n := a.srv.Node(); n.AMQPAddr != "" {
		add("amqp", n.AMQPAddr)
	}
	if addr := a.srv.AMQPSAddr(); addr != nil {
		add("amqp/ssl", addr.String())
	}
	if addr := a.Addr(); addr != nil {
		proto := "http"
		if a.cfg.TLS != nil {
			proto = "https" // as RabbitMQ names a TLS management listener
		}
		add(proto, addr.String())
	}
	return out
}

// contexts describes the HTTP context; the overview names the node in it,
// the node object does not (as in RabbitMQ).
func (a *API) contexts(withNode bool) []map[string]any {
	port := ""
	if addr := a.Addr(); addr != nil {
		_, p := server.SplitHostPort(addr.String())
		port = strconv.Itoa(p)
	}
	c := map[string]any{"description": "RabbitMQ Management", "path": "/", "port": port}
	if withNode {
		c["node"] = a.srv.NodeName()
	}
	return []map[string]any{c}
}

// churnRates is the overview's churn_rates: each lifecycle counter since
// start with its rate over the last sampling interval (and samples when
// asked), as RabbitMQ 3.10 reports them.
func (a *API) churnRates(q sampleQuery) map[string]any {
	d := a.stats.churnDetails(q)
	out := make(map[string]any, 2*len(churnMetrics))
	for i, v := range churnValues(a.srv.Churn()) {
		putStat(out, churnMetrics[i], v, d)
	}
	return out
}

func (a *API) getOverview(rq *request) error {
	q := parseSampleQuery(rq)
	totals := a.srv.Totals()
	d := a.stats.overviewDetails(q)
	var counters server.MessageCounters
	for _, c := range a.srv.VhostCounters() {
		counters.Add(c)
	}
	queueTotals := map[string]any{}
	putStat(queueTotals, "messages", totals.Messages, d)
	putStat(queueTotals, "messages_ready", totals.Ready, d)
	putStat(queueTotals, "messages_unacknowledged", totals.Unacked, d)
	node := a.srv.Node()
	seconds := func(samples int) []int { return []int{int((time.Duration(samples) * a.cfg.StatsInterval).Seconds())} }
	writeJSON(rq.w, http.StatusOK, map[string]any{
		"management_version": ManagementVersion,
		"rates_mode":         "basic",
		"sample_retention_policies": map[string]any{
			"global": seconds(a.cfg.StatsHistory), "basic": seconds(a.cfg.ObjectHistory),
			"detailed": seconds(a.cfg.ObjectHistory),
		},
		"exchange_types":      exchangeTypes,
		"product_version":     node.ProductVersion,
		"product_name":        a.cfg.ProductName,
		"rabbitmq_version":    RabbitMQVersion,
		"cluster_name":        a.srv.ClusterName(),
		"erlang_version":      "n/a",
		"erlang_full_version": runtime.Version(),
		"disable_stats":       false,
		"enable_queue_totals": false,
		"default_queue_type":  "classic",
		// RabbitMQ lists the mechanisms on the node object only; the
		// overview repeats them so one request shows what clients may use.
		"auth_mechanisms": a.authMechanisms(),
		"message_stats":   messageStats(vhostMetrics, channelValuesWithTotals(counters), d, [][]string{publishGroup, deliverGroup}),
		"queue_totals":    queueTotals,
		"churn_rates":     a.churnRates(q),
		"object_totals": map[string]any{
			"channels": totals.Channels, "connections": totals.Connections, "consumers": totals.Consumers,
			"exchanges": totals.Exchanges, "queues": totals.Queues,
		},
		"statistics_db_event_queue": 0,
		"statistics_db_node":        a.srv.NodeName(),
		"node":                      a.srv.NodeName(),
		"listeners":                 a.listeners(),
		"contexts":                  a.contexts(true),
	})
	return nil
}

// channelValuesWithTotals lays counters out as vhostMetrics (the queue and
// traffic positions are unused by messageStats' groups).
func channelValuesWithTotals(m server.MessageCounters) []uint64 {
	v := make([]uint64, len(vhostMetrics))
	copy(v[3:], channelValues(m))
	return v
}

func (a *API) getWhoami(rq *request) error {
	tags := rq.user.Tags
	if tags == nil {
		tags = []string{}
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{"name": rq.user.Name, "tags": tags, "is_internal_user": true, "auth_backend": "internal"})
	return nil
}

// getAuth answers what the management UI reads before logging in: RabbitMQ
// 3.10's OAuth 2 (UAA) settings. Warren logs UI users in with their
// username and password only, so single sign-on is off, as on a RabbitMQ
// without management.enable_uaa; like RabbitMQ it needs no credentials.
func (a *API) getAuth(rq *request) error {
	writeJSON(rq.w, http.StatusOK, map[string]any{"enable_uaa": false, "uaa_client_id": "", "uaa_location": ""})
	return nil
}

func (a *API) getClusterName(rq *request) error {
	writeJSON(rq.w, http.StatusOK, map[string]any{"name": a.srv.ClusterName()})
	return nil
}

func (a *API) putClusterName(rq *request) error {
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	name, err := body(m).str("name")
	if err != nil {
		return err
	}
	if name == "" {
		return errBadRequest("name is required")
	}
	if err := a.srv.SetClusterName(name); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// getExtensions answers an empty list: no UI extensions.
func (a *API) getExtensions(rq *request) error {
	writeJSON(rq.w, http.StatusOK, []any{})
	return nil
}

// getFeatureFlags lists RabbitMQ 3.10's feature flags with this node's
// state of each.
func (a *API) getFeatureFlags(rq *request) error {
	var out []map[string]any
	for _, f := range a.srv.FeatureFlags() {
		out = append(out, map[string]any{"name": f.Name, "desc": f.Desc, "doc_url": "", "state": f.State,
			"stability": f.Stability, "provided_by": f.ProvidedBy})
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

// enableFeatureFlag answers PUT /api/feature-flags/{name}/enable. Warren's
// flags are states of what it has built, not switches: an enabled one
// answers 204 as RabbitMQ does for a flag already on, one naming a feature
// Warren lacks is refused with 400 rather than reported enabled, and an
// unknown name gets RabbitMQ 3.10's 400 "unsupported".
func (a *API) enableFeatureFlag(rq *request) error {
	name := rq.param("name")
	for _, f := range a.srv.FeatureFlags() {
		if f.Name != name {
			continue
		}
		if f.State != "enabled" {
			return errBadRequest(fmt.Sprintf("feature flag '%s' cannot be enabled: Warren does not have this feature yet", name))
		}
		rq.w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return errBadRequest("unsupported")
}

func (a *API) listNodes(rq *request) error {
	if nodes, ok := a.clusterNodes(rq); ok {
		writeJSON(rq.w, http.StatusOK, nodes)
		return nil
	}
	writeJSON(rq.w, http.StatusOK, []any{a.nodeJSON()})
	return nil
}

func (a *API) getNode(rq *request) error {
	name := rq.param("node")
	if name == a.srv.NodeName() {
		writeJSON(rq.w, http.StatusOK, a.nodeJSON())
		return nil
	}
	nodes, _ := a.clusterNodes(rq)
	for _, n := range nodes {
		if m, ok := n.(map[string]any); ok && m["name"] == name {
			writeJSON(rq.w, http.StatusOK, m)
			return nil
		}
	}
	return errNotFound
}

// nodeJSON describes this node. Erlang-only figures map to their Go
// equivalents: proc_* are OS threads and their limit, run_queue the
// runnable goroutines.
func (a *API) nodeJSON() map[string]any {
	n := a.srv.Node()
	rs := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}, {Name: "/sched/threads/total:threads"}}
	metrics.Read(rs)
	fdUsed := openDescriptors()
	fds := a.srv.Descriptors()
	diskFree := diskFree(n.DataDir)
	return map[string]any{
		"name": a.srv.NodeName(), "type": "disc", "running": true, "being_drained": false,
		"os_pid": strconv.Itoa(os.Getpid()), "uptime": processUptimeMillis(),
		"run_queue": metricValue(rs[0]), "processors": runtime.NumCPU(),
		"fd_used": fdUsed, "fd_total": fds.Limit, "sockets_used": fds.SocketsUsed, "sockets_total": fds.SocketsLimit,
		"proc_used": metricValue(rs[1]), "proc_total": a.maxThreads,
		"mem_used": n.MemoryUsed, "mem_limit": n.MemoryLimit, "mem_alarm": n.MemoryAlarm,
		"mem_calculation_strategy": "rss",
		"disk_free":                diskFree, "disk_free_limit": n.DiskFreeLimit, "disk_free_alarm": n.DiskAlarm,
		"partitions": []any{}, "rates_mode": "basic", "enabled_plugins": a.enabledPlugins(),
		"exchange_types": exchangeTypes, "auth_mechanisms": a.authMechanisms(), "applications": []any{},
		"contexts": a.contexts(false), "db_dir": n.DataDir, "config_files": []any{}, "log_files": []any{},
		"cluster_links": []any{}, "net_ticktime": 60,
	}
}

func metricValue(s metrics.Sample) uint64 {
	if s.Value.Kind() == metrics.KindUint64 {
		return s.Value.Uint64()
	}
	return 0
}

// aliveness answers RabbitMQ's deprecated aliveness test: the vhost exists
// and the user may use it.
func (a *API) aliveness(rq *request) error {
	if _, err := rq.vhost("vhost"); err != nil {
		return err
	}
	return a.healthOK(rq)
}
