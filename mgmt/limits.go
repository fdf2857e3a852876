package mgmt

import (
	"errors"
	"net/http"

	"github.com/warrenmq/warren/server"
)

// Vhost and user limits (/api/vhost-limits, /api/user-limits), routed in
// params.go. A vhost's limits are its vhost-limits runtime parameter; a
// user's are kept on the user.

func (a *API) listVhostLimits(rq *request) error {
	vhs, err := rq.scopeVhosts()
	if err != nil {
		return err
	}
	if _, one := rq.params["vhost"]; !one && rq.tags.monitor {
		// RabbitMQ's list_visible_vhosts: monitors see every vhost.
		vhs = a.srv.Vhosts()
	}
	out := []map[string]any{}
	for _, vh := range vhs {
		limits, err := a.srv.VhostLimits(vh.Name())
		if err != nil {
			return err
		}
		if len(limits) > 0 {
			out = append(out, map[string]any{"vhost": vh.Name(), "value": limits})
		}
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

func (a *API) putVhostLimit(rq *request) error {
	if a.srv.Vhost(rq.param("vhost")) == nil {
		return errVhostNotFound
	}
	v, err := rq.readValue()
	if err != nil {
		return err
	}
	if err := a.srv.SetVhostLimit(rq.param("vhost"), rq.param("name"), v); err != nil {
		return unescapedParameterError(err)
	}
	rq.w.WriteHeader(http.StatusNoContent) // RabbitMQ answers 204 for a new limit too
	return nil
}

// unescapedParameterError answers a validation failure with its reason as
// it is: the limit endpoints do not HTML-escape (rabbit_mgmt_wm_limit).
func unescapedParameterError(err error) error {
	var pe *server.ParameterError
	if errors.As(err, &pe) {
		return errBadRequest(pe.Reason)
	}
	return err
}

func (a *API) deleteVhostLimit(rq *request) error {
	vh, err := rq.vhost("vhost")
	if err != nil {
		return err
	}
	if err := a.srv.ClearVhostLimit(vh.Name(), rq.param("name")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// userLimitsJSON renders a user's limits ({} when none).
func userLimitsJSON(limits map[string]int64) map[string]any {
	out := make(map[string]any, len(limits))
	for k, v := range limits {
		out[k] = v
	}
	return out
}

// orEmpty is m, or {} for nil.
func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func (a *API) listUserLimits(rq *request) error {
	out := []map[string]any{}
	if name, one := rq.params["user"]; one {
		limits, err := a.srv.UserLimitsOf(name)
		if err != nil {
			return err
		}
		if len(limits) > 0 {
			out = append(out, map[string]any{"user": name, "value": userLimitsJSON(limits)})
		}
		writeJSON(rq.w, http.StatusOK, out)
		return nil
	}
	for _, ul := range a.srv.AllUserLimits() {
		out = append(out, map[string]any{"user": ul.User, "value": userLimitsJSON(ul.Limits)})
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

func (a *API) putUserLimit(rq *request) error {
	v, err := rq.readValue()
	if err != nil {
		return err
	}
	user := rq.param("user")
	err = a.srv.SetUserLimit(user, rq.param("name"), v)
	if errors.Is(err, server.ErrNoSuchUser) {
		// RabbitMQ's body for this: the reason is the thrown term as a list.
		writeJSON(rq.w, http.StatusBadRequest, map[string]any{"error": "bad_request", "reason": []string{"no_such_user", user}})
		return nil
	}
	if err != nil {
		return unescapedParameterError(err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) deleteUserLimit(rq *request) error {
	if err := a.srv.ClearUserLimit(rq.param("user"), rq.param("name")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}
