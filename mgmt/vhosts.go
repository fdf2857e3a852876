package mgmt

import (
	"errors"
	"net/http"

	"github.com/warrenmq/warren/server"
)

// vhostJSON renders a vhost with its totals and rates.
func (a *API) vhostJSON(v server.VhostInfo, counters server.MessageCounters, q sampleQuery) map[string]any {
	d := a.stats.vhostDetails(v.Name, q)
	dqt := v.DefaultQueueType
	if dqt == "" {
		dqt = "undefined"
	}
	m := map[string]any{
		"name": v.Name, "description": v.Description, "tags": v.Tags, "default_queue_type": dqt,
		"metadata":      map[string]any{"description": v.Description, "tags": v.Tags},
		"tracing":       v.Tracing,
		"cluster_state": map[string]any{a.srv.NodeName(): "running"},
	}
	putStat(m, "messages", v.Messages, d)
	putStat(m, "messages_ready", v.Ready, d)
	putStat(m, "messages_unacknowledged", v.Unacked, d)
	putStat(m, "recv_oct", v.RecvOct, d)
	putStat(m, "send_oct", v.SendOct, d)
	if ms := messageStats(vhostMetrics, channelValuesWithTotals(counters), d, [][]string{publishGroup, deliverGroup}); len(ms) > 0 {
		m["message_stats"] = ms
	}
	return m
}

func (a *API) vhostInfos(rq *request) []server.VhostInfo {
	all := a.srv.VhostInfos()
	if rq.tags.monitor {
		return all
	}
	out := all[:0]
	for _, v := range all {
		if a.srv.HasVhostAccess(rq.user.Name, v.Name) {
			out = append(out, v)
		}
	}
	return out
}

func (a *API) listVhosts(rq *request) error {
	q := parseSampleQuery(rq)
	counters := a.srv.VhostCounters()
	return list(rq, a.vhostInfos(rq), lister[server.VhostInfo]{
		name:   func(v server.VhostInfo) string { return v.Name },
		render: func(v server.VhostInfo) map[string]any { return a.vhostJSON(v, counters[v.Name], q) },
	}, true)
}

func (a *API) getVhost(rq *request) error {
	name := rq.param("vhost")
	for _, v := range a.srv.VhostInfos() {
		if v.Name == name {
			out := a.vhostJSON(v, a.srv.VhostCounters()[name], parseSampleQuery(rq))
			if vh := a.srv.Vhost(name); vh != nil {
				if st, ok := vh.StorageStats(); ok {
					out["message_store"] = storeJSON(st) // Warren's extension
				}
			}
			writeJSON(rq.w, http.StatusOK, out)
			return nil
		}
	}
	return errNotFound
}

func (a *API) putVhost(rq *request) error {
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	var meta server.VhostMeta
	if meta.Description, err = b.str("description"); err != nil {
		return err
	}
	if meta.Tags, err = b.tags("tags"); err != nil {
		return err
	}
	if meta.DefaultQueueType, err = b.str("default_queue_type"); err != nil {
		return err
	}
	if meta.Tracing, err = b.boolean("tracing", false); err != nil {
		return err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		mb := body(md)
		if !b.has("description") && mb.has("description") {
			if meta.Description, err = mb.str("description"); err != nil {
				return err
			}
		}
		if !b.has("tags") && mb.has("tags") {
			if meta.Tags, err = mb.tags("tags"); err != nil {
				return err
			}
		}
	}
	created, err := a.srv.PutVhost(rq.param("vhost"), meta)
	if err != nil {
		return err
	}
	return writeCreated(rq, created)
}

