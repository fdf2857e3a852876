package mgmt

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/warrenmq/warren/server"
)

// Connection and channel constants RabbitMQ clients compare exactly.
const (
	forcedCloseText  = "Closed via management plugin"
	reasonHeaderName = "X-Reason"
)

func (a *API) connectionJSON(c server.ConnDetail, q sampleQuery) map[string]any {
	host, port := server.SplitHostPort(c.Local)
	peerHost, peerPort := server.SplitHostPort(c.Peer)
	d := a.stats.connDetails(c.ID, q)
	m := map[string]any{
		"name": c.Name, "node": a.srv.NodeName(), "type": "network", "state": "running", "protocol": c.Protocol,
		"user": c.User, "user_who_performed_action": c.User, "vhost": c.Vhost,
		"host": host, "port": port, "peer_host": peerHost, "peer_port": peerPort,
		"ssl": false, "ssl_protocol": nil, "ssl_key_exchange": nil, "ssl_cipher": nil, "ssl_hash": nil,
		"peer_cert_subject": nil, "peer_cert_issuer": nil, "peer_cert_validity": nil,
		"timeout": int(c.Heartbeat.Seconds()), "frame_max": c.FrameMax, "channel_max": c.ChannelMax,
		"channels": c.Channels, "connected_at": c.ConnectedAt.UnixMilli(),
		"client_properties": tableJSON(c.ClientProperties),
		"recv_cnt":          c.RecvCnt, "send_pend": c.SendPending,
		"auth_mechanism": c.AuthMechanism,
	}
	if t := c.TLS; t != nil {
		m["ssl"], m["ssl_protocol"], m["ssl_key_exchange"], m["ssl_cipher"], m["ssl_hash"] = true, t.Protocol, t.KeyExchange, t.Cipher, t.Hash
		if t.PeerSubject != "" {
			m["peer_cert_subject"], m["peer_cert_issuer"], m["peer_cert_validity"] = t.PeerSubject, t.PeerIssuer, t.PeerValidity
		}
	}
	if name, ok := c.ClientProperties["connection_name"].(string); ok {
		m["user_provided_name"] = name
	}
	putStat(m, "recv_oct", c.RecvOct, d)
	putStat(m, "send_oct", c.SendOct, d)
	return m
}

// visibleConn reports whether the user sees a connection: monitoring users
// see all, others their own.
func (rq *request) visibleConn(user string) bool {
	return rq.tags.monitor || user == rq.user.Name
}

func (a *API) listConnections(rq *request) error {
	vhost, scoped := rq.params["vhost"]
	if scoped {
		if _, err := rq.vhost("vhost"); err != nil {
			return err
		}
	}
	var conns []server.ConnDetail
	for _, c := range a.srv.ConnectionDetails() {
		if rq.visibleConn(c.User) && (!scoped || c.Vhost == vhost) {
			conns = append(conns, c)
		}
	}
	sq := parseSampleQuery(rq)
	return list(rq, conns, lister[server.ConnDetail]{
		vhost:  func(c server.ConnDetail) string { return c.Vhost },
		name:   func(c server.ConnDetail) string { return c.Name },
		render: func(c server.ConnDetail) map[string]any { return a.connectionJSON(c, sq) },
	}, true)
}

// connection finds the {connection} the user may see.
func (rq *request) connection() (server.ConnDetail, error) {
	name := rq.param("connection")
	for _, c := range rq.a.srv.ConnectionDetails() {
		if c.Name != name {
			continue
		}
		if !rq.visibleConn(c.User) {
			return c, errNotAuthorised("User not authorised to access object")
		}
		return c, nil
	}
	return server.ConnDetail{}, errNotFound
}

func (a *API) getConnection(rq *request) error {
	c, err := rq.connection()
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, a.connectionJSON(c, parseSampleQuery(rq)))
	return nil
}

