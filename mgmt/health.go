package mgmt

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/server"
)

// healthOK answers the checks that cannot fail on a running single node.
func (a *API) healthOK(rq *request) error {
	writeJSON(rq.w, http.StatusOK, map[string]any{"status": "ok"})
	return nil
}

func (a *API) healthSingleNode(rq *request) error {
	writeJSON(rq.w, http.StatusOK, map[string]any{"status": "ok", "reason": "single node cluster"})
	return nil
}

// healthQuorumCritical fails, as 3.10's node-is-quorum-critical, when a
// quorum queue with a member here would lose its majority if this node
// stopped.
func (a *API) healthQuorumCritical(rq *request) error {
	if !a.srv.Clustered() {
		return a.healthSingleNode(rq)
	}
	if qs := a.srv.QuorumCritical(); len(qs) > 0 {
		return healthFailed(rq, map[string]any{
			"reason": "There are quorum queues that would lose their quorum if the target node is shut down",
			"queues": criticalQueuesJSON(qs)})
	}
	return a.healthOK(rq)
}

// healthMirrorSyncCritical fails, as 3.10's node-is-mirror-sync-critical,
// when a mirrored classic queue led here has no synchronised mirror online.
func (a *API) healthMirrorSyncCritical(rq *request) error {
	if !a.srv.Clustered() {
		return a.healthSingleNode(rq)
	}
	if qs := a.srv.MirrorSyncCritical(); len(qs) > 0 {
		return healthFailed(rq, map[string]any{
			"reason": "There are classic mirrored queues without online synchronised mirrors",
			"queues": criticalQueuesJSON(qs)})
	}
	return a.healthOK(rq)
}

// criticalQueuesJSON is 3.10's *_for_cli list: readable_name, name,
// virtual_host and type of each queue.
func criticalQueuesJSON(qs []server.ReplicatedQueue) []any {
	out := make([]any, 0, len(qs))
	for _, q := range qs {
		out = append(out, map[string]any{"readable_name": "queue '" + q.Name + "' in vhost '" + q.Vhost + "'",
			"name": q.Name, "virtual_host": q.Vhost, "type": q.Type})
	}
	return out
}

// healthAlarms is alarms (the cluster's, as gossip last told them) or,
// with local, local-alarms (this node's), with 3.10's reasons.
func (a *API) healthAlarms(local bool) handlerFunc {
	reason := "There are alarms in effect in the cluster"
	if local {
		reason = "There are alarms in effect on the node"
	}
	return func(rq *request) error {
		var alarms []map[string]any
		for _, al := range a.srv.ResourceAlarms(local) {
			alarms = append(alarms, map[string]any{"node": al.Node, "resource": al.Resource})
		}
		if len(alarms) == 0 {
			return a.healthOK(rq)
		}
		return healthFailed(rq, map[string]any{"reason": reason, "alarms": alarms})
	}
}

func (a *API) listenerPorts() []int {
	var ports []int
	for _, l := range a.listeners() {
		ports = append(ports, l["port"].(int))
	}
	return ports
}

func (a *API) healthPortListener(rq *request) error {
	port, err := strconv.Atoi(rq.param("port"))
	if err != nil {
		return errBadRequest("Invalid port") // 3.10's text
	}
	ports := a.listenerPorts()
	for _, p := range ports {
		if p == port {
			writeJSON(rq.w, http.StatusOK, map[string]any{"status": "ok", "port": port})
			return nil
		}
	}
	writeJSON(rq.w, http.StatusServiceUnavailable, map[string]any{
		"status": "failed", "reason": "No active listener", "missing": port, "ports": ports,
	})
	return nil
}

// protocolAliases are the names protocol-listener accepts for a listener
// protocol, as 3.10's normalize_protocol/1 maps them (any other name is
// looked for as it is, lowercased).
var protocolAliases = func() map[string]string {
	m := map[string]string{"amqps": "amqp/ssl", "https": "https", "cli": "clustering", "distribution": "clustering"}
	for to, names := range map[string]string{
		"amqp":           "amqp091 amqp0.9.1 amqp0-9-1 amqp0_9_1 amqp10 amqp1.0 amqp1-0 amqp1_0",
		"mqtt":           "mqtt3.1 mqtt3.1.1 mqtt31 mqtt311 mqtt3_1 mqtt3_1_1",
		"mqtt/ssl":       "mqtts mqtt+tls mqtt+ssl",
		"stomp":          "stomp1.0 stomp1.1 stomp1.2 stomp10 stomp11 stomp12 stomp1_0 stomp1_1 stomp1_2",
		"stomp/ssl":      "stomps stomp+tls stomp+ssl",
		"http":           "http1 http1.1 http_api management management_ui ui",
		"http/web-mqtt":  "webmqtt web-mqtt web_mqtt",
		"https/web-mqtt": "webmqtt/tls web-mqtt/tls webmqtt/ssl web-mqtt/ssl webmqtt+tls web-mqtt+tls webmqtt+ssl web-mqtt+ssl",
		"http/web-stomp": "webstomp web-stomp web_stomp",
		"https/web-stomp": "webstomp/tls web-stomp/tls webstomp/ssl web-stomp/ssl webstomp+tls web-stomp+tls " +
			"webstomp+ssl web-stomp+ssl",
	} {
		for _, n := range strings.Fields(names) {
			m[n] = to
		}
	}
	return m
}()

