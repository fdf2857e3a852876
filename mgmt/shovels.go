package mgmt

import (
	"net/http"
)

// Shovels is what the management API needs of the shovel runner: its
// status and a restart. An interface, so mgmt does not import the shovel
// package (cmd/warren wires them).
type Shovels interface {
	// ShovelStatus returns each shovel's status as RabbitMQ's
	// rabbit_shovel_mgmt shows it (node, timestamp, name, vhost, type,
	// state, the URIs without credentials, ...), sorted by vhost and name.
	ShovelStatus() []map[string]any
	// RestartShovel restarts a shovel; false if there is none of that name.
	RestartShovel(vhost, name string) bool
}

// shovelRoutes are rabbitmq_shovel_management's endpoints. Like the
// plugin, reading is for every management user (of the vhost); deleting
// and restarting change a parameter, which is for policymakers.
func (a *API) shovelRoutes(t *routeTable) {
	t.handle(get, "shovels", authMgmt, a.listShovels)
	t.handle(get, "shovels/{vhost}", authMgmt, a.listShovels)
	t.handle(get, "shovels/vhost/{vhost}/{name}", authMgmt, a.listShovels)
	t.handle(del, "shovels/vhost/{vhost}/{name}", authPolicymaker, a.deleteShovel)
	t.handle(del, "shovels/vhost/{vhost}/{name}/restart", authPolicymaker, a.restartShovel)
}

// shovelComponent is the runtime parameter component of dynamic shovels.
const shovelComponent = "shovel"

func (a *API) listShovels(rq *request) error {
	vhs, err := rq.scopeVhosts()
	if err != nil {
		return err
	}
	visible := make(map[string]bool, len(vhs))
	for _, vh := range vhs {
		visible[vh.Name()] = true
	}
	name, one := rq.params["name"]
	out := []map[string]any{}
	if a.cfg.Shovels != nil {
		for _, st := range a.cfg.Shovels.ShovelStatus() {
			if visible[st["vhost"].(string)] && (!one || st["name"] == name) {
				out = append(out, st)
			}
		}
	}
	if one && len(out) == 0 {
		return errNotFound
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

// deleteShovel deletes the shovel's parameter, which stops it.
func (a *API) deleteShovel(rq *request) error {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	if err := a.srv.DeleteParameter(shovelComponent, vh.Name(), rq.param("name")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) restartShovel(rq *request) error {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	if a.cfg.Shovels == nil || !a.cfg.Shovels.RestartShovel(vh.Name(), rq.param("name")) {
		return errNotFound
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}
