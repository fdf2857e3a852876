package mgmt

import (
	"errors"
	"net/http"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestMgmtRabbitHoleClient drives the API with rabbit-hole v2, the Go
// client operators (and Terraform's provider, and RabbitMQ's topology
// operator) use, through the calls they make most: overview, vhosts, users,
// permissions, queues, exchanges, bindings, policies and definitions. It
// uses a vhost with a slash in its name, as rabbit-hole's own suite does,
// so every path carries a %2F.
func TestMgmtRabbitHoleClient(t *testing.T) {
	e := newEnv(t)
	rh, err := rabbithole.NewClient(e.base, "guest", "guest")
	if err != nil {
		t.Fatal(err)
	}
	const vh = "rabbit/hole"
	created(t, "vhost", func() (*http.Response, error) {
		return rh.PutVhost(vh, rabbithole.VhostSettings{Description: "made by rabbit-hole", Tags: rabbithole.VhostTags{"rh"}})
	})
	v, err := rh.GetVhost(vh)
	if err != nil || v.Name != vh || v.Description != "made by rabbit-hole" {
		t.Fatalf("GetVhost: %+v, %v", v, err)
	}
	created(t, "guest's permissions", func() (*http.Response, error) {
		return rh.UpdatePermissionsIn(vh, "guest", rabbithole.Permissions{Configure: ".*", Write: ".*", Read: ".*"})
	})
	rhUsers(t, rh, e, vh)
	rhTopology(t, rh, e, vh)

	ov, err := rh.Overview()
	if err != nil || ov.RabbitMQVersion == "" || len(ov.ExchangeTypes) < 4 || ov.ObjectTotals.Queues != 1 || ov.QueueTotals.Messages != 2 {
		t.Fatalf("Overview: %+v, %v", ov, err)
	}
	rhDefinitions(t, rh, vh)

	created(t, "delete vhost", func() (*http.Response, error) { return rh.DeleteVhost(vh) })
	// rabbit-hole reports a status >= 400 as an ErrorResponse and treats a
	// DELETE answered 404 as done; a GET of a missing vhost is RabbitMQ's 404.
	if _, err := rh.GetVhost(vh); !isStatus(err, 404) {
		t.Fatalf("GetVhost of a deleted vhost: %v, want a 404 ErrorResponse", err)
	}
}

// rhUsers creates a user from a password and one from the first user's
// hash, gives both permissions and logs in with each.
func rhUsers(t *testing.T, rh *rabbithole.Client, e *env, vh string) {
	t.Helper()
	created(t, "user", func() (*http.Response, error) {
		return rh.PutUser("rh-app", rabbithole.UserSettings{Password: "rh-secret", Tags: rabbithole.UserTags{"management"}})
	})
	u, err := rh.GetUser("rh-app")
	if err != nil || u.PasswordHash == "" || u.HashingAlgorithm != rabbithole.HashingAlgorithmSHA256 || len(u.Tags) != 1 {
		t.Fatalf("GetUser: %+v, %v", u, err)
	}
	created(t, "user from a hash", func() (*http.Response, error) {
		return rh.PutUser("rh-copy", rabbithole.UserSettings{PasswordHash: u.PasswordHash, HashingAlgorithm: u.HashingAlgorithm})
	})
	for _, name := range []string{"rh-app", "rh-copy"} {
		created(t, "permissions", func() (*http.Response, error) {
			return rh.UpdatePermissionsIn(vh, name, rabbithole.Permissions{Configure: "^rh", Write: ".*", Read: ".*"})
		})
		p, err := rh.GetPermissionsIn(vh, name)
		if err != nil || p.Configure != "^rh" || p.User != name || p.Vhost != vh {
			t.Fatalf("GetPermissionsIn %s: %+v, %v", name, p, err)
		}
		e.dial("amqp://" + name + ":rh-secret@" + e.srv.Addr().String() + "/rabbit%2Fhole")
	}
	users, err := rh.ListUsers()
	if err != nil || len(users) != 3 {
		t.Fatalf("ListUsers: %d users, %v; want guest, rh-app, rh-copy", len(users), err)
	}
	created(t, "delete user", func() (*http.Response, error) { return rh.DeleteUser("rh-copy") })
}

// rhTopology declares a queue, an exchange, a binding and a policy with
// rabbit-hole, publishes over AMQP and reads them back.
func rhTopology(t *testing.T, rh *rabbithole.Client, e *env, vh string) {
	t.Helper()
	created(t, "queue", func() (*http.Response, error) {
		return rh.DeclareQueue(vh, "rh.q", rabbithole.QueueSettings{Durable: true, Arguments: map[string]any{"x-max-priority": 5}})
	})
	created(t, "exchange", func() (*http.Response, error) {
		return rh.DeclareExchange(vh, "rh.x", rabbithole.ExchangeSettings{Type: "topic", Durable: true})
	})
	b := rabbithole.BindingInfo{Source: "rh.x", Destination: "rh.q", DestinationType: "queue", RoutingKey: "a.#",
		Arguments: map[string]any{}}
	created(t, "binding", func() (*http.Response, error) { return rh.DeclareBinding(vh, b) })
	bs, err := rh.ListQueueBindingsBetween(vh, "rh.x", "rh.q")
	if err != nil || len(bs) != 1 || bs[0].RoutingKey != "a.#" || bs[0].PropertiesKey == "" {
		t.Fatalf("ListQueueBindingsBetween: %+v, %v", bs, err)
	}
	all, err := rh.ListBindingsIn(vh)
	if err != nil || len(all) != 2 { // the default exchange's and ours
		t.Fatalf("ListBindingsIn: %+v, %v", all, err)
	}
	created(t, "policy", func() (*http.Response, error) {
		return rh.PutPolicy(vh, "rh-cap", rabbithole.Policy{Pattern: "^rh\\.", ApplyTo: "queues", Priority: 1,
			Definition: rabbithole.PolicyDefinition{"max-length": 2}})
	})
	pol, err := rh.GetPolicy(vh, "rh-cap")
	if err != nil || pol.ApplyTo != "queues" || pol.Definition["max-length"] != float64(2) {
		t.Fatalf("GetPolicy: %+v, %v", pol, err)
	}

	ch, err := e.dial("amqp://guest:guest@" + e.srv.Addr().String() + "/rabbit%2Fhole").Channel()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // max-length 2 keeps two
		if err := ch.Publish("rh.x", "a.b", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		q, err := rh.GetQueue(vh, "rh.q")
		if err == nil && q.Messages == 2 && q.Policy == "rh-cap" && q.Arguments["x-max-priority"] == float64(5) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetQueue: %+v, %v; want 2 messages under policy rh-cap", q, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	created(t, "delete binding", func() (*http.Response, error) { return rh.DeleteBinding(vh, bs[0]) })
	if bs, err := rh.ListQueueBindingsBetween(vh, "rh.x", "rh.q"); err != nil || len(bs) != 0 {
		t.Fatalf("bindings after DeleteBinding: %+v, %v", bs, err)
	}
}

// rhDefinitions exports, deletes the exchange and imports the export again.
func rhDefinitions(t *testing.T, rh *rabbithole.Client, vh string) {
	t.Helper()
	defs, err := rh.ListDefinitions()
	if err != nil || defs.Queues == nil || defs.Exchanges == nil {
		t.Fatalf("ListDefinitions: %+v, %v", defs, err)
	}
	found := false
	for _, x := range *defs.Exchanges {
		found = found || (x.Name == "rh.x" && x.Vhost == vh && x.Type == "topic")
	}
	if !found {
		t.Fatalf("export lacks exchange rh.x: %+v", *defs.Exchanges)
	}
	created(t, "delete exchange", func() (*http.Response, error) { return rh.DeleteExchange(vh, "rh.x") })
	if _, err := rh.GetExchange(vh, "rh.x"); !isStatus(err, 404) {
		t.Fatalf("GetExchange of a deleted exchange: %v, want 404", err)
	}
	// rabbit-hole decodes permissions into a struct without user and vhost,
	// so it cannot upload them again (RabbitMQ 3.10 refuses them with 400
	// too); the rest of its export goes back as it came.
	defs.Permissions = nil
	created(t, "import", func() (*http.Response, error) { return rh.UploadDefinitions(defs) })
	if x, err := rh.GetExchange(vh, "rh.x"); err != nil || x.Type != "topic" || !x.Durable {
		t.Fatalf("GetExchange after the import: %+v, %v", x, err)
	}
}

// created runs a rabbit-hole call that must succeed with a 2xx status.
func created(t *testing.T, what string, call func() (*http.Response, error)) {
	t.Helper()
	res, err := call()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s: status %d", what, res.StatusCode)
	}
}

func isStatus(err error, code int) bool {
	var er rabbithole.ErrorResponse
	return errors.As(err, &er) && er.StatusCode == code
}