func (a *API) healthProtocolListener(rq *request) error {
	name := strings.ToLower(rq.param("protocol"))
	if to, ok := protocolAliases[name]; ok {
		name = to
	}
	protocols := []string{}
	for _, l := range a.listeners() {
		protocols = append(protocols, l["protocol"].(string))
		if l["protocol"] == name {
			writeJSON(rq.w, http.StatusOK, map[string]any{"status": "ok", "protocol": name})
			return nil
		}
	}
	return healthFailed(rq, map[string]any{"reason": "No active listener", "missing": name, "protocols": protocols})
}

// healthFailed answers a failed check: 503 with RabbitMQ's body.
func healthFailed(rq *request, body map[string]any) error {
	body["status"] = "failed"
	writeJSON(rq.w, http.StatusServiceUnavailable, body)
	return nil
}

// healthInService fails while the node is not serving clients (before
// Start, or once Close has begun).
func (a *API) healthInService(rq *request) error {
	if !a.srv.Health().Serving {
		return healthFailed(rq, map[string]any{"reason": "this rabbit node is not currently available to serve"})
	}
	return a.healthOK(rq)
}

// healthBelowConnectionLimit fails once the node's admitted sockets reach
// its max-connections.
func (a *API) healthBelowConnectionLimit(rq *request) error {
	h := a.srv.Health()
	if h.ConnectionLimit > 0 && h.Connections >= h.ConnectionLimit {
		a.log.Warn("node connection limit is reached", "connections", h.Connections, "limit", h.ConnectionLimit)
		return healthFailed(rq, map[string]any{"reason": "node connection limit is reached"})
	}
	return a.healthOK(rq)
}

// healthReadyToServeClients combines is-in-service, an AMQP listener and
// the connection limit, as RabbitMQ 4's composite check does.
func (a *API) healthReadyToServeClients(rq *request) error {
	h := a.srv.Health()
	switch {
	case !h.Serving:
		return healthFailed(rq, map[string]any{"reason": "the rabbit node is not currently available to serve"})
	case a.srv.Node().AMQPAddr == "" && a.srv.AMQPSAddr() == nil:
		return healthFailed(rq, map[string]any{"reason": "no active listeners for AMQP/AMQPS"})
	case h.ConnectionLimit > 0 && h.Connections >= h.ConnectionLimit:
		a.log.Warn("node connection limit is reached", "connections", h.Connections, "limit", h.ConnectionLimit)
		return healthFailed(rq, map[string]any{"reason": "node connection limit is reached", "connections": h.Connections})
	}
	return a.healthOK(rq)
}

// healthVirtualHosts fails while a vhost's message store refuses writes.
func (a *API) healthVirtualHosts(rq *request) error {
	if down := a.srv.Health().VhostsDown; len(down) > 0 {
		return healthFailed(rq, map[string]any{"reason": "Some virtual hosts are down", "virtual-hosts": down})
	}
	return a.healthOK(rq)
}

// expirationUnits are the units RabbitMQ's certificate-expiration check
// takes, in seconds (a month is a twelfth of 365 days, as there).
var expirationUnits = map[string]float64{"days": 86400, "weeks": 7 * 86400, "months": 365 * 86400 / 12.0, "years": 365 * 86400}

// healthCertificateExpiration fails when a certificate file of a TLS
// listener holds a certificate expiring within the given time, or cannot
// be read.
func (a *API) healthCertificateExpiration(rq *request) error {
	within, err := strconv.Atoi(rq.param("within"))
	if err != nil {
		return errBadRequest("Invalid expiration value.")
	}
	perUnit, ok := expirationUnits[strings.ToLower(rq.param("unit"))]
	if !ok {
		return errBadRequest("Time unit not recognised. Supported units: days, weeks, months, years.")
	}
	deadline := time.Now().Add(time.Duration(float64(within) * perUnit * float64(time.Second)))
	var expired []any
	for _, l := range certListeners(a.srv.CertificateFiles()) {
		entry := map[string]any{"node": a.srv.NodeName(), "protocol": l.protocol, "interface": l.host, "port": l.port,
			"certfile": "", "cacertfile": "", "certfile_expires_on": []any{}, "cacertfile_expires_on": []any{}}
		hit := false
		for _, f := range l.files {
			entry[f.Role] = f.Path
			var on []any
			if f.Err != nil {
				on = append(on, map[string]any{"error": f.Err.Error()})
			}
			for _, e := range f.Expiry {
				if e.Before(deadline) {
					on = append(on, e.UTC().Format("2006-01-02T15:04:05Z"))
				}
			}
			if len(on) > 0 {
				entry[f.Role+"_expires_on"] = on
				hit = true
			}
		}
		if hit {
			expired = append(expired, entry)
		}
	}
	if len(expired) > 0 {
		return healthFailed(rq, map[string]any{"reason": "Certificates expiring", "expired": expired})
	}
	return a.healthOK(rq)
}

// certListener is one TLS listener with its certificate files.
type certListener struct {
	protocol, host string
	port           int
	files          []server.CertificateFile
}

// certListeners groups certificate files by listener, in order.
func certListeners(files []server.CertificateFile) []*certListener {
	var out []*certListener
	byAddr := map[string]*certListener{}
	for _, f := range files {
		l := byAddr[f.Addr]
		if l == nil {
			host, port := server.SplitHostPort(f.Addr)
			if host == "" {
				host = "::"
			}
			l = &certListener{protocol: f.Listener, host: host, port: port}
			byAddr[f.Addr] = l
			out = append(out, l)
		}
		l.files = append(l.files, f)
	}
	return out
}
