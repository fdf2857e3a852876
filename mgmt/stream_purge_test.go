package mgmt

import (
	"net/http"
	"testing"
)

// Purging a stream through the API is refused as RabbitMQ 3.10 refuses it:
// 400 with the AMQP refusal's text (read off a running node).
func TestMgmtStreamPurgeRefused(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/s", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "stream"}}), 201, "declare")
	r := e.do(http.MethodDelete, "/api/queues/%2F/s/contents", nil)
	body := r.object(t)
	if r.status != 400 || body["error"] != "bad_request" || body["reason"] != "queue.purge not supported by stream queues queue 's' in vhost '/'" {
		t.Fatalf("purge: %d %s", r.status, r.body)
	}
}
