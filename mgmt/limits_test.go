package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/server"
)

// expectAMQPError fails unless err is the AMQP exception code with text,
// as amqp091-go reports RabbitMQ's.
func expectAMQPError(t *testing.T, what string, err error, code int, text string) {
	t.Helper()
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != code || ae.Reason != text {
		t.Fatalf("%s: %v, want %d %q", what, err, code, text)
	}
}

// expectJSON fails unless r has status 200 and a body equal to want (JSON).
func expectJSON(t *testing.T, r *resp, want string) {
	t.Helper()
	var got, w any
	if r.status != 200 {
		t.Fatalf("status %d; body %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("body %s, want %s", strings.TrimSpace(string(r.body)), want)
	}
}

// limitsEnv is a broker with a vhost "gp" that user gp-u (password p) may use.
func limitsEnv(t *testing.T, e *env) string {
	e.must(e.put("/api/vhosts/gp", nil), 201, "vhost gp")
	e.must(e.put("/api/users/gp-u", map[string]any{"password": "p", "tags": ""}), 201, "user gp-u")
	e.must(e.put("/api/permissions/gp/gp-u", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}), 201, "gp-u on gp")
	return "amqp://gp-u:p@" + e.srv.Addr().String() + "/gp"
}

// TestMgmtVhostLimitsRefuseConnectionsAndQueues sets a vhost's limits
// through /api/vhost-limits and checks they are shown as RabbitMQ shows them
// and enforced with its codes and texts: connection.open 530, queue.declare
// 406; 0 allows nothing, a negative limit none, and a deleted limit falls
// back to the node's default (none here).
func TestMgmtVhostLimitsRefuseConnectionsAndQueues(t *testing.T) {
	e := newEnv(t)
	url := limitsEnv(t, e)
	e.must(e.put("/api/vhost-limits/gp/max-connections", map[string]any{"value": 2}), 204, "max-connections")
	e.must(e.put("/api/vhost-limits/gp/max-queues", map[string]any{"value": 2}), 204, "max-queues")
	expectJSON(t, e.get("/api/vhost-limits"), `[{"vhost":"gp","value":{"max-connections":2,"max-queues":2}}]`)
	expectJSON(t, e.get("/api/vhost-limits/gp"), `[{"vhost":"gp","value":{"max-connections":2,"max-queues":2}}]`)
	expectJSON(t, e.get("/api/vhost-limits/%2F"), `[]`)
	expectJSON(t, e.get("/api/parameters/vhost-limits"),
		`[{"vhost":"gp","component":"vhost-limits","name":"limits","value":{"max-connections":2,"max-queues":2}}]`)

	c := e.dial(url)
	e.dial(url)
	_, err := amqp091.Dial(url)
	expectAMQPError(t, "third connection", err, 530, "NOT_ALLOWED - access to vhost 'gp' refused for user 'gp-u': connection limit (2) is reached")
	ch := e.channel(c)
	for i := range 2 {
		if _, err := ch.QueueDeclare(fmt.Sprintf("q%d", i), false, false, false, false, nil); err != nil {
			t.Fatalf("queue %d: %v", i, err)
		}
	}
	_, err = ch.QueueDeclare("q2", false, false, false, false, nil)
	expectAMQPError(t, "third queue", err, 406, "PRECONDITION_FAILED - cannot declare queue 'q2': queue limit in vhost 'gp' (2) is reached")

	e.must(e.put("/api/vhost-limits/gp/max-connections", map[string]any{"value": 0}), 204, "max-connections 0")
	_, err = amqp091.Dial(url)
	expectAMQPError(t, "connection with limit 0", err, 530, "NOT_ALLOWED - access to vhost 'gp' refused for user 'gp-u': connection limit (0) is reached")
	e.must(e.put("/api/vhost-limits/gp/max-connections", map[string]any{"value": -1}), 204, "max-connections -1")
	e.dial(url)
	e.must(e.do("DELETE", "/api/vhost-limits/gp/max-queues", nil), 204, "delete max-queues")
	expectJSON(t, e.get("/api/vhost-limits/gp"), `[{"vhost":"gp","value":{"max-connections":-1}}]`)
	ch = e.channel(e.dial(url))
	if _, err := ch.QueueDeclare("q2", false, false, false, false, nil); err != nil {
		t.Fatalf("queue after the limit's delete: %v", err)
	}
	e.must(e.do("DELETE", "/api/vhost-limits/gp/max-connections", nil), 204, "delete max-connections")
	expectJSON(t, e.get("/api/vhost-limits"), `[]`)
}

