package mgmt

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// queueBasicJSON renders a queue without statistics, for disable_stats
// requests; enable_queue_totals adds the message counts.
func (a *API) queueBasicJSON(q *server.Queue, totals bool) map[string]any {
	info := q.Info()
	m := map[string]any{
		"name": info.Name, "vhost": info.Vhost, "durable": info.Durable, "auto_delete": info.AutoDelete,
		"exclusive": info.Exclusive, "arguments": tableJSON(info.Arguments), "node": q.HomeNode(a.srv.NodeName()), "type": "classic",
	}
	if t, ok := info.Arguments["x-queue-type"].(string); ok && t != "" {
		m["type"] = t
	}
	if totals {
		m["messages"], m["messages_ready"], m["messages_unacknowledged"] = info.Ready+info.Unacked, info.Ready, info.Unacked
	}
	putStreamJSON(m, q)
	putQuorumJSON(m, info)
	return m
}

// putQuorumJSON adds a quorum queue's replicas in RabbitMQ's fields:
// leader (the node field names it too), members and online. Other queues
// are left alone.
func putQuorumJSON(m map[string]any, info server.QueueInfo) {
	if info.Leader == "" {
		return
	}
	if info.Mirrored {
		// A mirrored classic queue, in RabbitMQ's classic fields.
		m["node"] = info.Leader
		slaves := []string{}
		for _, n := range info.Members {
			if n != info.Leader {
				slaves = append(slaves, n)
			}
		}
		m["slave_nodes"], m["synchronised_slave_nodes"] = slaves, info.SyncedMirrors
		return
	}
	m["leader"], m["node"] = info.Leader, info.Leader
	m["members"], m["online"] = info.Members, info.Online
	if info.Online == nil {
		m["online"] = []string{}
	}
	m["messages_dlx"], m["message_bytes_dlx"] = info.DLXMessages, info.DLXBytes
	if info.DeadLetterStrategy != "" {
		m["dead_letter_strategy"] = info.DeadLetterStrategy // Warren's: the effective one
	}
}

// putStreamJSON adds a stream queue's log figures and consumer offsets, as
// LavinMQ and RabbitMQ's stream plugin show them: first_offset, last_offset
// (the newest committed offset; null while nothing is committed),
// next_offset, segments, bytes and stream_consumers. Other queues are left alone.
func putStreamJSON(m map[string]any, q *server.Queue) {
	si, ok := q.StreamInfo()
	if !ok {
		return
	}
	m["type"] = "stream"
	m["first_offset"], m["next_offset"] = si.FirstOffset, si.NextOffset
	m["last_offset"] = nil
	if si.Committed {
		m["last_offset"] = si.LastOffset
	}
	m["segments"], m["bytes"] = si.Segments, si.Bytes
	// Effective retention (policy over argument, as RabbitMQ applies them).
	m["max_length_bytes"], m["max_age_seconds"] = si.MaxLengthBytes, int64(si.MaxAge/time.Second)
	m["segment_size_bytes"], m["tracking_names"] = si.SegmentSize, si.TrackingNames
	consumers := make([]map[string]any, 0, len(si.Consumers))
	for _, c := range si.Consumers {
		consumers = append(consumers, map[string]any{
			"consumer_tag": c.Tag, "offset": c.Offset, "in_flight": c.InFlight,
			"tracking_name":   nullIfEmpty(c.TrackingName),
			"channel_details": map[string]any{"connection_name": c.ConnName, "number": c.Channel},
		})
	}
	m["stream_consumers"] = consumers
}