// deleteConnection closes a connection with 320 CONNECTION_FORCED and the
// X-Reason header's text, or RabbitMQ's default text.
func (a *API) deleteConnection(rq *request) error {
	c, err := rq.connection()
	if err != nil {
		return err
	}
	if !rq.tags.admin && c.User != rq.user.Name {
		return errNotAuthorised("User not authorised to access object")
	}
	reason := strings.TrimSpace(rq.r.Header.Get(reasonHeaderName))
	if reason == "" {
		reason = forcedCloseText
	}
	if err := a.srv.CloseConnectionNamed(c.Name, reason); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func channelName(c server.ChannelInfo) string {
	return fmt.Sprintf("%s (%d)", c.ConnName, c.Number)
}

func (a *API) channelJSON(c server.ChannelInfo, q sampleQuery) map[string]any {
	peerHost, peerPort := server.SplitHostPort(c.Peer)
	d := a.stats.channelDetails(chanKey{c.ConnID, c.Number}, q)
	m := map[string]any{
		"name": channelName(c), "number": c.Number, "node": a.srv.NodeName(), "user": c.User,
		"user_who_performed_action": c.User, "vhost": c.Vhost, "state": "running",
		"connection_details": map[string]any{"name": c.ConnName, "peer_host": peerHost, "peer_port": peerPort},
		"confirm":            c.Confirm, "transactional": c.Transactional,
		"prefetch_count": c.Prefetch, "global_prefetch_count": c.GlobalPrefetch, "consumer_count": c.Consumers,
		"messages_unacknowledged": c.Unacked, "messages_unconfirmed": c.Unconfirmed,
	}
	if ms := messageStats(channelMetrics, channelValues(c.Stats), d, [][]string{publishGroup, deliverGroup}); len(ms) > 0 {
		m["message_stats"] = ms
	}
	return m
}

func (a *API) visibleChannels(rq *request, keep func(server.ChannelInfo) bool) []server.ChannelInfo {
	var out []server.ChannelInfo
	for _, c := range a.srv.Channels() {
		if rq.visibleConn(c.User) && keep(c) {
			out = append(out, c)
		}
	}
	return out
}

func (a *API) writeChannels(rq *request, chs []server.ChannelInfo) error {
	sq := parseSampleQuery(rq)
	return list(rq, chs, lister[server.ChannelInfo]{
		vhost:  func(c server.ChannelInfo) string { return c.Vhost },
		name:   channelName,
		render: func(c server.ChannelInfo) map[string]any { return a.channelJSON(c, sq) },
	}, true)
}

func (a *API) listChannels(rq *request) error {
	vhost, scoped := rq.params["vhost"]
	if scoped {
		if _, err := rq.vhost("vhost"); err != nil {
			return err
		}
	}
	return a.writeChannels(rq, a.visibleChannels(rq, func(c server.ChannelInfo) bool { return !scoped || c.Vhost == vhost }))
}

func (a *API) listConnectionChannels(rq *request) error {
	c, err := rq.connection()
	if err != nil {
		return err
	}
	return a.writeChannels(rq, a.visibleChannels(rq, func(ch server.ChannelInfo) bool { return ch.ConnID == c.ID }))
}

func (a *API) getChannel(rq *request) error {
	name := rq.param("channel")
	for _, c := range a.srv.Channels() {
		if channelName(c) != name {
			continue
		}
		if !rq.visibleConn(c.User) {
			return errNotAuthorised("User not authorised to access object")
		}
		m := a.channelJSON(c, parseSampleQuery(rq))
		consumers := []map[string]any{}
		for _, cs := range a.srv.Consumers() {
			if cs.ConnID == c.ConnID && cs.Channel == c.Number {
				consumers = append(consumers, a.consumerJSON(cs))
			}
		}
		m["consumer_details"] = consumers
		m["publishes"] = []any{}
		m["deliveries"] = []any{}
		writeJSON(rq.w, http.StatusOK, m)
		return nil
	}
	return errNotFound
}

func (a *API) consumerJSON(c server.ConsumerInfo) map[string]any {
	peerHost, peerPort := server.SplitHostPort(c.Peer)
	status := "up"
	if c.SingleActiveWaiter {
		status = "waiting"
	}
	return map[string]any{
		"consumer_tag": c.Tag, "queue": map[string]any{"name": c.Queue, "vhost": c.Vhost},
		"channel_details": map[string]any{
			"connection_name": c.ConnName, "name": fmt.Sprintf("%s (%d)", c.ConnName, c.Channel), "node": a.srv.NodeName(),
			"number": c.Channel, "peer_host": peerHost, "peer_port": peerPort, "user": c.User,
		},
		"ack_required": c.AckRequired, "exclusive": c.Exclusive, "prefetch_count": c.Prefetch,
		"arguments": tableJSON(c.Arguments), "active": c.Active, "activity_status": status,
		"consumer_timeout": c.Timeout.Milliseconds(), "priority": c.Priority,
	}
}

func (a *API) listConsumers(rq *request) error {
	vhs, err := rq.scopeVhosts()
	if err != nil {
		return err
	}
	visible := make(map[string]bool, len(vhs))
	for _, vh := range vhs {
		visible[vh.Name()] = true
	}
	var out []server.ConsumerInfo
	for _, c := range a.srv.Consumers() {
		if visible[c.Vhost] {
			out = append(out, c)
		}
	}
	return list(rq, out, lister[server.ConsumerInfo]{render: a.consumerJSON}, false)
}
