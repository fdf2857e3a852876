package server

import (
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// TestDefinitionsNothingHalfApplied imports files whose last object is bad
// and checks that none of the earlier ones was applied.
func TestDefinitionsNothingHalfApplied(t *testing.T) {
	ts := startServer(t)
	good := Definitions{
		Vhosts:      []VhostDefinition{{Name: "new"}},
		Users:       []UserDefinition{{Name: "u", PasswordHash: HashPassword("p"), Tags: []string{"management"}}},
		Permissions: []PermissionInfo{{User: "u", Vhost: "new", Permission: Permission{".*", ".*", ".*"}}},
		Exchanges:   []ExchangeDefinition{{Vhost: "new", ExchangeSpec: ExchangeSpec{Name: "x", Type: "headers", Durable: true}}},
		Queues:      []QueueDefinition{{Vhost: "new", QueueSpec: QueueSpec{Name: "q", Durable: true}}},
		Bindings:    []BindingInfo{{Vhost: "new", Source: "x", Destination: "q", DestinationType: DestQueue, Arguments: amqp.Table{"x-match": "all", "a": "b"}}},
		Policies:    []Policy{{Vhost: "new", Name: "p", Pattern: ".*", ApplyTo: ApplyToAll, Definition: map[string]any{"max-length": int64(3)}}},
	}
	breakers := map[string]func(*Definitions){
		"headers binding with a bad x-match": func(d *Definitions) { d.Bindings[0].Arguments = amqp.Table{"x-match": "some"} },
		"binding from the default exchange":  func(d *Definitions) { d.Bindings[0].Source = "" },
		"queue with a reserved name": func(d *Definitions) {
			d.Queues = append(d.Queues, QueueDefinition{Vhost: "new", QueueSpec: QueueSpec{Name: "amq.q"}})
		},
		"exchange with a bad dedup setting": func(d *Definitions) {
			d.Exchanges[0].Arguments = amqp.Table{"x-message-deduplication": "yes"}
		},
		"operator policy with a user key": func(d *Definitions) {
			d.OperatorPolicies = []Policy{{Vhost: "new", Name: "o", Pattern: ".*", ApplyTo: ApplyToAll, Definition: map[string]any{"queue-mode": "lazy"}}}
		},
		"topic permission of a missing user": func(d *Definitions) {
			d.TopicPermissions = []TopicPermission{{User: "ghost", Vhost: "new", Exchange: "amq.topic"}}
		},
		"user with a bad hash":   func(d *Definitions) { d.Users[0].PasswordHash = "bad" },
		"parameter without name": func(d *Definitions) { d.Parameters = []Parameter{{Component: "shovel", Vhost: "new"}} },
	}
	for name, breakIt := range breakers {
		d := good
		d.Bindings = append([]BindingInfo(nil), good.Bindings...)
		d.Exchanges = append([]ExchangeDefinition(nil), good.Exchanges...)
		d.Users = append([]UserDefinition(nil), good.Users...)
		breakIt(&d)
		if err := ts.ImportDefinitions(d, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: import = %v, want ErrInvalid", name, err)
		}
		if ts.Vhost("new") != nil {
			t.Fatalf("%s: the vhost of a rejected file was created", name)
		}
		if _, err := ts.User("u"); err == nil {
			t.Fatalf("%s: the user of a rejected file was created", name)
		}
	}
	if err := ts.ImportDefinitions(good, ""); err != nil {
		t.Fatalf("good file: %v", err)
	}
	if err := ts.ImportDefinitions(good, ""); err != nil {
		t.Fatalf("importing the same file again: %v", err)
	}
	conn, err := amqp091.Dial("amqp://u:p@" + ts.addr + "/new")
	must(t, err)
	conn.Close()
}

func TestDefinitionsExport(t *testing.T) {
	ts := startServer(t)
	conn, ch := ts.channel(t)
	_ = conn
	mustDeclare(t, ch, "plain", nil)
	_, err := ch.QueueDeclare("mine", false, false, true, false, nil)
	must(t, err)
	must(t, ch.QueueBind("mine", "k", "amq.direct", false, nil))
	must(t, ch.QueueBind("plain", "k", "amq.direct", false, nil))
	d, err := ts.ExportDefinitions("")
	must(t, err)
	if len(d.Queues) != 1 || d.Queues[0].Name != "plain" {
		t.Errorf("exported queues %+v", d.Queues)
	}
	if len(d.Exchanges) != 0 {
		t.Errorf("built-in exchanges exported: %+v", d.Exchanges)
	}
	if len(d.Bindings) != 1 || d.Bindings[0].Destination != "plain" {
		t.Errorf("exported bindings %+v", d.Bindings)
	}
	if len(d.Users) != 1 || d.Users[0].PasswordHash == "" || d.Users[0].HashingAlgorithm != HashSHA256 {
		t.Errorf("exported users %+v", d.Users)
	}
	per, err := ts.ExportDefinitions("/")
	must(t, err)
	if per.Users != nil || per.Vhosts != nil {
		t.Error("per-vhost export carries users or vhosts")
	}
	if _, err := ts.ExportDefinitions("nosuch"); !errors.Is(err, ErrNoSuchVhost) {
		t.Errorf("export of a missing vhost: %v", err)
	}
}

// FuzzCheckPasswordHash checks that hash validation and verification agree:
// a hash that validates for its own algorithm never panics when checked.
func FuzzCheckPasswordHash(f *testing.F) {
	f.Add("", "")
	f.Add(HashPassword("x"), HashSHA256)
	f.Add("!!!", "")
	f.Add("AAAA", HashMD5)
	f.Fuzz(func(t *testing.T, hash, alg string) {
		if err := CheckPasswordHash(hash, alg); err != nil {
			return
		}
		if !validPasswordHash(hash) {
			t.Fatalf("%q passes CheckPasswordHash but not validPasswordHash", hash)
		}
		_ = checkPassword(hash, "password")
	})
}
