package mgmt

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// exchangeName maps the path alias amq.default to the default exchange "".
func exchangeName(s string) string {
	if s == "amq.default" {
		return ""
	}
	return s
}

func (a *API) exchangeJSON(ex *server.Exchange, q sampleQuery) map[string]any {
	info := ex.Info()
	m := map[string]any{
		"name": info.Name, "vhost": info.Vhost, "type": info.Type, "durable": info.Durable,
		"auto_delete": info.AutoDelete, "internal": info.Internal, "arguments": tableJSON(info.Arguments),
	}
	if info.Policy != "" {
		m["policy"] = info.Policy
	}
	if ex.IsDelayed() {
		// As the delayed-message plugin's info/2 adds it to its exchanges.
		m["messages_delayed"] = ex.MessagesDelayed()
	}
	d := a.stats.exchangeDetails(ex, q)
	if ms := messageStats(exchangeMetrics, []uint64{info.PublishIn, info.PublishOut}, d, [][]string{exchangeGroup}); len(ms) > 0 {
		m["message_stats"] = ms
	}
	return m
}

type exchangeRef struct {
	ex          *server.Exchange
	vhost, name string
}

func (a *API) listExchanges(rq *request) error {
	vhs, err := rq.scopeVhosts()
	if err != nil {
		return err
	}
	var refs []exchangeRef
	for _, vh := range vhs {
		for _, ex := range vh.Exchanges() {
			refs = append(refs, exchangeRef{ex, vh.Name(), ex.Name()})
		}
	}
	sq := parseSampleQuery(rq)
	return list(rq, refs, lister[exchangeRef]{
		vhost:  func(r exchangeRef) string { return r.vhost },
		name:   func(r exchangeRef) string { return r.name },
		render: func(r exchangeRef) map[string]any { return a.exchangeJSON(r.ex, sq) },
	}, true)
}

// exchange finds the {exchange} of the {vhost} the user may use.
func (rq *request) exchange() (*server.Vhost, *server.Exchange, error) {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return nil, nil, err
	}
	ex := vh.LookupExchange(exchangeName(rq.param("exchange")))
	if ex == nil {
		return nil, nil, errNotFound
	}
	return vh, ex, nil
}

func (a *API) getExchange(rq *request) error {
	_, ex, err := rq.exchange()
	if err != nil {
		return err
	}
	m := a.exchangeJSON(ex, parseSampleQuery(rq))
	m["incoming"] = []any{}
	m["outgoing"] = []any{}
	writeJSON(rq.w, http.StatusOK, m)
	return nil
}

func (a *API) putExchange(rq *request) error {
	vhost, name := rq.param("vhost"), exchangeName(rq.param("exchange"))
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
	spec := server.ExchangeSpec{Name: name}
	if spec.Type, err = b.str("type"); err != nil {
		return err
	}
	if spec.Type == "" {
		// RabbitMQ 3.10 declares a direct exchange when type is left out.
		spec.Type = "direct"
	}
	if spec.Durable, err = b.boolean("durable", true); err != nil {
		return err
	}
	if spec.AutoDelete, err = b.boolean("auto_delete", false); err != nil {
		return err
	}
	if spec.Internal, err = b.boolean("internal", false); err != nil {
		return err
	}
	if spec.Arguments, err = b.table("arguments"); err != nil {
		return err
	}
	if err := rq.permit(vhost, server.AccessConfigure, name); err != nil {
		return err
	}
	created, err := a.srv.DeclareExchange(vhost, spec)
	if err != nil {
		return err
	}
	return writeCreated(rq, created)
}

func (a *API) deleteExchange(rq *request) error {
	vh, ex, err := rq.exchange()
	if err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessConfigure, ex.Name()); err != nil {
		return err
	}
	if err := a.srv.DeleteExchange(vh.Name(), ex.Name(), rq.query.Get("if-unused") == "true"); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listExchangeSourceBindings(rq *request) error {
	_, ex, err := rq.exchange()
	if err != nil {
		return err
	}
	writeBindings(rq, ex.SourceBindings())
	return nil
}

func (a *API) listExchangeDestinationBindings(rq *request) error {
	_, ex, err := rq.exchange()
	if err != nil {
		return err
	}
	writeBindings(rq, ex.DestinationBindings())
	return nil
}