// TestMgmtUserLimitsRefuseConnectionsAndChannels sets a user's limits
// through /api/user-limits and checks RabbitMQ's listing (also on the user)
// and enforcement: connection.open and channel.open refused with 530, the
// channels counted over all the user's connections and released on close.
func TestMgmtUserLimitsRefuseConnectionsAndChannels(t *testing.T) {
	e := newEnv(t)
	url := limitsEnv(t, e)
	e.must(e.put("/api/user-limits/gp-u/max-connections", map[string]any{"value": 3}), 204, "max-connections")
	e.must(e.put("/api/user-limits/gp-u/max-channels", map[string]any{"value": 1}), 204, "max-channels")
	e.must(e.put("/api/user-limits/gp-u/max-connections", map[string]any{"value": 2}), 204, "max-connections lowered")
	expectJSON(t, e.get("/api/user-limits"), `[{"user":"gp-u","value":{"max-channels":1,"max-connections":2}}]`)
	expectJSON(t, e.get("/api/user-limits/gp-u"), `[{"user":"gp-u","value":{"max-channels":1,"max-connections":2}}]`)
	expectJSON(t, e.get("/api/user-limits/guest"), `[]`)
	if l := field(e.must(e.get("/api/users/gp-u"), 200, "user").object(t), "limits"); !reflect.DeepEqual(l, map[string]any{"max-channels": json.Number("1"), "max-connections": json.Number("2")}) {
		t.Fatalf("user's limits %v", l)
	}

	// Replacing the user keeps its limits; "limits" in the body adds to them.
	e.must(e.put("/api/users/gp-u", map[string]any{"password": "p", "tags": "management"}), 204, "user replaced")
	e.must(e.put("/api/users/gp-u", map[string]any{"password": "p", "tags": "", "limits": map[string]any{"max-connections": 2}}), 204, "user with limits")
	expectJSON(t, e.get("/api/user-limits/gp-u"), `[{"user":"gp-u","value":{"max-channels":1,"max-connections":2}}]`)
	expectBody(t, e.put("/api/users/gp-u", map[string]any{"password": "p", "tags": "", "limits": map[string]any{"max-channels": "x"}}),
		400, "bad_request", "max-channels should be a number, actually was <<\"x\">>")

	c1, c2 := e.dial(url), e.dial(url)
	_, err := amqp091.Dial(url)
	expectAMQPError(t, "third connection", err, 530, "NOT_ALLOWED - connection refused for user 'gp-u': user connection limit (2) is reached")
	ch := e.channel(c1)
	_, err = c2.Channel()
	expectAMQPError(t, "a second channel on another connection", err, 530,
		"NOT_ALLOWED - number of channels opened for user 'gp-u' has reached the maximum allowed user limit of (1)")
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	e.channel(c1) // the closed channel no longer counts

	e.must(e.do("DELETE", "/api/user-limits/gp-u/max-channels", nil), 204, "delete max-channels")
	e.must(e.put("/api/user-limits/gp-u/max-connections", map[string]any{"value": 0}), 204, "max-connections 0")
	_, err = amqp091.Dial(url)
	expectAMQPError(t, "connection with limit 0", err, 530, "NOT_ALLOWED - connection refused for user 'gp-u': user connection limit (0) is reached")
	e.must(e.do("DELETE", "/api/user-limits/gp-u/max-connections", nil), 204, "delete max-connections")
	expectJSON(t, e.get("/api/user-limits"), `[]`)
	e.channel(e.dial(url))
}