// queueJSON renders a queue snapshot with its rates.
func (a *API) queueJSON(q *server.Queue, q0 sampleQuery) map[string]any {
	st := q.Status()
	d := a.stats.queueDetails(q, q0)
	m := map[string]any{
		"name": st.Name, "vhost": st.Vhost, "type": st.Type, "durable": st.Durable, "auto_delete": st.AutoDelete,
		"exclusive": st.Exclusive, "arguments": tableJSON(st.Arguments), "node": q.HomeNode(a.srv.NodeName()), "state": "running",
		"consumers": st.Consumers, "consumer_capacity": st.ConsumerCapacity, "consumer_utilisation": st.ConsumerCapacity,
		"message_bytes_ready": st.ReadyBytes, "messages_ready_ram": st.InMemory, "messages_paged_out": st.OnDisk,
		"message_bytes": st.ReadyBytes + st.UnackedBytes, "message_bytes_unacknowledged": st.UnackedBytes,
		"message_bytes_ram": st.InMemoryBytes, "message_bytes_paged_out": st.ReadyBytes + st.UnackedBytes - st.InMemoryBytes,
		"messages_ram": st.InMemory + st.Unacked, "messages_unacknowledged_ram": st.Unacked,
		"messages_persistent": st.Persistent, "message_bytes_persistent": st.PersistentBytes, "memory": st.Memory,
		"policy": nullIfEmpty(st.Policy), "operator_policy": nullIfEmpty(st.OperatorPolicy),
		"effective_policy_definition": definitionJSON(st.EffectivePolicy),
		"exclusive_consumer_tag":      nullIfEmpty(st.ExclusiveConsumerTag),
		"single_active_consumer_tag":  nullIfEmpty(st.SingleActiveConsumerTag),
		"head_message_timestamp":      nil,
	}
	if st.HasHeadTimestamp {
		m["head_message_timestamp"] = st.HeadTimestamp
	}
	putStat(m, "messages", st.Ready+st.Unacked, d)
	putStat(m, "messages_ready", st.Ready, d)
	putStat(m, "messages_unacknowledged", st.Unacked, d)
	if !st.IdleSince.IsZero() {
		m["idle_since"] = formatTime(st.IdleSince)
	}
	if st.Owner != "" {
		host, port := server.SplitHostPort(connPeer(st.Owner))
		m["owner_pid_details"] = map[string]any{"name": st.Owner, "peer_host": host, "peer_port": port}
	}
	vals := queueValues(st.QueueInfo)
	if ms := messageStats(queueMetrics, vals, d, [][]string{queuePubGroup, queueDelGroup}); len(ms) > 0 {
		m["message_stats"] = ms
	}
	putStreamJSON(m, q)
	putQuorumJSON(m, st.QueueInfo)
	if _, ha := st.EffectivePolicy["ha-mode"]; ha && !st.Mirrored && st.Type == "classic" {
		// An ha policy on a standalone node, or on a queue it cannot
		// mirror (exclusive, non-durable, declared before the policy):
		// one copy, and the API says so.
		m["slave_nodes"], m["synchronised_slave_nodes"] = []string{}, []string{}
	}
	return m
}

// connPeer extracts the peer address from a connection name "peer -> local".
func connPeer(name string) string {
	peer, _, _ := strings.Cut(name, " -> ")
	return peer
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// formatTime renders a time as RabbitMQ's idle_since: UTC with milliseconds.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000+00:00")
}

func definitionJSON(def map[string]any) map[string]any {
	if def == nil {
		return map[string]any{}
	}
	return def
}

// queueRef is a queue with its cheap sort fields.
type queueRef struct {
	q           *server.Queue
	vhost, name string
}

func (a *API) listQueues(rq *request) error {
	vhs, err := rq.scopeVhosts()
	if err != nil {
		return err
	}
	var refs []queueRef
	for _, vh := range vhs {
		for _, q := range vh.Queues() {
			refs = append(refs, queueRef{q, vh.Name(), q.Name()})
		}
	}
	sq := parseSampleQuery(rq)
	render := func(r queueRef) map[string]any { return a.queueJSON(r.q, sq) }
	if rq.query.Get("disable_stats") == "true" {
		totals := rq.query.Get("enable_queue_totals") == "true"
		render = func(r queueRef) map[string]any { return a.queueBasicJSON(r.q, totals) }
	}
	return list(rq, refs, lister[queueRef]{
		vhost:  func(r queueRef) string { return r.vhost },
		name:   func(r queueRef) string { return r.name },
		render: render,
	}, true)
}

