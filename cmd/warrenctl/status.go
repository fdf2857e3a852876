package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func statusCommands() []*command { return []*command{status(), alarms(), health()} }

func status() *command {
	return &command{
		name: "status", summary: "show the broker: version, cluster, totals, message rates, listeners and each node's memory, disk and alarms",
		run: func(e *env, _ []string) error {
			overview, err := e.c.get(apiPath("overview"), nil)
			if err != nil {
				return err
			}
			// Node details need the monitoring tag; without them the overview
			// still answers the question, so a failure is reported, not fatal.
			nodes, nodesErr := e.c.get(apiPath("nodes"), nil)
			if nodesErr != nil {
				fmt.Fprintf(e.stderr, "warrenctl: node details unavailable: %v\n", nodesErr)
			}
			if e.g.format == "json" {
				out := map[string]json.RawMessage{"overview": overview}
				if nodesErr == nil {
					out["nodes"] = nodes
				}
				return e.printValue(out)
			}
			var ov map[string]any
			if err := decodeJSON(overview, &ov, "GET /api/overview"); err != nil {
				return err
			}
			var ns []map[string]any
			if nodesErr == nil {
				if err := decodeJSON(nodes, &ns, "GET /api/nodes"); err != nil {
					return err
				}
			}
			return writeStatus(e, ov, ns)
		},
	}
}

// writeStatus prints the overview and nodes as aligned "key: value" lines.
func writeStatus(e *env, ov map[string]any, nodes []map[string]any) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	product := cell(ov["product_name"])
	if product == "" {
		product = "RabbitMQ"
	}
	version := cell(ov["product_version"])
	if version == "" {
		version = cell(ov["rabbitmq_version"])
	}
	line("Product", product+" "+version)
	line("Cluster", cell(ov["cluster_name"]))
	line("Node", cell(ov["node"]))
	line("Objects", fields(ov, "object_totals", "connections", "channels", "exchanges", "queues", "consumers"))
	line("Messages", fields(ov, "queue_totals", "messages", "messages_ready", "messages_unacknowledged"))
	line("Rates (msg/s)", rates(ov))
	if ls, ok := ov["listeners"].([]any); ok {
		var parts []string
		for _, l := range ls {
			if m, ok := l.(map[string]any); ok {
				parts = append(parts, cell(m["protocol"])+" "+net.JoinHostPort(cell(m["ip_address"]), cell(m["port"])))
			}
		}
		line("Listeners", strings.Join(parts, ", "))
	}
	for _, n := range nodes {
		line("Node "+cell(n["name"]), nodeSummary(n))
	}
	return tw.Flush()
}

// fields renders named counters of a nested object as "a=1 b=2".
func fields(obj map[string]any, key string, names ...string) string {
	m, _ := obj[key].(map[string]any)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		v := cell(m[n])
		if v == "" {
			v = "0"
		}
		parts = append(parts, n+"="+v)
	}
	return strings.Join(parts, " ")
}

// rates renders the overview's message rates that have seen activity.
func rates(ov map[string]any) string {
	stats, _ := ov["message_stats"].(map[string]any)
	var parts []string
	for _, k := range []string{"publish", "confirm", "deliver_get", "redeliver", "ack", "return_unroutable", "drop_unroutable"} {
		if r := lookup(stats, k+"_details.rate"); r != nil {
			parts = append(parts, k+"="+cell(r))
		}
	}
	if len(parts) == 0 {
		return "no activity yet"
	}
	return strings.Join(parts, " ")
}

// nodeSummary is one line about a node's health.
func nodeSummary(n map[string]any) string {
	var parts []string
	if r, ok := n["running"].(bool); ok && !r {
		return "not running"
	}
	if up := number(n["uptime"]); up > 0 {
		parts = append(parts, "up "+(time.Duration(up)*time.Millisecond).Truncate(time.Second).String())
	}
	parts = append(parts, fmt.Sprintf("memory %s of %s", bytesText(n["mem_used"]), bytesText(n["mem_limit"])))
	parts = append(parts, fmt.Sprintf("disk free %s (limit %s)", bytesText(n["disk_free"]), bytesText(n["disk_free_limit"])))
	if n["fd_total"] != nil {
		parts = append(parts, fmt.Sprintf("file descriptors %s/%s", cell(n["fd_used"]), cell(n["fd_total"])))
	}
	var alarms []string
	if n["mem_alarm"] == true {
		alarms = append(alarms, "memory")
	}
	if n["disk_free_alarm"] == true {
		alarms = append(alarms, "disk")
	}
	if len(alarms) == 0 {
		parts = append(parts, "no alarms")
	} else {
		parts = append(parts, "ALARMS: "+strings.Join(alarms, ", "))
	}
	return strings.Join(parts, ", ")
}

