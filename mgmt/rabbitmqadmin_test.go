package mgmt

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rabbitmqadmin is RabbitMQ 3.10.8's CLI as its management plugin serves it
// at /cli/rabbitmqadmin. It is MPL-2.0 and not part of Warren: the test uses
// the installed copy (WARREN_RABBITMQADMIN overrides the path) and is
// skipped where it or python3 is missing.
const rabbitmqadmin = "/usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/plugins/rabbitmq_management-3.10.8/priv/www/cli/rabbitmqadmin"

// TestMgmtRabbitmqadmin runs rabbitmqadmin's everyday commands against
// Warren and checks what they print: declare, list, publish, get, export,
// delete, import and show overview.
func TestMgmtRabbitmqadmin(t *testing.T) {
	script := os.Getenv("WARREN_RABBITMQADMIN")
	if script == "" {
		script = rabbitmqadmin
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("no rabbitmqadmin: %v", err)
	}
	e := newEnv(t)
	host, port, err := net.SplitHostPort(e.api.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	admin := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(python, append([]string{script, "-H", host, "-P", port, "-u", "guest", "-p", "guest"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rabbitmqadmin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	expect := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("rabbitmqadmin printed\n%s\nwant\n%s", got, want)
		}
	}

	expect(admin("declare", "queue", "name=ra.q", "durable=true", `arguments={"x-max-length": 10}`), "queue declared\n")
	expect(admin("-f", "tsv", "list", "queues", "name", "durable", "arguments.x-max-length"),
		"name\tdurable\targuments.x-max-length\nra.q\tTrue\t10\n")
	expect(admin("publish", "routing_key=ra.q", "payload=hello"), "Message published\n")
	expect(admin("publish", "exchange=amq.default", "routing_key=ra.q", "payload=world",
		`properties={"content_type": "text/plain", "headers": {"h": "v"}}`), "Message published\n")
	expect(admin("-f", "tsv", "list", "queues", "name", "messages"), "name\tmessages\nra.q\t2\n")

	// The first get uses rabbitmqadmin's default ackmode, ack_requeue_true:
	// both messages stay, now redelivered; the second rejects them for good.
	var msgs []map[string]any
	if err := json.Unmarshal([]byte(admin("-f", "raw_json", "get", "queue=ra.q", "count=2")), &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0]["payload"] != "hello" || msgs[1]["payload"] != "world" ||
		msgs[0]["message_count"] != float64(1) || msgs[1]["payload_encoding"] != "string" {
		t.Fatalf("get: %v", msgs)
	}
	if p := msgs[1]["properties"].(map[string]any); p["content_type"] != "text/plain" || p["headers"].(map[string]any)["h"] != "v" {
		t.Fatalf("get: properties %v", p)
	}
	expect(admin("-f", "tsv", "get", "queue=ra.q", "ackmode=reject_requeue_false", "count=5"),
		"routing_key\texchange\tmessage_count\tpayload\tpayload_bytes\tpayload_encoding\tredelivered\n"+
			"ra.q\t\t1\thello\t5\tstring\tTrue\nra.q\t\t0\tworld\t5\tstring\tTrue\n")
	expect(admin("-f", "tsv", "list", "queues", "name", "messages"), "name\tmessages\nra.q\t0\n")

	file := filepath.Join(t.TempDir(), "defs.json")
	expect(admin("export", file), "Exported definitions for "+host+" to \""+file+"\"\n")
	expect(admin("delete", "queue", "name=ra.q"), "queue deleted\n")
	expect(admin("-f", "tsv", "list", "queues", "name"), "No items\n")
	expect(admin("import", file), "Uploaded definitions from \""+host+"\" to "+file+
		". The import process may take some time. Consult server logs to track progress.\n")
	expect(admin("-f", "tsv", "list", "queues", "name", "durable", "arguments.x-max-length"),
		"name\tdurable\targuments.x-max-length\nra.q\tTrue\t10\n")
	expect(admin("-f", "tsv", "show", "overview", "object_totals.queues", "queue_totals.messages"),
		"object_totals.queues\tqueue_totals.messages\n1\t0\n")
	expect(admin("delete", "queue", "name=ra.q"), "queue deleted\n")
}