// queue finds the {queue} of the {vhost} the user may use.
func (rq *request) queue() (*server.Vhost, *server.Queue, error) {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return nil, nil, err
	}
	q := vh.LookupQueue(rq.param("queue"))
	if q == nil {
		return nil, nil, errNotFound
	}
	return vh, q, nil
}

func (a *API) getQueue(rq *request) error {
	_, q, err := rq.queue()
	if err != nil {
		return err
	}
	m := a.queueJSON(q, parseSampleQuery(rq))
	consumers := []map[string]any{}
	for _, c := range q.Consumers() {
		consumers = append(consumers, a.consumerJSON(c))
	}
	m["consumer_details"] = consumers
	m["incoming"] = []any{}
	m["deliveries"] = []any{}
	writeJSON(rq.w, http.StatusOK, m)
	return nil
}

func (a *API) putQueue(rq *request) error {
	vhost, name := rq.param("vhost"), rq.param("queue")
	if a.srv.Vhost(vhost) == nil {
		return errVhostNotFound
	}
	if _, err := rq.vhost("vhost"); err != nil {
		return err
	}
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	spec := server.QueueSpec{Name: name}
	if spec.Durable, err = b.boolean("durable", true); err != nil {
		return err
	}
	if spec.AutoDelete, err = b.boolean("auto_delete", false); err != nil {
		return err
	}
	if spec.Arguments, err = b.table("arguments"); err != nil {
		return err
	}
	if err := rq.permit(vhost, server.AccessConfigure, name); err != nil {
		return err
	}
	created, err := a.srv.DeclareQueue(vhost, spec)
	if err != nil {
		return err
	}
	return writeCreated(rq, created)
}

func (a *API) deleteQueue(rq *request) error {
	vh, q, err := rq.queue()
	if err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessConfigure, q.Name()); err != nil {
		return err
	}
	ifUnused := rq.query.Get("if-unused") == "true"
	ifEmpty := rq.query.Get("if-empty") == "true"
	if err := a.srv.DeleteQueue(vh.Name(), q.Name(), ifUnused, ifEmpty); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) purgeQueue(rq *request) error {
	vh, q, err := rq.queue()
	if err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessRead, q.Name()); err != nil {
		return err
	}
	if _, err := a.srv.PurgeQueue(vh.Name(), q.Name()); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// queueAction answers POST /api/queues/{vhost}/{queue}/actions. RabbitMQ