// writeCreated answers a PUT: 201 when it created, 204 when it updated.
func writeCreated(rq *request, created bool) error {
	if created {
		rq.w.WriteHeader(http.StatusCreated)
	} else {
		rq.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

func (a *API) deleteVhost(rq *request) error {
	if err := a.srv.DeleteVhost(rq.param("vhost")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// userJSON renders a user with its password hash, as RabbitMQ 3.10 does:
// every route that renders users is for administrators only, who can
// export the same hashes with the definitions.
func userJSON(u server.UserSummary) map[string]any {
	tags := u.Tags
	if tags == nil {
		tags = []string{}
	}
	return map[string]any{
		"name": u.Name, "password_hash": u.PasswordHash, "hashing_algorithm": u.HashingAlgorithm,
		"tags": tags, "limits": userLimitsJSON(u.Limits),
	}
}

func (a *API) listUsers(rq *request) error {
	return list(rq, a.srv.Users(), lister[server.UserSummary]{
		name:   func(u server.UserSummary) string { return u.Name },
		render: userJSON,
	}, false)
}

func (a *API) listUsersWithoutPermissions(rq *request) error {
	has := make(map[string]bool)
	for _, p := range a.srv.Permissions() {
		has[p.User] = true
	}
	var out []server.UserSummary
	for _, u := range a.srv.Users() {
		if !has[u.Name] {
			out = append(out, u)
		}
	}
	return list(rq, out, lister[server.UserSummary]{
		name:   func(u server.UserSummary) string { return u.Name },
		render: userJSON,
	}, false)
}

func (a *API) getUser(rq *request) error {
	u, err := a.srv.User(rq.param("user"))
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, userJSON(u))
	return nil
}

func (a *API) putUser(rq *request) error {
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	if !b.has("tags") {
		return errBadRequest("tags_not_present")
	}
	spec := server.UserSpec{Name: rq.param("user")}
	if spec.Tags, err = b.tags("tags"); err != nil {
		return err
	}
	if b.has("password") {
		p, err := b.str("password")
		if err != nil {
			return err
		}
		spec.Password = &p
	}
	if b.has("password_hash") {
		h, err := b.str("password_hash")
		if err != nil {
			return err
		}
		spec.PasswordHash = &h
	}
	if spec.HashingAlgorithm, err = b.str("hashing_algorithm"); err != nil {
		return err
	}
	if l, ok := m["limits"]; ok && l != nil {
		if spec.Limits, ok = l.(map[string]any); !ok {
			return errBadRequest("limits must be an object")
		}
	}
	created, err := a.srv.PutUser(spec)
	if err != nil {
		return unescapedParameterError(err)
	}
	return writeCreated(rq, created)
}

func (a *API) deleteUser(rq *request) error {
	if err := a.srv.DeleteUser(rq.param("user")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) bulkDeleteUsers(rq *request) error {
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	names, ok := m["users"].([]any)
	if !ok {
		return errBadRequest("users must be an array of names")
	}
	for _, n := range names {
		name, ok := n.(string)
		if !ok {
			return errBadRequest("users must be an array of names")
		}
		if err := a.srv.DeleteUser(name); err != nil && !errors.Is(err, server.ErrNoSuchUser) {
			return err
		}
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func permissionJSON(p server.PermissionInfo) map[string]any {
	return map[string]any{"user": p.User, "vhost": p.Vhost, "configure": p.Configure, "write": p.Write, "read": p.Read}
}

// listFiltered lists the items keep accepts, rendered as JSON objects.
func listFiltered[T any](rq *request, all []T, keep func(T) bool, render func(T) map[string]any) error {
	var out []T
	for _, x := range all {
		if keep(x) {
			out = append(out, x)
		}
	}
	return list(rq, out, lister[T]{render: render}, false)
}

func (a *API) listPermissionsWhere(rq *request, keep func(server.PermissionInfo) bool) error {
	return listFiltered(rq, a.srv.Permissions(), keep, permissionJSON)
}

func (a *API) listPermissions(rq *request) error {
	return a.listPermissionsWhere(rq, func(server.PermissionInfo) bool { return true })
}

func (a *API) listVhostPermissions(rq *request) error {
	vh := rq.param("vhost")
	if a.srv.Vhost(vh) == nil {
		return errNotFound
	}
	return a.listPermissionsWhere(rq, func(p server.PermissionInfo) bool { return p.Vhost == vh })
}

func (a *API) listUserPermissions(rq *request) error {
	u := rq.param("user")
	if _, err := a.srv.User(u); err != nil {
		return err
	}
	return a.listPermissionsWhere(rq, func(p server.PermissionInfo) bool { return p.User == u })
}

func (a *API) getPermission(rq *request) error {
	for _, p := range a.srv.Permissions() {
		if p.Vhost == rq.param("vhost") && p.User == rq.param("user") {
			writeJSON(rq.w, http.StatusOK, permissionJSON(p))
			return nil
		}
	}
	return errNotFound
}

func (a *API) putPermission(rq *request) error {
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	var p server.Permission
	for _, f := range []struct {
		key string
		dst *string
	}{{"configure", &p.Configure}, {"write", &p.Write}, {"read", &p.Read}} {
		if !b.has(f.key) {
			return errBadRequest("[{missing_key," + f.key + "}]")
		}
		if *f.dst, err = b.str(f.key); err != nil {
			return err
		}
	}
	created, err := a.srv.SetPermission(rq.param("user"), rq.param("vhost"), p)
	switch {
	case errors.Is(err, server.ErrNoSuchUser), errors.Is(err, server.ErrNoSuchVhost):
		return errBadRequest("vhost_or_user_not_found")
	case err != nil:
		return err
	}
	return writeCreated(rq, created)
}

func (a *API) deletePermission(rq *request) error {
	if err := a.srv.ClearPermission(rq.param("user"), rq.param("vhost")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

func topicPermissionJSON(tp server.TopicPermission) map[string]any {
	return map[string]any{"user": tp.User, "vhost": tp.Vhost, "exchange": tp.Exchange, "write": tp.Write, "read": tp.Read}
}

func (a *API) listTopicPermissionsWhere(rq *request, keep func(server.TopicPermission) bool) error {
	return listFiltered(rq, a.srv.TopicPermissions(), keep, topicPermissionJSON)
}

func (a *API) listTopicPermissions(rq *request) error {
	return a.listTopicPermissionsWhere(rq, func(server.TopicPermission) bool { return true })
}

func (a *API) listVhostTopicPermissions(rq *request) error {
	vh := rq.param("vhost")
	if a.srv.Vhost(vh) == nil {
		return errNotFound
	}
	return a.listTopicPermissionsWhere(rq, func(tp server.TopicPermission) bool { return tp.Vhost == vh })
}

func (a *API) listUserTopicPermissions(rq *request) error {
	u := rq.param("user")
	if _, err := a.srv.User(u); err != nil {
		return err
	}
	return a.listTopicPermissionsWhere(rq, func(tp server.TopicPermission) bool { return tp.User == u })
}

func (a *API) getTopicPermissions(rq *request) error {
	var out []map[string]any
	exchange := rq.param("exchange")
	for _, tp := range a.srv.TopicPermissions() {
		if tp.Vhost == rq.param("vhost") && tp.User == rq.param("user") && (exchange == "" || tp.Exchange == exchange) {
			out = append(out, topicPermissionJSON(tp))
		}
	}
	if out == nil {
		return errNotFound
	}
	writeJSON(rq.w, http.StatusOK, out)
	return nil
}

func (a *API) putTopicPermission(rq *request) error {
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	b := body(m)
	tp := server.TopicPermission{User: rq.param("user"), Vhost: rq.param("vhost")}
	for _, f := range []struct {
		key string
		dst *string
	}{{"exchange", &tp.Exchange}, {"write", &tp.Write}, {"read", &tp.Read}} {
		if !b.has(f.key) {
			return errBadRequest("[{missing_key," + f.key + "}]")
		}
		if *f.dst, err = b.str(f.key); err != nil {
			return err
		}
	}
	created, err := a.srv.SetTopicPermission(tp)
	switch {
	case errors.Is(err, server.ErrNoSuchUser), errors.Is(err, server.ErrNoSuchVhost):
		return errBadRequest("vhost_or_user_not_found")
	case err != nil:
		return err
	}
	return writeCreated(rq, created)
}

func (a *API) deleteTopicPermissions(rq *request) error {
	if err := a.srv.ClearTopicPermissions(rq.param("user"), rq.param("vhost"), rq.param("exchange")); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// storeJSON describes a vhost's message store: what a confirm guarantees
// under its flush policy, its segment files and live and dead data.
func storeJSON(st server.StorageStats) map[string]any {
	return map[string]any{
		"flush_policy": st.FlushPolicy, "confirm_guarantee": st.Guarantee,
		"segments": st.Segments, "first_offset": st.FirstOffset, "last_offset": st.LastOffset,
		"live_bytes": st.LiveBytes, "dead_bytes": st.DeadBytes, "live_messages": st.LiveMessages,
	}
}
