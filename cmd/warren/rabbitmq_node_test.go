package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// rabbitNode is a private RabbitMQ 3.10 node started for one test, with
// rabbitmq_federation and rabbitmq_management enabled, its data and logs
// under t.TempDir() and every port its own, so tests never share state
// with another helper's node.
type rabbitNode struct {
	t        testing.TB
	name     string // RABBITMQ_NODENAME, also its cluster_name
	env      []string
	amqpPort int
	mgmtPort int
	url      string // amqp://guest:guest@127.0.0.1:amqpPort/
}

var rabbitSeq atomic.Int32

// rabbitPort is a port nothing listens on at the moment of asking; the node
// binds it a few seconds later, which is good enough on a test machine.
func rabbitPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRabbit starts the node as the rabbitmq user (its Erlang cookie is
// under /var/lib/rabbitmq) and waits until AMQP and the management API
// answer. It skips when RabbitMQ or setpriv is missing or the test does not
// run as root (setpriv needs it).
func startRabbit(t testing.TB) *rabbitNode {
	t.Helper()
	for _, bin := range []string{"rabbitmq-server", "rabbitmqctl", "rabbitmq-plugins", "setpriv"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (.ci/run installs rabbitmq-server); skipping the RabbitMQ 3.10 test", bin)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("starting a private RabbitMQ node as the rabbitmq user needs root (setpriv); skipping")
	}
	dir := t.TempDir()
	// t.TempDir's parent is 0700 root; the rabbitmq user must reach dir.
	for _, d := range []string{filepath.Dir(dir), dir} {
		fedMust(t, os.Chmod(d, 0o777))
	}
	n := &rabbitNode{t: t, amqpPort: rabbitPort(t), mgmtPort: rabbitPort(t)}
	n.name = fmt.Sprintf("warren-test-%d-%d@localhost", os.Getpid(), rabbitSeq.Add(1))
	n.url = fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.amqpPort)
	n.env = []string{
		"HOME=/var/lib/rabbitmq",
		"RABBITMQ_NODENAME=" + n.name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(n.amqpPort),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(rabbitPort(t)),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE=" + filepath.Join(dir, "pid"),
		fmt.Sprintf(`RABBITMQ_SERVER_START_ARGS=-rabbitmq_management listener [{port,%d},{ip,"127.0.0.1"}]`, n.mgmtPort),
	}
	n.run("rabbitmq-plugins", "--offline", "enable", "rabbitmq_federation", "rabbitmq_federation_management")
	n.run("rabbitmq-server", "-detached")
	t.Cleanup(n.stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := amqp091.Dial(n.url)
		if err == nil {
			c.Close()
			if code, _ := n.api(http.MethodGet, "/api/overview", nil); code == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log", n.name+".log"))
			t.Fatalf("RabbitMQ node %s did not start within 60 s (last: %v); log:\n%s", n.name, err, log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return n
}

// in is the node as seen by subtest t: its failures fail t, not the test
// that started the node.
func (n *rabbitNode) in(t testing.TB) *rabbitNode {
	c := *n
	c.t = t
	return &c
}

// run runs a RabbitMQ command line tool as the rabbitmq user with the
// node's environment.
func (n *rabbitNode) run(bin string, args ...string) string {
	n.t.Helper()
	argv := append([]string{"--reuid=rabbitmq", "--regid=rabbitmq", "--init-groups", "--", "env"}, n.env...)
	cmd := exec.Command("setpriv", append(append(argv, bin), args...)...)
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

// stop stops the node; a node that will not stop is killed by the pid it
// wrote, so no test leaves a broker behind.
func (n *rabbitNode) stop() {
	argv := append([]string{"--reuid=rabbitmq", "--regid=rabbitmq", "--init-groups", "--", "env"}, n.env...)
	out, err := exec.Command("setpriv", append(argv, "rabbitmqctl", "-n", n.name, "stop")...).CombinedOutput()
	if err == nil {
		return
	}
	n.t.Errorf("rabbitmqctl stop %s: %v\n%s", n.name, err, out)
	for _, e := range n.env {
		if p, ok := strings.CutPrefix(e, "RABBITMQ_PID_FILE="); ok {
			if raw, rerr := os.ReadFile(p); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(raw))); perr == nil {
					if kerr := exec.Command("kill", "-9", strconv.Itoa(pid)).Run(); kerr != nil {
						n.t.Errorf("kill %d: %v", pid, kerr)
					}
				}
			}
		}
	}
}

// api calls the node's management API as guest; body is JSON-encoded.
func (n *rabbitNode) api(method, path string, body any) (int, string) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			n.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	rq, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", n.mgmtPort, path), rd)
	if err != nil {
		n.t.Fatal(err)
	}
	rq.SetBasicAuth("guest", "guest")
	rq.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(raw)
}

