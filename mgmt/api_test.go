package mgmt

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/server"
)

func TestMgmtConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Server = &server.Server{}
	if err := good.Validate(); err != nil {
		t.Fatalf("default config with a server: %v", err)
	}
	cases := map[string]func(*Config){
		"no server":      func(c *Config) { c.Server = nil },
		"no listen":      func(c *Config) { c.Listen = "" },
		"bad listen":     func(c *Config) { c.Listen = "nohostport" },
		"fast sampler":   func(c *Config) { c.StatsInterval = 0 },
		"tiny history":   func(c *Config) { c.StatsHistory = 1 },
		"huge objects":   func(c *Config) { c.ObjectHistory = 5000 },
		"tiny body":      func(c *Config) { c.MaxBodyBytes = 10 },
		"no logger":      func(c *Config) { c.Logger = nil },
		"no timeout":     func(c *Config) { c.WriteTimeout = 0 },
		"no product":     func(c *Config) { c.ProductName = "" },
		"negative idle":  func(c *Config) { c.IdleTimeout = -1 },
		"slow sampler":   func(c *Config) { c.StatsInterval = 2 * 60 * 1e9 },
		"empty history":  func(c *Config) { c.StatsHistory = 0 },
		"object history": func(c *Config) { c.ObjectHistory = 1 },
	}
	for name, mutate := range cases {
		c := good
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New(zero config) = %v, want ErrInvalidConfig", err)
	}
}

func TestMgmtLifecycle(t *testing.T) {
	e := newEnv(t)
	if err := e.api.Start(); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	if err := e.api.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.api.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := e.api.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}
}

