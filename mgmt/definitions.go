package mgmt

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/warrenmq/warren/server"
)

// operatorPolicyComponent is the runtime-parameter component under which
// definitions files carry operator policies.
const operatorPolicyComponent = "operator_policy"

// definitionsJSON is a definitions file in RabbitMQ's key order. Pointer
// fields are left out of the per-vhost export.
type definitionsJSON struct {
	RabbitVersion    string            `json:"rabbit_version"`
	RabbitMQVersion  string            `json:"rabbitmq_version,omitempty"`
	ProductName      string            `json:"product_name,omitempty"`
	ProductVersion   string            `json:"product_version,omitempty"`
	Users            *[]map[string]any `json:"users,omitempty"`
	Vhosts           *[]map[string]any `json:"vhosts,omitempty"`
	Permissions      *[]map[string]any `json:"permissions,omitempty"`
	TopicPermissions *[]map[string]any `json:"topic_permissions,omitempty"`
	Parameters       []map[string]any  `json:"parameters"`
	GlobalParameters *[]map[string]any `json:"global_parameters,omitempty"`
	Policies         []map[string]any  `json:"policies"`
	Queues           []map[string]any  `json:"queues"`
	Exchanges        []map[string]any  `json:"exchanges"`
	Bindings         []map[string]any  `json:"bindings"`
}