// publish implements POST /api/exchanges/{vhost}/{exchange}/publish: the
// message is published as mandatory and the reply says whether it routed.
func (a *API) publish(rq *request) error {
	vh, ex, err := rq.exchange()
	if err != nil {
		return err
	}
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	for _, k := range []string{"properties", "routing_key", "payload", "payload_encoding"} {
		if !b.has(k) {
			return errBadRequest(fmt.Sprintf("[{missing_key,%s}]", k))
		}
	}
	var p server.Publishing
	p.Exchange = ex.Name()
	if p.RoutingKey, err = b.str("routing_key"); err != nil {
		return err
	}
	payload, err := b.str("payload")
	if err != nil {
		return err
	}
	switch enc, _ := b.str("payload_encoding"); enc {
	case "string":
		p.Body = []byte(payload)
	case "base64":
		if p.Body, err = base64.StdEncoding.DecodeString(payload); err != nil {
			return errBadRequest("payload is not valid base64")
		}
	default:
		return errBadRequest("payload_encoding must be string or base64")
	}
	props, ok := m["properties"].(map[string]any)
	if !ok {
		return errBadRequest("properties must be an object")
	}
	if p.Properties, err = parseProperties(props); err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessWrite, ex.Name()); err != nil {
		return err
	}
	// RabbitMQ publishes over a channel as the user, so a channel error
	// comes back as a 400 naming its code.
	if ae := a.srv.AuthorizeTopic(rq.user.Name, vh.Name(), ex.Name(), p.RoutingKey, server.AccessWrite); ae != nil {
		return channelError(ae)
	}
	if p.Properties.Flags&amqp.FlagUserID != 0 {
		if ae := a.srv.CheckUserID(rq.user.Name, p.Properties.UserID); ae != nil {
			return channelError(ae)
		}
	}
	routed, err := a.srv.Publish(vh.Name(), p)
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{"routed": routed})
	return nil
}

// parseProperties reads message properties in the management API's form.
func parseProperties(m map[string]any) (amqp.Properties, error) {
	var p amqp.Properties
	b := body(m)
	strs := []struct {
		key  string
		flag uint16
		dst  *string
	}{
		{"content_type", amqp.FlagContentType, &p.ContentType},
		{"content_encoding", amqp.FlagContentEncoding, &p.ContentEncoding},
		{"correlation_id", amqp.FlagCorrelationID, &p.CorrelationID},
		{"reply_to", amqp.FlagReplyTo, &p.ReplyTo},
		{"expiration", amqp.FlagExpiration, &p.Expiration},
		{"message_id", amqp.FlagMessageID, &p.MessageID},
		{"type", amqp.FlagType, &p.Type},
		{"user_id", amqp.FlagUserID, &p.UserID},
		{"app_id", amqp.FlagAppID, &p.AppID},
		{"cluster_id", amqp.FlagClusterID, &p.ClusterID},
	}
	for _, s := range strs {
		if !b.has(s.key) {
			continue
		}
		v, err := b.str(s.key)
		if err != nil {
			// RabbitMQ accepts numbers for string properties such as expiration.
			n, nerr := b.integer(s.key, 0)
			if nerr != nil {
				return p, err
			}
			v = strconv.FormatInt(n, 10)
		}
		*s.dst = v
		p.Flags |= s.flag
	}
	for _, f := range []struct {
		key  string
		flag uint16
		dst  *uint8
	}{{"delivery_mode", amqp.FlagDeliveryMode, &p.DeliveryMode}, {"priority", amqp.FlagPriority, &p.Priority}} {
		if !b.has(f.key) {
			continue
		}
		n, err := b.integer(f.key, 0)
		if err != nil || n < 0 || n > 255 {
			return p, errBadRequest(f.key + " must be an integer from 0 to 255")
		}
		*f.dst = uint8(n)
		p.Flags |= f.flag
	}
	if b.has("timestamp") {
		n, err := b.integer("timestamp", 0)
		if err != nil || n < 0 {
			return p, errBadRequest("timestamp must be a non-negative integer")
		}
		p.Timestamp = uint64(n)
		p.Flags |= amqp.FlagTimestamp
	}
	if b.has("headers") {
		h, err := b.table("headers")
		if err != nil {
			return p, err
		}
		p.Headers = h
		p.Flags |= amqp.FlagHeaders
	}
	return p, nil
}