// mustAPI is api that fails the test on anything but a 2xx.
func (n *rabbitNode) mustAPI(method, path string, body any) string {
	n.t.Helper()
	code, out := n.api(method, path, body)
	if code < 200 || code > 299 {
		n.t.Fatalf("RabbitMQ %s %s: %d %s", method, path, code, out)
	}
	return out
}

// putUpstream and putPolicy set RabbitMQ's federation configuration in
// vhost "/" through its management API.
func (n *rabbitNode) putUpstream(name string, value map[string]any) {
	n.t.Helper()
	n.mustAPI(http.MethodPut, "/api/parameters/federation-upstream/%2F/"+url.PathEscape(name), map[string]any{"value": value})
}

func (n *rabbitNode) putPolicy(name, pattern, applyTo string, def map[string]any) {
	n.t.Helper()
	n.mustAPI(http.MethodPut, "/api/policies/%2F/"+url.PathEscape(name),
		map[string]any{"pattern": pattern, "apply-to": applyTo, "definition": def})
}

// links is RabbitMQ's GET /api/federation-links.
func (n *rabbitNode) links() []map[string]any {
	n.t.Helper()
	var list []map[string]any
	if err := json.Unmarshal([]byte(n.mustAPI(http.MethodGet, "/api/federation-links", nil)), &list); err != nil {
		n.t.Fatal(err)
	}
	return list
}

// waitLink waits until RabbitMQ reports its link of upstream for object
// with status.
func (n *rabbitNode) waitLink(upstream, object, status string) map[string]any {
	n.t.Helper()
	var last map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range n.links() {
			if l["upstream"] == upstream && (l["exchange"] == object || l["queue"] == object) {
				if last = l; l["status"] == status {
					return l
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Fatalf("RabbitMQ link %s/%s not %s within 30 s; last seen: %v", upstream, object, status, last)
	return nil
}

// queueMessages is the "messages" count RabbitMQ's API reports for queue
// (its stats lag by up to the collection interval).
func (n *rabbitNode) queueMessages(queue string) int {
	n.t.Helper()
	var q struct {
		Messages int `json:"messages"`
	}
	if err := json.Unmarshal([]byte(n.mustAPI(http.MethodGet, "/api/queues/%2F/"+url.PathEscape(queue), nil)), &q); err != nil {
		n.t.Fatal(err)
	}
	return q.Messages
}

// clusterName is the node's cluster_name, which the plugin writes in
// x-received-from and names its upstream objects by.
func (n *rabbitNode) clusterName() string {
	n.t.Helper()
	var o struct {
		ClusterName string `json:"cluster_name"`
	}
	if err := json.Unmarshal([]byte(n.mustAPI(http.MethodGet, "/api/overview", nil)), &o); err != nil {
		n.t.Fatal(err)
	}
	return o.ClusterName
}

// channel opens a connection to the node and a channel, closed at test end.
func (n *rabbitNode) channel() *amqp091.Channel {
	n.t.Helper()
	c, err := amqp091.Dial(n.url)
	if err != nil {
		n.t.Fatalf("dial RabbitMQ: %v", err)
	}
	n.t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		n.t.Fatalf("RabbitMQ channel: %v", err)
	}
	return ch
}