func (a *API) getDefinitions(rq *request) error {
	vhost := rq.param("vhost")
	if vhost != "" && a.srv.Vhost(vhost) == nil {
		return errNotFound
	}
	d, err := a.srv.ExportDefinitions(vhost)
	if err != nil {
		return err
	}
	out := a.definitionsToJSON(d, vhost != "")
	if name := rq.query.Get("download"); name != "" {
		rq.w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

func (a *API) definitionsToJSON(d server.Definitions, perVhost bool) definitionsJSON {
	out := definitionsJSON{RabbitVersion: RabbitMQVersion}
	if !perVhost {
		out.RabbitMQVersion, out.ProductName, out.ProductVersion = RabbitMQVersion, a.cfg.ProductName, a.srv.Node().ProductVersion
		users, vhosts, perms, topics, globals := []map[string]any{}, []map[string]any{}, []map[string]any{}, []map[string]any{}, []map[string]any{}
		for _, u := range d.Users {
			tags := u.Tags
			if tags == nil {
				tags = []string{}
			}
			users = append(users, map[string]any{"name": u.Name, "password_hash": u.PasswordHash,
				"hashing_algorithm": u.HashingAlgorithm, "tags": tags, "limits": orEmpty(u.Limits)})
		}
		for _, v := range d.Vhosts {
			m := map[string]any{"name": v.Name}
			if v.Description != "" || len(v.Tags) > 0 || v.DefaultQueueType != "" {
				m["description"], m["tags"] = v.Description, v.Tags
				md := map[string]any{"description": v.Description, "tags": v.Tags}
				if v.DefaultQueueType != "" {
					// As 4.0 exports it: beside the metadata and in it.
					m["default_queue_type"], md["default_queue_type"] = v.DefaultQueueType, v.DefaultQueueType
				}
				m["metadata"] = md
			}
			vhosts = append(vhosts, m)
		}
		for _, p := range d.Permissions {
			perms = append(perms, permissionJSON(p))
		}
		for _, tp := range d.TopicPermissions {
			topics = append(topics, topicPermissionJSON(tp))
		}
		for _, g := range d.GlobalParameters {
			globals = append(globals, map[string]any{"name": g.Name, "value": g.Value})
		}
		out.Users, out.Vhosts, out.Permissions, out.TopicPermissions, out.GlobalParameters = &users, &vhosts, &perms, &topics, &globals
	}
	out.Parameters = []map[string]any{}
	for _, p := range d.OperatorPolicies {
		out.Parameters = append(out.Parameters, map[string]any{"vhost": p.Vhost, "component": operatorPolicyComponent, "name": p.Name,
			"value": map[string]any{"pattern": p.Pattern, "definition": definitionJSON(p.Definition), "priority": p.Priority, "apply-to": p.ApplyTo}})
	}
	for _, p := range d.Parameters {
		out.Parameters = append(out.Parameters, map[string]any{"vhost": p.Vhost, "component": p.Component, "name": p.Name, "value": p.Value})
	}
	out.Policies = []map[string]any{}
	for _, p := range d.Policies {
		out.Policies = append(out.Policies, policyJSON(p))
	}
	out.Queues, out.Exchanges, out.Bindings = []map[string]any{}, []map[string]any{}, []map[string]any{}
	for _, q := range d.Queues {
		m := map[string]any{"name": q.Name, "vhost": q.Vhost, "durable": q.Durable, "auto_delete": q.AutoDelete, "arguments": tableJSON(q.Arguments)}
		out.Queues = append(out.Queues, dropVhost(m, perVhost))
	}
	for _, x := range d.Exchanges {
		m := map[string]any{"name": x.Name, "vhost": x.Vhost, "type": x.Type, "durable": x.Durable,
			"auto_delete": x.AutoDelete, "internal": x.Internal, "arguments": tableJSON(x.Arguments)}
		out.Exchanges = append(out.Exchanges, dropVhost(m, perVhost))
	}
	for _, b := range d.Bindings {
		m := map[string]any{"source": b.Source, "vhost": b.Vhost, "destination": b.Destination,
			"destination_type": b.DestinationType, "routing_key": b.RoutingKey, "arguments": tableJSON(b.Arguments)}
		out.Bindings = append(out.Bindings, dropVhost(m, perVhost))
	}
	return out
}

// dropVhost removes the vhost key in a per-vhost export, as RabbitMQ does
// for queues, exchanges and bindings.
func dropVhost(m map[string]any, perVhost bool) map[string]any {
	if perVhost {
		delete(m, "vhost")
	}
	return m
}

// postDefinitions imports a definitions file sent as JSON. RabbitMQ also
// takes the "file" field of a multipart form (its web UI's upload); Warren
// does not, as a cross-site form can send one (jsonOrNoBody). The whole
// file is validated before anything is applied.
func (a *API) postDefinitions(rq *request) error {
	vhost := rq.param("vhost")
	if vhost != "" && a.srv.Vhost(vhost) == nil {
		return errNotFound
	}
	raw, err := rq.readBody()
	if err != nil {
		return err
	}
	m, err := decodeObject(raw, "failed_to_parse_json")
	if err != nil {
		return err
	}
	d, err := parseDefinitions(m)
	if err != nil {
		return errBadRequest(err.Error())
	}
	if err := a.srv.ImportDefinitions(d, vhost); err != nil {
		return escapedParameterError(err) // RabbitMQ escapes a refused parameter here too
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// defError names the object of a definitions file that could not be read.
func defError(section string, i int, err error) error {
	var he *httpError
	if errors.As(err, &he) {
		return fmt.Errorf("%s[%d]: %s", section, i, he.body.Reason)
	}
	return fmt.Errorf("%s[%d]: %w", section, i, err)
}

// objects returns a section of the file as a list of objects.
func objects(m map[string]any, section string) ([]body, error) {
	v, ok := m[section]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an array", section)
	}
	out := make([]body, len(list))
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d] must be an object", section, i)
		}
		out[i] = body(obj)
	}
	return out, nil
}