// TestMgmtPathEscaping covers names Go's ServeMux cannot route: the vhost
// "/" as %2F, names with "/", "%", "+", spaces and "#".
func TestMgmtPathEscaping(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/vhosts/rabbit%2Fhole", ""), 201, "vhost rabbit/hole")
	e.must(e.put("/api/permissions/rabbit%2Fhole/guest", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201, "permissions")
	names := []string{"plain", "a/b", "100%", "a+b", "with space", "hash#tag", "ünïcode"}
	for _, vh := range []string{"/", "rabbit/hole"} {
		for _, name := range names {
			path := "/api/queues/" + esc(vh) + "/" + esc(name)
			e.must(e.put(path, map[string]any{"durable": false}), 201, "create "+path)
			got := e.must(e.get(path), 200, "get "+path).object(t)
			if got["name"] != name || got["vhost"] != vh {
				t.Errorf("%s: got name %q vhost %q", path, got["name"], got["vhost"])
			}
		}
		list := e.must(e.get("/api/queues/"+esc(vh)), 200, "list").array(t)
		if len(list) != len(names) {
			t.Errorf("vhost %q lists %d queues, want %d", vh, len(list), len(names))
		}
	}
	// %2F must not be mistaken for a path separator, nor "+" for a space.
	if r := e.get("/api/queues/%2F/a%2Bb"); r.status != 200 {
		t.Errorf("a+b via %%2B: %d", r.status)
	}
	if r := e.get("/api/queues/%2F/a+b"); r.status != 200 {
		t.Errorf("a+b via +: %d", r.status)
	}
	if r := e.get("/api/queues/%2F/a/b"); r.status != 404 {
		t.Errorf("unescaped a/b should not route to a queue: %d", r.status)
	}
	for _, name := range names {
		e.must(e.do(http.MethodDelete, "/api/queues/%2F/"+esc(name), nil), 204, "delete "+name)
	}
	if r := e.get("/api/queues/%2F"); len(r.array(t)) != 0 {
		t.Errorf("queues left: %s", r.body)
	}
	// A malformed escape is a 400, not a panic or a 404 (Go's client will
	// not send one, so write the request line by hand).
	conn, err := net.Dial("tcp", e.api.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/queues/%%ZZ HTTP/1.1\r\nHost: x\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\nConnection: close\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Errorf("malformed escape: %d", res.StatusCode)
	}
}

func TestMgmtRoutingStatuses(t *testing.T) {
	e := newEnv(t)
	if r := e.get("/api/nosuch"); r.status != 404 || string(r.body) != `{"error":"Object Not Found","reason":"Not Found"}`+"\n" {
		t.Errorf("unknown path: %d %s", r.status, r.body)
	}
	r := e.do(http.MethodPatch, "/api/queues", nil)
	if r.status != 405 || !strings.Contains(r.header.Get("Allow"), "GET") {
		t.Errorf("PATCH: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	r = e.do(http.MethodOptions, "/api/queues/%2F/x", nil, noAuth())
	if r.status != 204 || !strings.Contains(r.header.Get("Allow"), "PUT") {
		t.Errorf("OPTIONS without credentials: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	r = e.do(http.MethodHead, "/api/overview", nil)
	if r.status != 200 || len(r.body) != 0 {
		t.Errorf("HEAD: %d body %q", r.status, r.body)
	}
	// kbudde's exporter asks for BERT first and an empty sort.
	r = e.get("/api/queues?sort=", withHeader("Accept", "application/bert, application/json;q=0.1"))
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("BERT accept: %d %q", r.status, r.header.Get("Content-Type"))
	}
	// Without a UI handler, paths outside /api are 404.
	if r := e.get("/"); r.status != 404 {
		t.Errorf("/: %d", r.status)
	}
}

func TestMgmtUIHandler(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ui:" + r.URL.Path)) })
	e := newEnv(t, func(_ *server.Config, c *Config) { c.UI = ui })
	if r := e.get("/index.html", noAuth()); r.status != 200 || string(r.body) != "ui:/index.html" {
		t.Errorf("UI: %d %s", r.status, r.body)
	}
	if r := e.get("/api/whoami"); r.status != 200 {
		t.Errorf("api next to the UI: %d", r.status)
	}
}

// TestMgmtAuthorization checks RabbitMQ's tag hierarchy and per-vhost access.
func TestMgmtAuthorization(t *testing.T) {
	e := newEnv(t)
	for _, u := range []struct{ name, tags string }{
		{"plain", ""}, {"mgmt", "management"}, {"mon", "monitoring"}, {"pol", "policymaker"}, {"adm", "administrator"},
	} {
		e.must(e.put("/api/users/"+u.name, map[string]string{"password": "pw", "tags": u.tags}), 201, "user "+u.name)
	}
	for _, u := range []string{"mgmt", "pol"} {
		e.must(e.put("/api/permissions/%2F/"+u, map[string]string{"configure": "^" + u, "write": ".*", "read": ".*"}), 201, "perm "+u)
	}
	e.must(e.put("/api/vhosts/other", ""), 201, "vhost other")
	cases := []struct {
		user, method, path string
		body               any
		status             int
		reason             string
	}{
		{"plain", "GET", "/api/overview", nil, 401, "Not management user"},
		{"plain", "GET", "/api/health/checks/alarms", nil, 401, "Not management user"},
		{"mgmt", "GET", "/api/overview", nil, 200, ""},
		{"mgmt", "GET", "/api/nodes", nil, 401, "Not monitor user"},
		{"mon", "GET", "/api/nodes", nil, 200, ""},
		{"mgmt", "GET", "/api/users", nil, 401, "Not administrator user"},
		{"mon", "GET", "/api/users", nil, 401, "Not administrator user"},
		{"adm", "GET", "/api/users", nil, 200, ""},
		{"mgmt", "GET", "/api/queues/%2F", nil, 200, ""},
		{"mgmt", "GET", "/api/queues/other", nil, 401, "User not authorised to access virtual host"},
		{"mon", "GET", "/api/queues/%2F", nil, 401, "User not authorised to access virtual host"},
		{"adm", "GET", "/api/queues/other", nil, 200, ""},
		{"adm", "GET", "/api/queues/nosuch", nil, 404, "Not Found"},
		{"mgmt", "PUT", "/api/queues/%2F/mgmt.q", map[string]any{}, 201, ""},
		{"mgmt", "PUT", "/api/queues/%2F/notmine", map[string]any{}, 401, "Access refused."},
		{"mgmt", "PUT", "/api/policies/%2F/p", map[string]any{"pattern": "x", "definition": map[string]any{"expires": 1000}}, 401, "User not authorised to access object"},
		{"pol", "PUT", "/api/policies/%2F/p", map[string]any{"pattern": "x", "definition": map[string]any{"expires": 1000}}, 201, ""},
		{"pol", "PUT", "/api/policies/other/p", map[string]any{"pattern": "x", "definition": map[string]any{"expires": 1000}}, 401, "User not authorised to access virtual host"},
		{"mgmt", "GET", "/api/policies/%2F", nil, 200, ""},
		{"mgmt", "GET", "/api/definitions", nil, 401, "Not administrator user"},
		{"mgmt", "GET", "/api/vhosts/%2F", nil, 401, "Not administrator user"},
		{"mgmt", "GET", "/api/whoami", nil, 200, ""},
	}
	for _, c := range cases {
		r := e.do(c.method, c.path, c.body, asUser(c.user, "pw"))
		if r.status != c.status {
			t.Errorf("%s %s %s: status %d, want %d (%s)", c.user, c.method, c.path, r.status, c.status, r.body)
			continue
		}
		if c.reason != "" {
			if got := r.object(t)["reason"]; got != c.reason {
				t.Errorf("%s %s %s: reason %q, want %q", c.user, c.method, c.path, got, c.reason)
			}
		}
	}
	// Cross-vhost lists show a non-monitoring user only its vhosts.
	vhosts := e.must(e.get("/api/vhosts", asUser("mgmt", "pw")), 200, "vhosts").array(t)
	if len(vhosts) != 1 || vhosts[0].(map[string]any)["name"] != "/" {
		t.Errorf("mgmt sees vhosts %v", vhosts)
	}
	if n := len(e.must(e.get("/api/vhosts", asUser("mon", "pw")), 200, "vhosts").array(t)); n != 2 {
		t.Errorf("monitoring user sees %d vhosts, want 2", n)
	}
	// Objects inside vhosts are listed only where the user has permissions,
	// even for monitoring users and administrators (RabbitMQ's filter_vhost).
	e.must(e.put("/api/permissions/other/guest", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201, "perm")
	e.must(e.put("/api/queues/other/hidden", map[string]any{}), 201, "hidden queue")
	e.must(e.put("/api/permissions/%2F/mon", map[string]string{"configure": "", "write": "", "read": ".*"}), 201, "perm mon")
	for _, u := range []string{"mon", "mgmt"} {
		for _, q := range e.must(e.get("/api/queues", asUser(u, "pw")), 200, "queues").array(t) {
			if q.(map[string]any)["vhost"] == "other" {
				t.Errorf("%s sees a queue of a vhost it has no permissions on", u)
			}
		}
	}
	if r := e.get("/api/queues/nosuch", asUser("mgmt", "pw")); r.status != 404 {
		t.Errorf("missing vhost for a non-admin: %d", r.status)
	}
	who := e.must(e.get("/api/whoami", asUser("adm", "pw")), 200, "whoami").object(t)
	if tags := who["tags"].([]any); len(tags) != 1 || tags[0] != "administrator" {
		t.Errorf("whoami tags %v", who["tags"])
	}
}

// TestMgmtHealthChecks covers the probes Kubernetes calls without
// credentials and the alarm check.
func TestMgmtHealthChecks(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"is-in-service", "ready-to-serve-clients", "below-node-connection-limit", "reached-target-cluster-size"} {
		r := e.get("/api/health/checks/"+p, noAuth())
		if r.status != 200 || r.object(t)["status"] != "ok" {
			t.Errorf("%s without credentials: %d %s", p, r.status, r.body)
		}
	}
	if r := e.get("/api/health/checks/alarms", noAuth()); r.status != 401 {
		t.Errorf("alarms check without credentials: %d", r.status)
	}
	e.must(e.get("/api/health/checks/alarms"), 200, "alarms")
	e.must(e.get("/api/health/checks/local-alarms"), 200, "local alarms")
	e.srv.SetMemoryHighWatermark(1)
	node := e.srv.NodeName()
	// 3.10.8's bodies: the reason differs between the two checks.
	for path, reason := range map[string]string{"alarms": "in the cluster", "local-alarms": "on the node"} {
		expectStatusJSON(t, e.get("/api/health/checks/"+path), 503, fmt.Sprintf(
			`{"status":"failed","reason":"There are alarms in effect %s","alarms":[{"node":%q,"resource":"memory"}]}`, reason, node))
	}
	e.srv.SetMemoryHighWatermark(0)
	e.must(e.get("/api/health/checks/local-alarms"), 200, "alarm cleared")
	e.must(e.get("/api/health/checks/alarms"), 200, "alarm cleared")
	_, amqpPort := splitPort(e.srv.Addr().String())
	_, mgmtPort := splitPort(e.api.Addr().String())
	expectStatusJSON(t, e.get("/api/health/checks/port-listener/"+amqpPort), 200, `{"status":"ok","port":`+amqpPort+`}`)
	expectStatusJSON(t, e.get("/api/health/checks/port-listener/1"), 503,
		`{"status":"failed","reason":"No active listener","missing":1,"ports":[`+amqpPort+`,`+mgmtPort+`]}`)
	expectStatusJSON(t, e.get("/api/health/checks/port-listener/x"), 400, `{"error":"bad_request","reason":"Invalid port"}`)
	for _, name := range []string{"amqp091", "AMQP0-9-1", "amqp"} {
		expectStatusJSON(t, e.get("/api/health/checks/protocol-listener/"+name), 200, `{"status":"ok","protocol":"amqp"}`)
	}
	expectStatusJSON(t, e.get("/api/health/checks/protocol-listener/management"), 200, `{"status":"ok","protocol":"http"}`)
	// Aliases are RabbitMQ's: amqps is amqp/ssl, which this node lacks.
	for name, missing := range map[string]string{"mqtt311": "mqtt", "amqps": "amqp/ssl", "stomp": "stomp"} {
		expectStatusJSON(t, e.get("/api/health/checks/protocol-listener/"+name), 503,
			`{"status":"failed","reason":"No active listener","missing":"`+missing+`","protocols":["amqp","http"]}`)
	}
	e.must(e.get("/api/aliveness-test/%2F"), 200, "aliveness")
	if r := e.get("/api/aliveness-test/nosuch"); r.status != 404 {
		t.Errorf("aliveness of a missing vhost: %d", r.status)
	}
}

// The node name comes from server.Config.NodeName: every "node" field of the
// API shows it, and it names the cluster until a name is set.
func TestMgmtNodeNameFromServerConfig(t *testing.T) {
	const name = "warren@seams-config"
	e := newEnv(t, func(sc *server.Config, _ *Config) { sc.NodeName = name })
	nodes := e.must(e.get("/api/nodes"), 200, "nodes").array(t)
	if len(nodes) != 1 || nodes[0].(map[string]any)["name"] != name {
		t.Fatalf("/api/nodes = %v, want one node %q", nodes, name)
	}
	e.must(e.get("/api/nodes/"+name), 200, "node")
	ov := e.get("/api/overview").object(t)
	if ov["node"] != name || ov["statistics_db_node"] != name || ov["cluster_name"] != name {
		t.Errorf("overview node %v statistics_db_node %v cluster_name %v, want %q",
			ov["node"], ov["statistics_db_node"], ov["cluster_name"], name)
	}
	for _, l := range ov["listeners"].([]any) {
		if n := l.(map[string]any)["node"]; n != name {
			t.Errorf("listener node %v, want %q", n, name)
		}
	}
	e.must(e.put("/api/queues/%2F/seams-q", map[string]any{"durable": true}), 201, "declare")
	if q := e.must(e.get("/api/queues/%2F/seams-q"), 200, "queue").object(t); q["node"] != name {
		t.Errorf("queue node %v, want %q", q["node"], name)
	}
}

func TestMgmtClusterNameAndNodes(t *testing.T) {
	e := newEnv(t)
	if got := e.get("/api/cluster-name").object(t)["name"]; got != testNode {
		t.Errorf("default cluster name %v", got)
	}
	r := e.put("/api/cluster-name", map[string]string{"name": "rabbitmq@localhost"})
	if r.status != 204 || len(r.body) != 0 {
		t.Fatalf("PUT cluster-name: %d %s", r.status, r.body)
	}
	if got := e.get("/api/overview").object(t)["cluster_name"]; got != "rabbitmq@localhost" {
		t.Errorf("overview cluster_name %v", got)
	}
	node := e.must(e.get("/api/nodes/"+testNode), 200, "node").object(t)
	if _, ok := node["os_pid"].(string); !ok {
		t.Errorf("os_pid must be a string: %v", node["os_pid"])
	}
	if num(t, node["uptime"]) <= 0 || node["running"] != true {
		t.Errorf("node uptime %v running %v", node["uptime"], node["running"])
	}
	if r := e.get("/api/nodes/other@host"); r.status != 404 {
		t.Errorf("unknown node: %d", r.status)
	}
	ov := e.get("/api/overview").object(t)
	if len(ov["exchange_types"].([]any)) < 4 {
		t.Errorf("exchange_types %v", ov["exchange_types"])
	}
}

// expectStatusJSON checks a response's status and that its body is the JSON
// want (object keys in any order).
func expectStatusJSON(t *testing.T, r *resp, status int, want string) {
	t.Helper()
	var got, w any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("status %d, body %s: %v", r.status, r.body, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if r.status != status || !reflect.DeepEqual(got, w) {
		t.Errorf("%d %s, want %d %s", r.status, strings.TrimSpace(string(r.body)), status, want)
	}
}
