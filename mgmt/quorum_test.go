package mgmt

import (
	"testing"
)

// TestMgmtQuorumQueueFields: a quorum queue shows its type, leader,
// members and online nodes under RabbitMQ's field names, in the queue
// and the list (disable_stats too).
func TestMgmtQuorumQueueFields(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/qq", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum"}}), 201, "declare")
	node := e.srv.NodeName()
	check := func(what string, q map[string]any) {
		t.Helper()
		members, _ := q["members"].([]any)
		online, _ := q["online"].([]any)
		if q["type"] != "quorum" || q["leader"] != node || q["node"] != node ||
			len(members) != 1 || members[0] != node || len(online) != 1 || online[0] != node {
			t.Fatalf("%s: type %v leader %v node %v members %v online %v", what, q["type"], q["leader"], q["node"], q["members"], q["online"])
		}
	}
	check("queue", e.must(e.get("/api/queues/%2F/qq"), 200, "queue").object(t))
	list := e.must(e.get("/api/queues?disable_stats=true"), 200, "list").array(t)
	if len(list) != 1 {
		t.Fatalf("list: %v", list)
	}
	check("basic list", list[0].(map[string]any))
}