// TestMgmtLimitsAndParametersSurviveRestart sets limits and parameters,
// restarts on the same directory and finds them shown and enforced.
func TestMgmtLimitsAndParametersSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(s *server.Config, _ *Config) { s.DataDir = dir })
	url := limitsEnv(t, e)
	e.must(e.put("/api/vhost-limits/gp/max-connections", map[string]any{"value": 0}), 204, "vhost max-connections")
	e.must(e.put("/api/user-limits/gp-u/max-channels", map[string]any{"value": 0}), 204, "user max-channels")
	e.must(e.put("/api/parameters/federation-upstream/gp/up1", map[string]any{"value": map[string]any{"uri": "amqp://h"}}), 201, "upstream")
	e.must(e.put("/api/global-parameters/gp-note", map[string]any{"value": map[string]any{"a": []any{1, "b"}}}), 201, "global")
	e = restartEnv(t, e, dir)
	url = "amqp://gp-u:p@" + e.srv.Addr().String() + "/gp"

	expectJSON(t, e.get("/api/vhost-limits/gp"), `[{"vhost":"gp","value":{"max-connections":0}}]`)
	expectJSON(t, e.get("/api/user-limits/gp-u"), `[{"user":"gp-u","value":{"max-channels":0}}]`)
	expectJSON(t, e.get("/api/parameters/federation-upstream/gp/up1"),
		`{"vhost":"gp","component":"federation-upstream","name":"up1","value":{"uri":"amqp://h"}}`)
	expectJSON(t, e.get("/api/global-parameters/gp-note"), `{"name":"gp-note","value":{"a":[1,"b"]}}`)
	_, err := amqp091.Dial(url)
	expectAMQPError(t, "connection after restart", err, 530, "NOT_ALLOWED - access to vhost 'gp' refused for user 'gp-u': connection limit (0) is reached")
	e.must(e.do("DELETE", "/api/vhost-limits/gp/max-connections", nil), 204, "delete")
	_, err = e.dial(url).Channel()
	expectAMQPError(t, "channel after restart", err, 530,
		"NOT_ALLOWED - number of channels opened for user 'gp-u' has reached the maximum allowed user limit of (0)")
}

// TestMgmtParameterAndLimitAuthLevels checks the tags RabbitMQ 3.10 asks
// for: parameters and global parameters need policymaker, reading limits
// any management user, changing them administrator.
func TestMgmtParameterAndLimitAuthLevels(t *testing.T) {
	e := newEnv(t)
	limitsEnv(t, e)
	for _, tag := range []string{"management", "policymaker", "monitoring"} {
		e.must(e.put("/api/users/gp-"+tag, map[string]any{"password": "p", "tags": tag}), 201, tag)
		e.must(e.put("/api/permissions/gp/gp-"+tag, map[string]any{"configure": ".*", "write": ".*", "read": ".*"}), 201, tag)
	}
	upstream := map[string]any{"value": map[string]any{"uri": "amqp://h"}}
	limit := map[string]any{"value": 5}
	for _, c := range []struct {
		tag          string
		params, puts int // status of the parameter reads and writes
		limitPuts    int
	}{{"management", 401, 401, 401}, {"monitoring", 401, 401, 401}, {"policymaker", 200, 201, 401}} {
		as := asUser("gp-"+c.tag, "p")
		for _, p := range []string{"/api/parameters", "/api/parameters/federation-upstream", "/api/parameters/federation-upstream/gp", "/api/global-parameters"} {
			e.must(e.get(p, as), c.params, c.tag+" GET "+p)
		}
		e.must(e.put("/api/parameters/federation-upstream/gp/up-"+c.tag, upstream, as), c.puts, c.tag+" PUT parameter")
		e.must(e.put("/api/global-parameters/g-"+c.tag, limit, as), c.puts, c.tag+" PUT global parameter")
		for _, p := range []string{"/api/vhost-limits", "/api/vhost-limits/gp", "/api/user-limits", "/api/user-limits/gp-u"} {
			e.must(e.get(p, as), 200, c.tag+" GET "+p)
		}
		e.must(e.put("/api/vhost-limits/gp/max-queues", limit, as), c.limitPuts, c.tag+" PUT vhost limit")
		e.must(e.put("/api/user-limits/gp-u/max-channels", limit, as), c.limitPuts, c.tag+" PUT user limit")
	}
	expectJSON(t, e.get("/api/global-parameters/g-policymaker"), `{"name":"g-policymaker","value":5}`)
	e.must(e.do("DELETE", "/api/global-parameters/g-policymaker", nil, asUser("gp-policymaker", "p")), 204, "delete global")
	e.must(e.do("DELETE", "/api/parameters/federation-upstream/gp/up-policymaker", nil, asUser("gp-policymaker", "p")), 204, "delete parameter")
}

