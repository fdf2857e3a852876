package mgmt

import (
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// addUser creates a user with password "pw", tags and full permissions on "/".
func (e *env) addUser(name, tags string) {
	e.t.Helper()
	e.must(e.put("/api/users/"+name, map[string]any{"password": "pw", "tags": tags}), 201, "user "+name)
	e.must(e.put("/api/permissions/%2F/"+name, map[string]any{"configure": ".*", "write": ".*", "read": ".*"}), 201, "permissions of "+name)
}

// expectBody fails unless r has status and the error body RabbitMQ sends.
func expectBody(t *testing.T, r *resp, status int, errName, reason string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if m := r.object(t); m["error"] != errName || m["reason"] != reason {
		t.Fatalf("body %s, want error %q reason %q", r.body, errName, reason)
	}
}

// TestMgmtOperatorPoliciesNeedAdministrator checks RabbitMQ 3.10's
// authorisation of policies: one operator policy, read or written, needs
// administrator (a policymaker gets 401 "Not administrator user"); one
// policy needs policymaker; the lists need only access to the vhost.
func TestMgmtOperatorPoliciesNeedAdministrator(t *testing.T) {
	e := newEnv(t)
	e.addUser("pm", "policymaker")
	e.addUser("mg", "management")
	pm, mg := asUser("pm", "pw"), asUser("mg", "pw")
	policy := map[string]any{"pattern": "^x", "apply-to": "queues", "definition": map[string]any{"max-length": 10}}
	e.must(e.put("/api/operator-policies/%2F/op", policy), 201, "operator policy as administrator")

	expectBody(t, e.put("/api/operator-policies/%2F/op2", policy, pm), 401, "not_authorised", "Not administrator user")
	expectBody(t, e.do("DELETE", "/api/operator-policies/%2F/op", nil, pm), 401, "not_authorised", "Not administrator user")
	expectBody(t, e.get("/api/operator-policies/%2F/op", pm), 401, "not_authorised", "Not administrator user")
	e.must(e.get("/api/operator-policies/%2F/op"), 200, "operator policy still there")
	if n := len(e.must(e.get("/api/operator-policies/%2F", pm), 200, "list as policymaker").array(t)); n != 1 {
		t.Fatalf("policymaker lists %d operator policies", n)
	}
	e.must(e.get("/api/operator-policies", mg), 200, "list as management user")

	e.must(e.put("/api/policies/%2F/p", policy, pm), 201, "policy as policymaker")
	e.must(e.get("/api/policies/%2F/p", pm), 200, "policy as policymaker")
	expectBody(t, e.get("/api/policies/%2F/p", mg), 401, "not_authorised", "User not authorised to access object")
	e.must(e.get("/api/policies/%2F", mg), 200, "policies list as management user")
	e.must(e.do("DELETE", "/api/policies/%2F/p", nil, pm), 204, "delete policy as policymaker")
}

// contentType sets the request's Content-Type, or removes it for "".
func contentType(ct string) reqOpt {
	return func(r *http.Request) {
		if ct == "" {
			r.Header.Del("Content-Type")
			return
		}
		r.Header.Set("Content-Type", ct)
	}
}

// TestMgmtStateChangesNeedJSON checks that PUT and POST bodies must be
// declared application/json: a cross-site form can send text/plain,
// form-encoded and multipart bodies with a browser's cached credentials.
// RabbitMQ answers 415 with an empty body (its definitions, limits and
// operator-policy endpoints; the rest accept any type, Warren does not).
func TestMgmtStateChangesNeedJSON(t *testing.T) {
	e := newEnv(t)
	defs := `{"vhosts":[{"name":"imported"}]}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json-patch+json", ""} {
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/api/definitions", defs},
			{"PUT", "/api/vhosts/v", "{}"},
			{"PUT", "/api/queues/%2F/q", "{}"},
			{"POST", "/api/bindings/%2F/e/amq.direct/q/q", `{"routing_key":"k"}`},
		} {
			r := e.do(rq.method, rq.path, rq.body, contentType(ct))
			if r.status != 415 || len(r.body) != 0 {
				t.Fatalf("%s %s as %q: %d %q, want 415 and no body", rq.method, rq.path, ct, r.status, r.body)
			}
		}
	}
	e.must(e.get("/api/vhosts/imported"), 404, "vhost of a refused import")
	e.must(e.get("/api/vhosts/v"), 404, "vhost of a refused PUT")
	e.must(e.do("POST", "/api/definitions", nil, contentType("")), 415, "POST without body or type")

	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		e.must(e.do("POST", "/api/definitions", defs, contentType(ct)), 204, "import as "+ct)
	}
	// A PUT without body or type carries nothing a form could forge
	// (`curl -X PUT .../api/vhosts/v`, as RabbitMQ's documentation shows).
	e.must(e.do("PUT", "/api/vhosts/v", nil), 201, "PUT without body")
	e.must(e.do("DELETE", "/api/vhosts/v", nil), 204, "DELETE without body")
	// Authentication comes first, as in RabbitMQ.
	e.must(e.do("POST", "/api/definitions", defs, withHeader("Content-Type", "text/plain"), noAuth()), 401, "unauthenticated")
}

// TestMgmtPublishAndBindCheckTopicPermissions checks the API's publish and
// binding endpoints against topic permissions and the user-id rule, with
// the answers RabbitMQ 3.10 gives (it acts over a channel as the user).
func TestMgmtPublishAndBindCheckTopicPermissions(t *testing.T) {
	e := newEnv(t)
	e.addUser("app", "management")
	app := asUser("app", "pw")
	e.must(e.put("/api/topic-permissions/%2F/app", map[string]any{"exchange": "amq.topic", "write": `^{username}\.`, "read": `^{username}\.`}), 201, "topic permission")
	e.must(e.put("/api/queues/%2F/q", map[string]any{}), 201, "queue")
	pub := func(key string, props map[string]any) *resp {
		return e.do("POST", "/api/exchanges/%2F/amq.topic/publish", map[string]any{"routing_key": key, "payload": "x", "payload_encoding": "string", "properties": props}, app)
	}
	e.must(pub("app.a", map[string]any{}), 200, "allowed key")
	expectBody(t, pub("other", map[string]any{}), 400, "bad_request",
		"403 ACCESS_REFUSED - access to topic 'other' in exchange 'amq.topic' in vhost '/' refused for user 'app'")
	expectBody(t, pub("app.a", map[string]any{"user_id": "guest"}), 400, "bad_request",
		"406 PRECONDITION_FAILED - user_id property set to 'guest' but authenticated user was 'app'")
	e.must(pub("app.a", map[string]any{"user_id": "app"}), 200, "own user_id")

	e.must(e.do("POST", "/api/bindings/%2F/e/amq.topic/q/q", map[string]any{"routing_key": "app.b"}, app), 201, "allowed binding")
	expectBody(t, e.do("POST", "/api/bindings/%2F/e/amq.topic/q/q", map[string]any{"routing_key": "other"}, app), 401, "not_authorised", "Access refused.")
	e.must(e.do("POST", "/api/bindings/%2F/e/amq.topic/q/q", map[string]any{"routing_key": "other"}), 201, "guest has no topic permission")
	expectBody(t, e.do("DELETE", "/api/bindings/%2F/e/amq.topic/q/q/other", nil, app), 401, "not_authorised", "Access refused.")
	e.must(e.do("DELETE", "/api/bindings/%2F/e/amq.topic/q/q/app.b", nil, app), 204, "allowed unbinding")
}

// TestMgmtDeleteUserClosesConnections checks DELETE /api/users/{user}
// closes the user's AMQP connections with RabbitMQ's 320.
func TestMgmtDeleteUserClosesConnections(t *testing.T) {
	e := newEnv(t)
	e.addUser("gone", "")
	conn, err := amqp091.Dial("amqp://gone:pw@" + e.srv.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	e.must(e.do("DELETE", "/api/users/gone", nil), 204, "delete user")
	select {
	case ae := <-closed:
		if ae == nil || ae.Code != 320 || ae.Reason != "CONNECTION_FORCED - user 'gone' is deleted" {
			t.Fatalf("close: %v", ae)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection of a deleted user still open after 5s")
	}
}