// number reads a JSON number decoded with UseNumber, or 0.
func number(v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, _ := n.Float64()
	return int64(f)
}

// bytesText renders a byte count in binary units.
func bytesText(v any) string {
	if v == nil {
		return "?"
	}
	n := float64(number(v))
	for _, unit := range []string{"B", "KiB", "MiB", "GiB", "TiB"} {
		if n < 1024 || unit == "TiB" {
			return strconv.FormatFloat(n, 'f', 1, 64) + " " + unit
		}
		n /= 1024
	}
	return "?"
}

func alarms() *command {
	return &command{
		name: "alarms", summary: "show resource alarms in effect (exit status 3 when there are any)",
		run: func(e *env, _ []string) error { return e.healthCheck("alarms", true) },
	}
}

// healthChecks are what "health" runs without arguments.
var healthChecks = []string{"alarms", "local-alarms", "virtual-hosts"}

func health() *command {
	return &command{
		name: "health", synopsis: "[CHECK [ARG...]]",
		summary: "run management health checks (default: " + strings.Join(healthChecks, ", ") +
			"; others e.g. port-listener 5672, protocol-listener amqp091); exit status 3 when one fails",
		maxArgs: -1,
		run: func(e *env, a []string) error {
			if len(a) > 0 {
				return e.healthCheck(strings.Join(a, "/"), false)
			}
			var failed error
			for _, c := range healthChecks {
				if err := e.healthCheck(c, false); err != nil {
					if err != errUnhealthy {
						return err
					}
					failed = err
				}
			}
			return failed
		},
	}
}

// healthCheck runs GET /api/health/checks/<check>: 200 is healthy, 503 with
// {"status":"failed"} unhealthy (errUnhealthy); anything else is an error.
func (e *env) healthCheck(check string, alarmsView bool) error {
	segs := append([]string{"health", "checks"}, strings.Split(check, "/")...)
	path := apiPath(segs...)
	resp, err := e.c.send(request{method: http.MethodGet, path: path})
	if err != nil {
		return err
	}
	var result struct {
		Status string           `json:"status"`
		Reason string           `json:"reason"`
		Alarms []map[string]any `json:"alarms"`
	}
	if resp.status != http.StatusOK && resp.status != http.StatusServiceUnavailable {
		return newAPIError(http.MethodGet, path, resp)
	}
	if err := decodeJSON(resp.body, &result, "GET "+path); err != nil {
		return err
	}
	healthy := resp.status == http.StatusOK && result.Status == "ok"
	if e.g.format == "json" {
		if err := e.printJSON(resp.body); err != nil {
			return err
		}
	} else if err := writeHealth(e, check, healthy, result.Reason, result.Alarms, alarmsView); err != nil {
		return err
	}
	if !healthy {
		return errUnhealthy
	}
	return nil
}

func writeHealth(e *env, check string, healthy bool, reason string, alarms []map[string]any, alarmsView bool) error {
	var b strings.Builder
	switch {
	case alarmsView && healthy:
		b.WriteString("No alarms in effect\n")
	case alarmsView:
		b.WriteString("Alarms in effect:\n")
	case healthy:
		fmt.Fprintf(&b, "%-24s ok\n", check)
	default:
		fmt.Fprintf(&b, "%-24s FAILED: %s\n", check, reason)
	}
	for _, a := range alarms {
		fmt.Fprintf(&b, "  %s alarm on node %s\n", cell(a["resource"]), cell(a["node"]))
	}
	_, err := fmt.Fprint(e.stdout, b.String())
	return err
}