// TestMgmtDefinitionsCarryLimitsAndParameters imports a file with a user's
// limits, a vhost's limits and valid parameters, finds them enforced and
// exported as RabbitMQ exports them, and sees an invalid parameter or user
// limit refuse the whole import with RabbitMQ's text naming the object.
func TestMgmtDefinitionsCarryLimitsAndParameters(t *testing.T) {
	e := newEnv(t)
	file := `{"vhosts":[{"name":"gp"}],
	 "users":[{"name":"gp-u","password_hash":"","tags":"","limits":{"max-connections":0}}],
	 "permissions":[{"user":"gp-u","vhost":"gp","configure":".*","write":".*","read":".*"}],
	 "parameters":[{"vhost":"gp","component":"vhost-limits","name":"limits","value":{"max-queues":1}},
	  {"vhost":"gp","component":"federation-upstream","name":"up1","value":{"uri":["amqp://a","amqps://b"],"expires":1000}},
	  {"vhost":"gp","component":"shovel","name":"s1","value":{"src-uri":"amqp://","src-queue":"a","dest-uri":"amqp://","dest-queue":"b"}}],
	 "global_parameters":[{"name":"gp-note","value":"x"}],
	 "queues":[{"name":"q1","vhost":"gp","durable":true,"auto_delete":false,"arguments":{}}]}`
	e.must(e.do("POST", "/api/definitions", file), 204, "import")
	out := e.must(e.get("/api/definitions"), 200, "export").object(t)
	var user, limits any
	for _, u := range out["users"].([]any) {
		if u.(map[string]any)["name"] == "gp-u" {
			user = u
		}
	}
	if l := field(user, "limits"); !reflect.DeepEqual(l, map[string]any{"max-connections": json.Number("0")}) {
		t.Fatalf("exported user limits %v", l)
	}
	found := map[string]any{}
	for _, p := range out["parameters"].([]any) {
		pm := p.(map[string]any)
		found[pm["component"].(string)+"/"+pm["name"].(string)] = pm["value"]
	}
	limits = found["vhost-limits/limits"]
	if !reflect.DeepEqual(limits, map[string]any{"max-queues": json.Number("1")}) || found["federation-upstream/up1"] == nil || found["shovel/s1"] == nil {
		t.Fatalf("exported parameters %v", found)
	}
	expectJSON(t, e.get("/api/vhost-limits/gp"), `[{"vhost":"gp","value":{"max-queues":1}}]`)
	expectJSON(t, e.get("/api/user-limits/gp-u"), `[{"user":"gp-u","value":{"max-connections":0}}]`)

	// One more queue in gp is over the imported limit.
	expectBody(t, e.do("POST", "/api/definitions", `{"queues":[{"name":"q2","vhost":"gp","durable":true,"auto_delete":false,"arguments":{}}]}`),
		400, "bad_request", "Adding 1 queue(s) to virtual host \"gp\" would exceed the limit of 1 queue(s).\n\nThis virtual host currently has 1 queue(s) defined.\n\nImport aborted!")
	// A file whose own vhost-limits its queues exceed is refused before
	// anything is applied (RabbitMQ checks only the limits in force and
	// then fails part way, at the declare).
	expectBody(t, e.do("POST", "/api/definitions", `{"vhosts":[{"name":"gp2"}],
	 "parameters":[{"vhost":"gp2","component":"vhost-limits","name":"limits","value":{"max-queues":1}}],
	 "queues":[{"name":"a","vhost":"gp2","durable":true,"auto_delete":false,"arguments":{}},{"name":"b","vhost":"gp2","durable":true,"auto_delete":false,"arguments":{}}]}`),
		400, "bad_request", "Adding 2 queue(s) to virtual host \"gp2\" would exceed the limit of 1 queue(s).\n\nThis virtual host currently has 0 queue(s) defined.\n\nImport aborted!")
	e.must(e.get("/api/vhosts/gp2"), 404, "vhost of the refused import")
	// RabbitMQ 3.10's answer to this import, read off the reference node.
	bad := `{"parameters":[{"component":"federation-upstream","vhost":"gp","name":"bad1","value":{"urix":"amqp://x"}}],
	 "queues":[{"name":"never","vhost":"gp","durable":true,"auto_delete":false,"arguments":{}}]}`
	expectBody(t, e.do("POST", "/api/definitions", bad), 400, "bad_request",
		"Validation failed\n\nUnrecognised terms [{&lt;&lt;\"urix\"&gt;&gt;,&lt;&lt;\"amqp://x\"&gt;&gt;}] in bad1\nKey \"uri\" not found in bad1\n (gp/federation-upstream/bad1)")
	expectBody(t, e.do("POST", "/api/definitions", `{"parameters":[{"component":"nosuch","vhost":"gp","name":"bad1","value":{}}]}`), 400, "bad_request",
		"Validation failed\n\ncomponent nosuch not found\n (gp/nosuch/bad1)")
	// RabbitMQ answers 500 for this one; Warren says what is wrong.
	expectBody(t, e.do("POST", "/api/definitions", `{"users":[{"name":"gp-v","password_hash":"","tags":"","limits":{"max-connections":"x"}}]}`), 400, "bad_request",
		"max-connections should be a number, actually was &lt;&lt;\"x\"&gt;&gt; (user 'gp-v')")
	e.must(e.get("/api/queues/gp/never"), 404, "queue of the refused import")
	e.must(e.get("/api/users/gp-v"), 404, "user of the refused import")
}

