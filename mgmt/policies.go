package mgmt

import (
	"net/http"

	"github.com/warrenmq/warren/server"
)

func policyJSON(p server.Policy) map[string]any {
	return map[string]any{
		"vhost": p.Vhost, "name": p.Name, "pattern": p.Pattern, "apply-to": p.ApplyTo,
		"definition": definitionJSON(p.Definition), "priority": p.Priority,
	}
}

func (a *API) listPolicies(operator bool) handlerFunc {
	return func(rq *request) error {
		vhs, err := rq.scopeVhosts()
		if err != nil {
			return err
		}
		var out []server.Policy
		for _, vh := range vhs {
			out = append(out, a.srv.Policies(vh.Name(), operator)...)
		}
		return list(rq, out, lister[server.Policy]{
			vhost:  func(p server.Policy) string { return p.Vhost },
			name:   func(p server.Policy) string { return p.Name },
			render: policyJSON,
		}, false)
	}
}

func (a *API) getPolicy(operator bool) handlerFunc {
	return func(rq *request) error {
		vh, err := rq.vhost("vhost")
		if err != nil {
			return err
		}
		p, err := a.srv.GetPolicy(vh.Name(), rq.param("name"), operator)
		if err != nil {
			return err
		}
		writeJSON(rq.w, http.StatusOK, policyJSON(p))
		return nil
	}
}

// parsePolicy reads a policy body: pattern and definition are required,
// priority defaults to 0 and apply-to to all.
func parsePolicy(m map[string]any, vhost, name string) (server.Policy, error) {
	b := body(m)
	p := server.Policy{Vhost: vhost, Name: name, ApplyTo: server.ApplyToAll}
	var err error
	if !b.has("pattern") {
		return p, errBadRequest("Validation failed\n\nKey \"pattern\" not found in policy\n")
	}
	if p.Pattern, err = b.str("pattern"); err != nil {
		return p, err
	}
	def, ok := m["definition"].(map[string]any)
	if !ok {
		return p, errBadRequest("Validation failed\n\nKey \"definition\" not found in policy or not an object\n")
	}
	p.Definition = def
	if p.Priority, err = b.integer("priority", 0); err != nil {
		return p, err
	}
	if b.has("apply-to") {
		if p.ApplyTo, err = b.str("apply-to"); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (a *API) putPolicy(operator bool) handlerFunc {
	return func(rq *request) error {
		vh, err := rq.vhost("vhost")
		if err != nil {
			return err
		}
		raw, err := rq.readBody()
		if err != nil {
			return err
		}
		m, err := decodeObject(raw, "not_json")
		if err != nil {
			return err
		}
		p, err := parsePolicy(m, vh.Name(), rq.param("name"))
		if err != nil {
			return err
		}
		created, err := a.srv.PutPolicy(p, operator)
		if err != nil {
			return err
		}
		return writeCreated(rq, created)
	}
}

func (a *API) deletePolicy(operator bool) handlerFunc {
	return func(rq *request) error {
		vh, err := rq.vhost("vhost")
		if err != nil {
			return err
		}
		if err := a.srv.DeletePolicy(vh.Name(), rq.param("name"), operator); err != nil {
			return err
		}
		rq.w.WriteHeader(http.StatusNoContent)
		return nil
	}
}
