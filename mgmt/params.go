package mgmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/warrenmq/warren/server"
)

// Runtime parameters, global parameters, vhost limits and user limits, as
// RabbitMQ's rabbit_mgmt_wm_parameter(s), _global_parameter(s), _limit(s)
// and _user_limit(s). Validation is the server's (server/paramcheck.go);
// these handlers add RabbitMQ's HTTP quirks: the parameter endpoints
// HTML-escape the reason, the limit endpoints do not.

func (a *API) paramRoutes(t *routeTable) {
	// RabbitMQ's is_authorized_policies and is_authorized_global_parameters
	// both ask for policymaker.
	t.handle(get, "parameters", authPolicymaker, a.listParameters)
	t.handle(get, "parameters/{component}", authPolicymaker, a.listParameters)
	t.handle(get, "parameters/{component}/{vhost}", authPolicymaker, a.listParameters)
	t.handle(get, "parameters/{component}/{vhost}/{name}", authPolicymaker, a.getParameter)
	t.handle(put, "parameters/{component}/{vhost}/{name}", authPolicymaker, a.putParameter)
	t.handle(del, "parameters/{component}/{vhost}/{name}", authPolicymaker, a.deleteParameter)
	t.handle(get, "global-parameters", authPolicymaker, a.listGlobalParameters)
	t.handle(get, "global-parameters/{name}", authPolicymaker, a.getGlobalParameter)
	t.handle(put, "global-parameters/{name}", authPolicymaker, a.putGlobalParameter)
	t.handle(del, "global-parameters/{name}", authPolicymaker, a.deleteGlobalParameter)

	// Reading limits is for every management user (is_authorized_vhost_visible),
	// changing them for administrators.
	t.handle(get, "vhost-limits", authMgmt, a.listVhostLimits)
	t.handle(get, "vhost-limits/{vhost}", authMgmt, a.listVhostLimits)
	t.handle(put, "vhost-limits/{vhost}/{name}", authAdmin, a.putVhostLimit)
	t.handle(del, "vhost-limits/{vhost}/{name}", authAdmin, a.deleteVhostLimit)
	t.handle(get, "user-limits", authMgmt, a.listUserLimits)
	t.handle(get, "user-limits/{user}", authMgmt, a.listUserLimits)
	t.handle(put, "user-limits/{user}/{name}", authAdmin, a.putUserLimit)
	t.handle(del, "user-limits/{user}/{name}", authAdmin, a.deleteUserLimit)
}

func parameterJSON(p server.Parameter) map[string]any {
	return map[string]any{"vhost": p.Vhost, "component": p.Component, "name": p.Name, "value": p.Value}
}

func (a *API) listParameters(rq *request) error {
	component := rq.param("component")
	vhs, err := rq.scopeVhosts()
	if err != nil {
		return err
	}
	if _, one := rq.params["vhost"]; !one && rq.tags.admin {
		// RabbitMQ's filter_vhost: administrators see every vhost.
		vhs = a.srv.Vhosts()
	}
	visible := make(map[string]bool, len(vhs))
	for _, vh := range vhs {
		visible[vh.Name()] = true
	}
	out := []map[string]any{}
	for _, p := range a.srv.Parameters() {
		if visible[p.Vhost] && (component == "" || p.Component == component) {
			out = append(out, parameterJSON(p))
		}
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

func (a *API) getParameter(rq *request) error {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	p, err := a.srv.GetParameter(rq.param("component"), vh.Name(), rq.param("name"))
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, parameterJSON(p))
	return nil
}

// readValue reads a body's "value", answering RabbitMQ's 400s for a body
// that is not JSON or has no value.
func (rq *request) readValue() (any, error) {
	raw, err := rq.readBody()
	if err != nil {
		return nil, err
	}
	m, err := decodeObject(raw, "not_json")
	if err != nil {
		return nil, err
	}
	if _, ok := m["value"]; !ok {
		return nil, errBadRequest("[{key_missing,value}]")
	}
	// Decoded again keeping integers beyond int64 exact, as RabbitMQ's
	// bignums: a value is stored and validated as it was sent.
	var exact map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&exact); err != nil {
		return nil, errBadRequest("not_json")
	}
	return exactNumbers(exact["value"]), nil
}

// exactNumbers is fromJSON but for integers beyond int64, which stay
// json.Number (the server reads them as the integers they are).
func exactNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if _, err := v.Int64(); err != nil && !strings.ContainsAny(v.String(), ".eE") {
			return v
		}
		return fromJSON(v)
	case []any:
		for i := range v {
			v[i] = exactNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = exactNumbers(v[k])
		}
	}
	return v
}

func (a *API) putParameter(rq *request) error {
	if a.srv.Vhost(rq.param("vhost")) == nil {
		return errVhostNotFound
	}
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	v, err := rq.readValue()
	if err != nil {
		return err
	}
	p := server.Parameter{Component: rq.param("component"), Vhost: vh.Name(), Name: rq.param("name"), Value: v}
	created, err := a.srv.PutParameter(p, rq.user.Name)
	if err != nil {
		return escapedParameterError(err)
	}
	return writeCreated(rq, created)
}

// escapedParameterError HTML-escapes a validation reason as RabbitMQ's
// parameter endpoints do (rabbit_mgmt_format:escape_html_tags).
func escapedParameterError(err error) error {
	var pe *server.ParameterError
	if errors.As(err, &pe) {
		return errBadRequest(escapeHTMLTags(pe.Reason))
	}
	return err
}

var htmlTags = strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;")

func escapeHTMLTags(s string) string { return htmlTags.Replace(s) }

func (a *API) deleteParameter(rq *request) error {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	if err := a.srv.DeleteParameter(rq.param("component"), vh.Name(), rq.param("name")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func globalJSON(p server.Parameter) map[string]any {
	return map[string]any{"name": p.Name, "value": p.Value}
}

func (a *API) listGlobalParameters(rq *request) error {
	out := []map[string]any{}
	for _, p := range a.srv.GlobalParameters() {
		out = append(out, globalJSON(p))
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

func (a *API) getGlobalParameter(rq *request) error {
	p, err := a.srv.GetGlobalParameter(rq.param("name"))
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, globalJSON(p))
	return nil
}

func (a *API) putGlobalParameter(rq *request) error {
	v, err := rq.readValue()
	if err != nil {
		return err
	}
	created, err := a.srv.PutGlobalParameter(rq.param("name"), v)
	if err != nil {
		return err
	}
	return writeCreated(rq, created)
}

func (a *API) deleteGlobalParameter(rq *request) error {
	if err := a.srv.DeleteGlobalParameter(rq.param("name")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}
