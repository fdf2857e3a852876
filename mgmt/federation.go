package mgmt

import "net/http"

// Federation is what the management API needs of the federation runner:
// its links' status and a restart. An interface, so mgmt does not import
// the federation package.
type Federation interface {
	// Links returns each link's status as rabbit_federation_mgmt shows it
	// (node, vhost, id, upstream, type, exchange or queue, status, error,
	// uri, local_connection, timestamp), sorted.
	Links() []map[string]any
	// RestartLink restarts the link of that id; false if there is none.
	RestartLink(vhost, id string) bool
}

// federationRoutes are rabbitmq_federation_management's endpoints.
func (a *API) federationRoutes(t *routeTable) {
	t.handle(get, "federation-links", authMonitor, a.listFederationLinks(false))
	t.handle(get, "federation-links/{vhost}", authMonitor, a.listFederationLinks(false))
	t.handle(get, "federation-links/state/down", authMonitor, a.listFederationLinks(true))
	t.handle(get, "federation-links/{vhost}/state/down", authMonitor, a.listFederationLinks(true))
	t.handle(del, "federation-links/vhost/{vhost}/{id}/{node}/restart", authPolicymaker, a.restartFederationLink)
}

// listFederationLinks lists the links of the visible vhosts (or of one);
// down lists only those not running.
func (a *API) listFederationLinks(down bool) func(rq *request) error {
	return func(rq *request) error {
		vhs, err := rq.scopeVhosts()
		if err != nil {
			return err
		}
		visible := make(map[string]bool, len(vhs))
		for _, vh := range vhs {
			visible[vh.Name()] = true
		}
		out := []map[string]any{}
		if a.cfg.Federation != nil {
			for _, st := range a.cfg.Federation.Links() {
				if vh, _ := st["vhost"].(string); visible[vh] && (!down || st["status"] != "running") {
					out = append(out, st)
				}
			}
		}
		writeJSON(rq.w, http.StatusOK, out)
		return nil
	}
}

func (a *API) restartFederationLink(rq *request) error {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	if rq.param("node") != a.srv.NodeName() || a.cfg.Federation == nil ||
		!a.cfg.Federation.RestartLink(vh.Name(), rq.param("id")) {
		return errNotFound
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// enabledPlugins is the node's plugin list: the management plugin, and
// the shovel and federation ones when their runners are wired in.
func (a *API) enabledPlugins() []string {
	out := []string{"rabbitmq_management"}
	if a.cfg.Federation != nil {
		out = append(out, "rabbitmq_federation", "rabbitmq_federation_management")
	}
	if a.cfg.Shovels != nil {
		out = append(out, "rabbitmq_shovel", "rabbitmq_shovel_management")
	}
	return out
}
