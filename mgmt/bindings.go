package mgmt

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// propertiesKey identifies a binding between a source and a destination in
// URLs, as RabbitMQ builds it: "~" for an empty key without arguments, the
// quoted routing key when there are no arguments, and quotedKey~hash
// otherwise. Clients treat it as opaque; the hash is a stable digest of the
// canonical arguments (RabbitMQ's own uses Erlang's phash2).
func propertiesKey(key string, args amqp.Table) string {
	quoted := strings.ReplaceAll(url.QueryEscape(key), "~", "%7E")
	if len(args) == 0 {
		if key == "" {
			return "~"
		}
		return quoted
	}
	sum := sha256.Sum256(amqp.AppendTable(nil, args))
	return quoted + "~" + base64.RawURLEncoding.EncodeToString(sum[:4])
}

// matchProps reports whether a path's properties key names binding b. The
// router has unescaped the segment once; like RabbitMQ, the part before "~"
// is then unquoted once more and compared with the routing key, so both the
// properties_key ("q1.%23") and its Location form ("q1.%2523") work.
func matchProps(seg string, b server.BindingInfo) bool {
	want := propertiesKey(b.RoutingKey, b.Arguments)
	if seg == want {
		return true
	}
	key, hash, _ := strings.Cut(seg, "~")
	_, wantHash, _ := strings.Cut(want, "~")
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	return key == b.RoutingKey && hash == wantHash && (len(b.Arguments) == 0) == (hash == "")
}

func bindingJSON(b server.BindingInfo) map[string]any {
	return map[string]any{
		"source": b.Source, "vhost": b.Vhost, "destination": b.Destination, "destination_type": b.DestinationType,
		"routing_key": b.RoutingKey, "arguments": tableJSON(b.Arguments), "properties_key": propertiesKey(b.RoutingKey, b.Arguments),
	}
}

// writeBindings answers with a list of bindings in the order given (the
// server sorts them by source, destination and key).
func writeBindings(rq *request, bs []server.BindingInfo) {
	out := make([]map[string]any, 0, len(bs))
	for _, b := range bs {
		out = append(out, bindingJSON(b))
	}
	o, err := parseListOpts(rq, false)
	if err == nil && len(o.columns) > 0 {
		for i := range out {
			out[i] = selectColumns(out[i], o.columns)
		}
	}
	writeJSON(rq.w, http.StatusOK, out)
}

func (a *API) listBindings(rq *request) error {
	vhs, err := rq.scopeVhosts()
	if err != nil {
		return err
	}
	var all []server.BindingInfo
	for _, vh := range vhs {
		all = append(all, vh.Bindings()...)
	}
	return list(rq, all, lister[server.BindingInfo]{render: bindingJSON}, false)
}

// bindingEnds reads the {source} and {destination} of a binding path; the
// route knows whether the destination is a queue (q) or an exchange (e).
func (rq *request) bindingEnds(destType string) (source, dest string) {
	dest = rq.param("destination")
	if destType == server.DestExchange {
		dest = exchangeName(dest)
	}
	return exchangeName(rq.param("source")), dest
}

// between lists the bindings from source to one destination.
func between(vh *server.Vhost, source, destType, dest string) []server.BindingInfo {
	ex := vh.LookupExchange(source)
	if ex == nil {
		return nil
	}
	var out []server.BindingInfo
	for _, b := range ex.SourceBindings() {
		if b.DestinationType == destType && b.Destination == dest {
			out = append(out, b)
		}
	}
	return out
}

func (a *API) listBindingsBetween(destType string) handlerFunc {
	return func(rq *request) error {
		vh, err := rq.vhost("vhost")
		if err != nil {
			return err
		}
		source, dest := rq.bindingEnds(destType)
		writeBindings(rq, between(vh, source, destType, dest))
		return nil
	}
}

func (a *API) postBinding(destType string) handlerFunc {
	return func(rq *request) error { return a.bind(rq, destType) }
}

func (a *API) bind(rq *request, destType string) error {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	source, dest := rq.bindingEnds(destType)
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	bi := server.BindingInfo{Vhost: vh.Name(), Source: source, Destination: dest, DestinationType: destType}
	if bi.RoutingKey, err = b.str("routing_key"); err != nil {
		return err
	}
	if bi.Arguments, err = b.table("arguments"); err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessWrite, dest); err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessRead, source); err != nil {
		return err
	}
	if a.srv.AuthorizeTopic(rq.user.Name, vh.Name(), source, bi.RoutingKey, server.AccessRead) != nil {
		return errNotAuthorised("Access refused.")
	}
	if err := a.srv.Bind(bi); err != nil {
		return err
	}
	// A relative Location: rabbit-hole reads the second segment and
	// Terraform the last one as the binding's properties key.
	rq.w.Header().Set("Location", url.QueryEscape(dest)+"/"+url.QueryEscape(propertiesKey(bi.RoutingKey, bi.Arguments)))
	rq.w.WriteHeader(http.StatusCreated)
	return nil
}

// binding finds the binding a {props} path names.
func (rq *request) binding(destType string) (*server.Vhost, server.BindingInfo, error) {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return nil, server.BindingInfo{}, err
	}
	source, dest := rq.bindingEnds(destType)
	props := rq.param("props")
	for _, b := range between(vh, source, destType, dest) {
		if matchProps(props, b) {
			return vh, b, nil
		}
	}
	return nil, server.BindingInfo{}, errNotFound
}

func (a *API) getBinding(destType string) handlerFunc {
	return func(rq *request) error {
		_, b, err := rq.binding(destType)
		if err != nil {
			return err
		}
		writeJSON(rq.w, http.StatusOK, bindingJSON(b))
		return nil
	}
}

func (a *API) deleteBinding(destType string) handlerFunc {
	return func(rq *request) error { return a.unbind(rq, destType) }
}

func (a *API) unbind(rq *request, destType string) error {
	vh, b, err := rq.binding(destType)
	if err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessWrite, b.Destination); err != nil {
		return err
	}
	if err := rq.permit(vh.Name(), server.AccessRead, b.Source); err != nil {
		return err
	}
	if a.srv.AuthorizeTopic(rq.user.Name, vh.Name(), b.Source, b.RoutingKey, server.AccessRead) != nil {
		return errNotAuthorised("Access refused.")
	}
	if err := a.srv.Unbind(b); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}