// strs reads several string fields of an object at once.
func (b body) strs(keys ...string) ([]string, error) {
	out := make([]string, len(keys))
	for i, k := range keys {
		s, err := b.str(k)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// DecodeDefinitions reads a RabbitMQ definitions file (3.10 through 4.x
// exports) as POST /api/definitions does, for callers that import a file
// themselves: warren's load-definitions at boot. The error names the
// section and entry that could not be read.
func DecodeDefinitions(raw []byte) (server.Definitions, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return server.Definitions{}, fmt.Errorf("not valid JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return server.Definitions{}, errors.New("not a JSON object")
	}
	d, err := parseDefinitions(m)
	var he *httpError
	if errors.As(err, &he) {
		return d, errors.New(he.body.Reason)
	}
	return d, err
}

// parseDefinitions reads a RabbitMQ 3.x definitions file.
func parseDefinitions(m map[string]any) (server.Definitions, error) {
	var d server.Definitions
	steps := []func(map[string]any, *server.Definitions) error{
		parseUsersSection, parseVhostsSection, parsePermissionSections, parseParameterSections,
		parsePoliciesSection, parseQueuesSection, parseExchangesSection, parseBindingsSection,
	}
	for _, step := range steps {
		if err := step(m, &d); err != nil {
			return d, err
		}
	}
	return d, nil
}

func parseUsersSection(m map[string]any, d *server.Definitions) error {
	users, err := objects(m, "users")
	if err != nil {
		return err
	}
	for i, u := range users {
		f, err := u.strs("name", "password_hash", "hashing_algorithm")
		if err != nil {
			return defError("users", i, err)
		}
		def := server.UserDefinition{Name: f[0], PasswordHash: f[1], HashingAlgorithm: f[2]}
		if u.has("password") && !u.has("password_hash") {
			p, err := u.str("password")
			if err != nil {
				return defError("users", i, err)
			}
			def.PasswordHash = server.HashPassword(p)
		}
		if def.Tags, err = u.tags("tags"); err != nil {
			return defError("users", i, err)
		}
		if l, ok := u["limits"]; ok && l != nil {
			if def.Limits, ok = l.(map[string]any); !ok {
				return defError("users", i, errors.New("limits must be an object"))
			}
		}
		d.Users = append(d.Users, def)
	}
	return nil
}

func parseVhostsSection(m map[string]any, d *server.Definitions) error {
	vhosts, err := objects(m, "vhosts")
	if err != nil {
		return err
	}
	for i, v := range vhosts {
		def := server.VhostDefinition{}
		if def.Name, err = v.str("name"); err != nil {
			return defError("vhosts", i, err)
		}
		src := v
		if md, ok := v["metadata"].(map[string]any); ok && !v.has("description") {
			src = body(md)
		}
		if def.Description, err = src.str("description"); err != nil {
			return defError("vhosts", i, err)
		}
		if def.Tags, err = src.tags("tags"); err != nil {
			return defError("vhosts", i, err)
		}
		// 3.13 and later export it in metadata only, 3.11 and 3.12 beside it.
		dqt, ok := v["default_queue_type"].(string)
		if !ok {
			dqt, _ = src["default_queue_type"].(string)
		}
		if dqt != "undefined" {
			def.DefaultQueueType = dqt
		}
		d.Vhosts = append(d.Vhosts, def)
	}
	return nil
}

func parsePermissionSections(m map[string]any, d *server.Definitions) error {
	perms, err := objects(m, "permissions")
	if err != nil {
		return err
	}
	for i, p := range perms {
		f, err := p.strs("user", "vhost", "configure", "write", "read")
		if err != nil {
			return defError("permissions", i, err)
		}
		d.Permissions = append(d.Permissions, server.PermissionInfo{User: f[0], Vhost: f[1],
			Permission: server.Permission{Configure: f[2], Write: f[3], Read: f[4]}})
	}
	topics, err := objects(m, "topic_permissions")
	if err != nil {
		return err
	}
	for i, tp := range topics {
		f, err := tp.strs("user", "vhost", "exchange", "write", "read")
		if err != nil {
			return defError("topic_permissions", i, err)
		}
		d.TopicPermissions = append(d.TopicPermissions, server.TopicPermission{User: f[0], Vhost: f[1], Exchange: f[2], Write: f[3], Read: f[4]})
	}
	return nil
}

func parseParameterSections(m map[string]any, d *server.Definitions) error {
	params, err := objects(m, "parameters")
	if err != nil {
		return err
	}
	for i, p := range params {
		f, err := p.strs("component", "vhost", "name")
		if err != nil {
			return defError("parameters", i, err)
		}
		if f[0] != operatorPolicyComponent {
			d.Parameters = append(d.Parameters, server.Parameter{Component: f[0], Vhost: f[1], Name: f[2], Value: p["value"]})
			continue
		}
		value, ok := p["value"].(map[string]any)
		if !ok {
			return defError("parameters", i, errors.New("an operator policy's value must be an object"))
		}
		pol, err := parsePolicy(value, f[1], f[2])
		if err != nil {
			return defError("parameters", i, err)
		}
		d.OperatorPolicies = append(d.OperatorPolicies, pol)
	}
	globals, err := objects(m, "global_parameters")
	if err != nil {
		return err
	}
	for i, g := range globals {
		name, err := g.str("name")
		if err != nil || name == "" {
			return defError("global_parameters", i, errors.New("name must be a non-empty string"))
		}
		d.GlobalParameters = append(d.GlobalParameters, server.Parameter{Name: name, Value: g["value"]})
	}
	return nil
}

func parsePoliciesSection(m map[string]any, d *server.Definitions) error {
	policies, err := objects(m, "policies")
	if err != nil {
		return err
	}
	for i, p := range policies {
		f, err := p.strs("vhost", "name")
		if err != nil {
			return defError("policies", i, err)
		}
		pol, err := parsePolicy(p, f[0], f[1])
		if err != nil {
			return defError("policies", i, err)
		}
		d.Policies = append(d.Policies, pol)
	}
	return nil
}

func parseQueuesSection(m map[string]any, d *server.Definitions) error {
	queues, err := objects(m, "queues")
	if err != nil {
		return err
	}
	for i, q := range queues {
		f, err := q.strs("name", "vhost")
		if err != nil {
			return defError("queues", i, err)
		}
		def := server.QueueDefinition{Vhost: f[1], QueueSpec: server.QueueSpec{Name: f[0]}}
		if def.Durable, err = q.boolean("durable", true); err != nil {
			return defError("queues", i, err)
		}
		if def.AutoDelete, err = q.boolean("auto_delete", false); err != nil {
			return defError("queues", i, err)
		}
		if def.Arguments, err = q.table("arguments"); err != nil {
			return defError("queues", i, err)
		}
		d.Queues = append(d.Queues, def)
	}
	return nil
}

func parseExchangesSection(m map[string]any, d *server.Definitions) error {
	exchanges, err := objects(m, "exchanges")
	if err != nil {
		return err
	}
	for i, x := range exchanges {
		f, err := x.strs("name", "vhost", "type")
		if err != nil {
			return defError("exchanges", i, err)
		}
		def := server.ExchangeDefinition{Vhost: f[1], ExchangeSpec: server.ExchangeSpec{Name: f[0], Type: f[2]}}
		if def.Durable, err = x.boolean("durable", true); err != nil {
			return defError("exchanges", i, err)
		}
		if def.AutoDelete, err = x.boolean("auto_delete", false); err != nil {
			return defError("exchanges", i, err)
		}
		if def.Internal, err = x.boolean("internal", false); err != nil {
			return defError("exchanges", i, err)
		}
		if def.Arguments, err = x.table("arguments"); err != nil {
			return defError("exchanges", i, err)
		}
		d.Exchanges = append(d.Exchanges, def)
	}
	return nil
}

func parseBindingsSection(m map[string]any, d *server.Definitions) error {
	bindings, err := objects(m, "bindings")
	if err != nil {
		return err
	}
	for i, b := range bindings {
		f, err := b.strs("source", "vhost", "destination", "destination_type", "routing_key")
		if err != nil {
			return defError("bindings", i, err)
		}
		def := server.BindingInfo{Source: f[0], Vhost: f[1], Destination: f[2], DestinationType: strings.ToLower(f[3]), RoutingKey: f[4]}
		if def.Arguments, err = b.table("arguments"); err != nil {
			return defError("bindings", i, err)
		}
		d.Bindings = append(d.Bindings, def)
	}
	return nil
}
