package mgmt

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestClusterQuorumCriticalHealthCheck: with a 3-replica quorum queue on
// three nodes, node-is-quorum-critical is ok everywhere; once one member
// stops, each of the other two answers 503 with RabbitMQ 3.10's body
// naming the queue (stopping either would leave one of three). A classic
// queue never makes the check fail, and mirror-sync-critical stays ok
// (no mirrored classic queue).
func TestClusterQuorumCriticalHealthCheck(t *testing.T) {
	envs := startClusterEnvs(t)
	e := envs[0]
	e.must(e.put("/api/queues/%2F/qq", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum"}}), 201, "declare")
	e.must(e.put("/api/queues/%2F/cq", map[string]any{"durable": true}), 201, "declare classic")
	for _, n := range envs {
		waitFor(t, 20*time.Second, func() error {
			r := n.get("/api/queues/%2F/qq")
			if r.status != 200 {
				return fmt.Errorf("queue on %s: %d", n.srv.NodeName(), r.status)
			}
			if online, _ := r.object(t)["online"].([]any); len(online) != 3 {
				return fmt.Errorf("online on %s: %v", n.srv.NodeName(), online)
			}
			return nil
		})
		n.must(n.get("/api/health/checks/node-is-quorum-critical"), 200, "all members up on "+n.srv.NodeName())
		n.must(n.get("/api/health/checks/node-is-mirror-sync-critical"), 200, "mirror sync on "+n.srv.NodeName())
	}

	envs[2].srv.Close()
	want := map[string]any{"status": "failed",
		"reason": "There are quorum queues that would lose their quorum if the target node is shut down",
		"queues": []any{map[string]any{"readable_name": "queue 'qq' in vhost '/'", "name": "qq", "virtual_host": "/", "type": "quorum"}}}
	wantJSON, _ := json.Marshal(want)
	for _, n := range envs[:2] {
		waitFor(t, 20*time.Second, func() error {
			r := n.get("/api/health/checks/node-is-quorum-critical")
			var got any
			if err := json.Unmarshal(r.body, &got); err != nil {
				return fmt.Errorf("%s: %d %s: %v", n.srv.NodeName(), r.status, r.body, err)
			}
			gotJSON, _ := json.Marshal(got)
			if r.status != 503 || string(gotJSON) != string(wantJSON) {
				return fmt.Errorf("%s: %d %s, want 503 %s", n.srv.NodeName(), r.status, gotJSON, wantJSON)
			}
			return nil
		})
		n.must(n.get("/api/health/checks/node-is-mirror-sync-critical"), 200, "mirror sync, a member down, on "+n.srv.NodeName())
	}
}

// TestQuorumCriticalSingleNode: a standalone node answers both checks as
// RabbitMQ's single node cluster, whatever its quorum queues.
func TestQuorumCriticalSingleNode(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/qq", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum"}}), 201, "declare")
	for _, check := range []string{"node-is-quorum-critical", "node-is-mirror-sync-critical"} {
		body := e.must(e.get("/api/health/checks/"+check), 200, check).object(t)
		if body["status"] != "ok" || body["reason"] != "single node cluster" {
			t.Errorf("%s: %v", check, body)
		}
	}
}