// 3.10 starts or cancels a mirror synchronisation and answers 204 at once,
// whatever the queue's type. A Warren mirror always catches up on its own
// as soon as it is added (ha-sync-mode manual is served as automatic, see
// README), so there is no synchronisation to start or cancel and the
// answer is the same 204. A missing queue is a 404 (3.10 crashes with an
// empty 500; later releases answer 404).
func (a *API) queueAction(rq *request) error {
	if _, _, err := rq.queue(); err != nil {
		return err
	}
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	action, ok := m["action"]
	if !ok {
		return errBadRequest("[{key_missing,action}]")
	}
	switch action {
	case "sync", "cancel_sync":
		rq.w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return errBadRequest(fmt.Sprintf("{unknown,%s}", erlangTerm(action)))
}

// erlangTerm prints a decoded JSON value as Erlang's ~p prints what
// RabbitMQ decoded it to: strings as binaries, numbers and atoms bare.
func erlangTerm(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("<<%q>>", v)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func (a *API) listQueueBindings(rq *request) error {
	_, q, err := rq.queue()
	if err != nil {
		return err
	}
	writeBindings(rq, q.Bindings())
	return nil
}

// ackModes maps the get endpoint's ackmode values to server get modes.
var ackModes = map[string]server.GetMode{
	"ack_requeue_true":     server.GetAckRequeue,
	"ack_requeue_false":    server.GetAck,
	"reject_requeue_true":  server.GetRejectRequeue,
	"reject_requeue_false": server.GetReject,
}

func (a *API) getMessages(rq *request) error {
	vh, q, err := rq.queue()
	if err != nil {
		return err
	}
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	count, err := b.integer("count", 1)
	if err != nil {
		return err
	}
	modeName, err := b.str("ackmode")
	if err != nil {
		return err
	}
	mode, ok := ackModes[modeName]
	if !ok {
		return errBadRequest("ackmode must be one of ack_requeue_true, ack_requeue_false, reject_requeue_true, reject_requeue_false")
	}
	encoding, err := b.str("encoding")
	if err != nil {
		return err
	}
	if encoding == "" {
		encoding = "auto"
	}
	if encoding != "auto" && encoding != "base64" {
		return errBadRequest("encoding must be auto or base64")
	}
	truncate, err := b.integer("truncate", -1)
	if err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessRead, q.Name()); err != nil {
		return err
	}
	msgs, err := a.srv.GetMessages(vh.Name(), q.Name(), int(count), mode)
	var refused *amqp.Error
	if errors.As(err, &refused) && refused.Code == amqp.NotImplemented {
		// A queue type without basic.get (a stream): RabbitMQ answers 400
		// with the channel error's code and text.
		return errBadRequest(fmt.Sprintf("%d %s", refused.Code, refused.Text))
	}
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(msgs))
	for _, msg := range msgs {
		out = append(out, gotMessageJSON(msg, encoding, truncate))
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

// gotMessageJSON renders a fetched message: the payload as a string when
// encoding is auto and it is valid UTF-8, base64 otherwise; truncate (when
// not negative) cuts the payload, not payload_bytes.
func gotMessageJSON(msg server.GotMessage, encoding string, truncate int64) map[string]any {
	body := msg.Body
	if truncate >= 0 && int64(len(body)) > truncate {
		body = body[:truncate]
	}
	payload, enc := string(body), "string"
	if encoding == "base64" || !utf8.Valid(body) {
		payload, enc = base64.StdEncoding.EncodeToString(body), "base64"
	}
	return map[string]any{
		"payload_bytes": len(msg.Body), "redelivered": msg.Redelivered, "exchange": msg.Exchange,
		"routing_key": msg.RoutingKey, "message_count": msg.MessageCount,
		"properties": propertiesJSON(&msg.Properties), "payload": payload, "payload_encoding": enc,
	}
}

// propertiesJSON renders the basic properties that are present.
func propertiesJSON(p *amqp.Properties) map[string]any {
	m := map[string]any{}
	set := func(flag uint16, key string, v any) {
		if p.Flags&flag != 0 {
			m[key] = v
		}
	}
	set(amqp.FlagContentType, "content_type", p.ContentType)
	set(amqp.FlagContentEncoding, "content_encoding", p.ContentEncoding)
	set(amqp.FlagHeaders, "headers", tableJSON(p.Headers))
	set(amqp.FlagDeliveryMode, "delivery_mode", p.DeliveryMode)
	set(amqp.FlagPriority, "priority", p.Priority)
	set(amqp.FlagCorrelationID, "correlation_id", p.CorrelationID)
	set(amqp.FlagReplyTo, "reply_to", p.ReplyTo)
	set(amqp.FlagExpiration, "expiration", p.Expiration)
	set(amqp.FlagMessageID, "message_id", p.MessageID)
	set(amqp.FlagTimestamp, "timestamp", p.Timestamp)
	set(amqp.FlagType, "type", p.Type)
	set(amqp.FlagUserID, "user_id", p.UserID)
	set(amqp.FlagAppID, "app_id", p.AppID)
	set(amqp.FlagClusterID, "cluster_id", p.ClusterID)
	return m
}