// TestMgmtVhostLimitOverridesNodeDefault: the node-wide max-queues-per-vhost
// key is the default of every vhost; a vhost's max-queues replaces it (up or
// down) and, deleted, brings it back.
func TestMgmtVhostLimitOverridesNodeDefault(t *testing.T) {
	e := newEnv(t, func(sc *server.Config, _ *Config) { sc.MaxQueuesPerVhost = 1 })
	url := limitsEnv(t, e)
	ch := e.channel(e.dial(url))
	declare := func(name string) error {
		_, err := ch.QueueDeclare(name, false, false, false, false, nil)
		return err
	}
	if err := declare("d0"); err != nil {
		t.Fatal(err)
	}
	expectAMQPError(t, "over the node default", declare("d1"), 406,
		"PRECONDITION_FAILED - cannot declare queue 'd1': queue limit in vhost 'gp' (1) is reached")
	ch = e.channel(e.dial(url)) // the 406 closed the channel
	e.must(e.put("/api/vhost-limits/gp/max-queues", map[string]any{"value": 2}), 204, "max-queues 2")
	if err := declare("d1"); err != nil {
		t.Fatalf("second queue under the vhost's limit of 2: %v", err)
	}
	e.must(e.do("DELETE", "/api/vhost-limits/gp/max-queues", nil), 204, "delete max-queues")
	expectAMQPError(t, "default back", declare("d2"), 406,
		"PRECONDITION_FAILED - cannot declare queue 'd2': queue limit in vhost 'gp' (1) is reached")
}
