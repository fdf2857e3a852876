package mgmt

import (
	"errors"
	"net/http"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// The management API of a cluster node: /api/nodes lists every member
// (this node in full, the others with what gossip and their own answer
// tell), and /api/cluster is Warren's cluster status (warrenctl cluster
// status), which RabbitMQ's API has no equivalent of (rabbitmqctl
// cluster_status is CLI only).

// errClusterUnavailable is the answer to a definition change the cluster
// could not commit in time (no Raft majority).
func errClusterUnavailable(reason string) error {
	return &httpError{http.StatusServiceUnavailable, errorBody{"service_unavailable", reason}}
}

// clusterNodes is /api/nodes of a cluster node, false on a standalone one.
func (a *API) clusterNodes(rq *request) ([]any, bool) {
	st, ok := a.srv.ClusterStatus(rq.r.Context())
	if !ok {
		return nil, false
	}
	out := make([]any, 0, len(st.Members))
	for _, m := range st.Members {
		if m.Self {
			out = append(out, a.nodeJSON())
			continue
		}
		out = append(out, memberJSON(m))
	}
	return out, true
}

// memberJSON describes another member as RabbitMQ lists a node it does not
// run on: name, type, running and what is known.
func memberJSON(m server.ClusterMember) map[string]any {
	n := map[string]any{
		"name": m.Name, "type": "disc", "running": m.Running, "being_drained": false,
		"mem_alarm": m.MemoryAlarm, "disk_free_alarm": m.DiskAlarm, "partitions": []any{},
		"cluster_links": []any{},
	}
	if s := m.Stats; s != nil {
		n["uptime"] = s.UptimeMillis
		n["mem_used"] = s.MemoryUsed
		n["mem_limit"] = s.MemoryLimit
		n["disk_free_limit"] = s.DiskLimit
	}
	return n
}

// getCluster answers GET /api/cluster: the cluster's members and this
// node's Raft view; a standalone node reports itself alone.
func (a *API) getCluster(rq *request) error {
	st, ok := a.srv.ClusterStatus(rq.r.Context())
	if !ok {
		writeJSON(rq.w, http.StatusOK, map[string]any{
			"cluster_name": a.srv.ClusterName(), "node": a.srv.NodeName(), "mode": "standalone",
			"nodes": []any{map[string]any{"name": a.srv.NodeName(), "running": true, "state": "alive", "voter": false, "leader": false}},
		})
		return nil
	}
	nodes := make([]any, 0, len(st.Members))
	for _, m := range st.Members {
		n := map[string]any{
			"name": m.Name, "address": m.Addr, "state": m.State, "running": m.Running, "voter": m.Voter,
			"leader": m.Leader, "mem_alarm": m.MemoryAlarm, "disk_free_alarm": m.DiskAlarm, "version": m.Version,
		}
		if m.Stats != nil {
			n["uptime"] = m.Stats.UptimeMillis
		}
		if m.StatsError != "" {
			n["error"] = m.StatsError
		}
		nodes = append(nodes, n)
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{
		"cluster_name": a.srv.ClusterName(), "node": st.Node, "mode": "cluster",
		"raft": map[string]any{
			"state": st.RaftState, "leader": st.Leader, "term": st.Term, "commit_index": st.CommitIndex,
			"applied_index": st.AppliedIndex, "voters": namesOrEmpty(st.Voters), "non_voters": namesOrEmpty(st.NonVoters),
			"join_error": st.JoinError,
		},
		"nodes": nodes,
	})
	return nil
}

func namesOrEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// clusterUnavailableReason is the reason of the 503: the AMQP reply text
// when the error was turned into one, else the error.
func clusterUnavailableReason(err error) string {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Text
	}
	var cu *server.ClusterUnavailableError
	if errors.As(err, &cu) {
		return cu.Reason()
	}
	return err.Error()
}

// postClusterJoin answers POST /api/cluster/join {"nodes":["host:port"]}.
func (a *API) postClusterJoin(rq *request) error {
	m, err := rq.bodyObject()
	if err != nil {
		return err
	}
	list, ok := m["nodes"].([]any)
	if !ok && m["nodes"] != nil {
		return errBadRequest("nodes must be a list of host:port strings")
	}
	var addrs []string
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			return errBadRequest("nodes must be a list of host:port strings")
		}
		addrs = append(addrs, s)
	}
	if err := a.srv.JoinCluster(addrs); err != nil {
		return clusterOpError(err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// postClusterLeave answers POST /api/cluster/leave: this node leaves.
func (a *API) postClusterLeave(rq *request) error {
	if err := a.srv.LeaveCluster(rq.r.Context()); err != nil {
		return clusterOpError(err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteClusterNode answers DELETE /api/cluster/nodes/{node}: forget a
// node that is down.
func (a *API) deleteClusterNode(rq *request) error {
	if err := a.srv.ForgetClusterNode(rq.r.Context(), rq.param("node")); err != nil {
		return clusterOpError(err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// clusterOpError maps a membership operation's failure: a standalone node
// is a bad request, no majority a 503, the rest as writeError maps them.
func clusterOpError(err error) error {
	switch {
	case errors.Is(err, server.ErrNotClustered):
		return errBadRequest(err.Error())
	case server.IsClusterUnavailable(err):
		return errClusterUnavailable(err.Error())
	}
	return err
}
