package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/amqp"
)

// importProbe is a definitions file that creates or overwrites one object of
// every kind, on top of the state importBaseline sets up.
func importProbe() Definitions {
	perm := Permission{Configure: ".*", Write: ".*", Read: ".*"}
	return Definitions{
		Vhosts: []VhostDefinition{{Name: "fresh"}, {Name: "other", VhostMeta: VhostMeta{Description: "after"}}},
		Users: []UserDefinition{
			{Name: "keep", PasswordHash: HashPassword("new"), Tags: []string{"administrator"}},
			{Name: "newbie", PasswordHash: HashPassword("p")},
		},
		Permissions: []PermissionInfo{{User: "keep", Vhost: "/", Permission: perm}, {User: "keep", Vhost: "other", Permission: perm},
			{User: "newbie", Vhost: "fresh", Permission: perm}},
		TopicPermissions: []TopicPermission{{User: "keep", Vhost: "/", Exchange: "amq.topic", Write: ".*", Read: ".*"},
			{User: "keep", Vhost: "/", Exchange: "old.topic", Write: ".*", Read: ".*"}},
		Parameters:       []Parameter{{Component: "shovel", Vhost: "/", Name: "s", Value: map[string]any{"src-uri": "amqp://", "src-queue": "a", "dest-uri": "amqp://"}}},
		GlobalParameters: []Parameter{{Name: "g", Value: "v"}},
		Policies: []Policy{
			{Vhost: "/", Name: "p", Pattern: "^pre", ApplyTo: ApplyToAll, Definition: map[string]any{"max-length": int64(9)}},
			{Vhost: "/", Name: "np", Pattern: "^nothing$", ApplyTo: ApplyToAll, Definition: map[string]any{"max-length": int64(1)}},
			{Vhost: "fresh", Name: "fp", Pattern: ".*", ApplyTo: ApplyToAll, Definition: map[string]any{"max-length": int64(1)}},
		},
		Exchanges: []ExchangeDefinition{
			{Vhost: "/", ExchangeSpec: ExchangeSpec{Name: "ix", Type: "direct", Durable: true}},
			{Vhost: "fresh", ExchangeSpec: ExchangeSpec{Name: "fx", Type: "fanout", Durable: true}},
		},
		Queues: []QueueDefinition{
			{Vhost: "/", QueueSpec: QueueSpec{Name: "iq1", Durable: true}},
			{Vhost: "/", QueueSpec: QueueSpec{Name: "iq2", Durable: true}},
			{Vhost: "/", QueueSpec: QueueSpec{Name: "iq3", Durable: true}},
			{Vhost: "/", QueueSpec: QueueSpec{Name: "iq4", Durable: true}},
			{Vhost: "fresh", QueueSpec: QueueSpec{Name: "fq", Durable: true}},
		},
		Bindings: []BindingInfo{
			{Vhost: "/", Source: "pre", Destination: "pre-q", DestinationType: DestQueue, RoutingKey: "new"},
			{Vhost: "/", Source: "ix", Destination: "iq1", DestinationType: DestQueue, RoutingKey: "k"},
		},
	}
}

// importBaseline creates what exists before the import.
func importBaseline(t *testing.T, ts *testServer) {
	t.Helper()
	old := "old"
	_, err := ts.PutVhost("other", VhostMeta{Description: "before"})
	must(t, err)
	_, err = ts.PutUser(UserSpec{Name: "keep", Password: &old, Tags: []string{"management"}})
	must(t, err)
	_, err = ts.SetPermission("keep", "/", Permission{Configure: "^keep$", Write: "^keep$", Read: "^keep$"})
	must(t, err)
	_, err = ts.SetTopicPermission(TopicPermission{User: "keep", Vhost: "/", Exchange: "old.topic", Write: "^old$", Read: "^old$"})
	must(t, err)
	_, err = ts.PutPolicy(Policy{Vhost: "/", Name: "p", Pattern: "^pre", ApplyTo: ApplyToAll, Definition: map[string]any{"max-length": int64(5)}}, false)
	must(t, err)
	_, err = ts.DeclareExchange("/", ExchangeSpec{Name: "pre", Type: "direct", Durable: true})
	must(t, err)
	_, err = ts.DeclareQueue("/", QueueSpec{Name: "pre-q", Durable: true})
	must(t, err)
	must(t, ts.Bind(BindingInfo{Vhost: "/", Source: "pre", Destination: "pre-q", DestinationType: DestQueue, RoutingKey: "old"}))
}

// checkBaselineOnly fails if anything of importProbe is left beside the
// baseline: in memory, and (after a restart) in meta.db and on disk.
func checkBaselineOnly(t *testing.T, ts *testServer, when string) {
	t.Helper()
	fail := func(format string, a ...any) { t.Fatalf(when+": "+format, a...) }
	if ts.Vhost("fresh") != nil {
		fail("the imported vhost is there")
	}
	// Vhost metadata is kept in memory only (meta.db stores the name), so
	// the description is checked before a restart only.
	if d := ts.Vhost("other").Meta().Description; d != "before" && when != "after a restart" {
		fail("the overwritten vhost's description is %q", d)
	}
	if _, err := ts.User("newbie"); err == nil {
		fail("the imported user is there")
	}
	if _, err := ts.Login("keep", "old", true); err != nil {
		fail("the overwritten user lost its password: %v", err)
	}
	if u, _ := ts.User("keep"); fmt.Sprint(u.Tags) != "[management]" {
		fail("the overwritten user has tags %v", u.Tags)
	}
	for _, p := range ts.Permissions() {
		if p.User == "keep" && (p.Vhost != "/" || p.Configure != "^keep$") || p.User == "newbie" {
			fail("permission %+v", p)
		}
	}
	if tp := ts.TopicPermissions(); len(tp) != 1 || tp[0].Exchange != "old.topic" || tp[0].Write != "^old$" {
		fail("topic permissions %v, want only the one on old.topic, unchanged", tp)
	}
	for _, p := range append(ts.Parameters(), ts.GlobalParameters()...) {
		if p.Name == "s" || p.Name == "g" {
			fail("parameter %+v", p)
		}
	}
	if p, err := ts.GetPolicy("/", "p", false); err != nil || fmt.Sprint(p.Definition["max-length"]) != "5" {
		fail("policy p is %+v (%v), want its max-length 5 back", p, err)
	}
	if p, err := ts.GetPolicy("/", "np", false); err == nil {
		fail("imported policy %+v is there", p)
	}
	vh := ts.Vhost("/")
	if vh.exchange("ix") != nil {
		fail("the imported exchange is there")
	}
	for _, q := range []string{"iq1", "iq2", "iq3", "iq4"} {
		if vh.queue(q) != nil {
			fail("imported queue %s is there", q)
		}
		if q != "iq3" { // iq3's path is blocked by the test's file
			if _, err := os.Stat(vh.storage.queueDir(q)); !errors.Is(err, os.ErrNotExist) {
				fail("the directory of imported queue %s: %v", q, err)
			}
		}
	}
	for _, b := range vh.Bindings() {
		if b.RoutingKey == "new" || b.Source == "ix" {
			fail("imported binding %+v", b)
		}
	}
	if vh.queue("pre-q") == nil || vh.exchange("pre") == nil || len(vh.queue("pre-q").Bindings()) != 2 { // the default exchange's and "old"
		fail("the baseline objects changed")
	}
}

// TestDefinitionsImportFailingQueueLeavesNothing: an import whose third
// queue cannot get its files (a file is in the way of its directory, as a
// broken disk would refuse it) fails naming that queue, and nothing of it
// stays: created objects are gone, overwritten ones are as before, in memory
// and, after a restart, in meta.db and on disk. With the obstacle gone the
// same file imports completely.
func TestDefinitionsImportFailingQueueLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	importBaseline(t, ts)
	blocker := ts.Vhost("/").storage.queueDir("iq3")
	must(t, os.MkdirAll(filepath.Dir(blocker), 0o755))
	must(t, os.WriteFile(blocker, []byte("in the way"), 0o644))

	err := ts.ImportDefinitions(importProbe(), "")
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.InternalError || !strings.Contains(ae.Text, "queue 'iq3' in vhost '/'") {
		t.Fatalf("import with a blocked queue directory: %v, want a 541 naming queue 'iq3'", err)
	}
	checkBaselineOnly(t, ts, "after the failed import")
	must(t, ts.Close())

	ts = startServer(t, withDataDir(dir))
	checkBaselineOnly(t, ts, "after a restart")
	must(t, os.Remove(blocker))
	must(t, ts.ImportDefinitions(importProbe(), ""))
	must(t, ts.Close())

	ts = startServer(t, withDataDir(dir))
	vh := ts.Vhost("/")
	for _, q := range []string{"iq1", "iq2", "iq3", "iq4", "pre-q"} {
		if vh.queue(q) == nil {
			t.Fatalf("queue %s missing after the successful import and a restart", q)
		}
	}
	if ts.Vhost("fresh") == nil || ts.Vhost("fresh").queue("fq") == nil || len(vh.queue("pre-q").Bindings()) != 3 {
		t.Fatal("the successful import is incomplete after a restart")
	}
	if _, err := ts.Login("keep", "new", true); err != nil {
		t.Fatalf("the imported password: %v", err)
	}
}

// TestDefinitionsImportQueueLimit: an import that would take a vhost past its
// queue limit is refused before anything is applied, with RabbitMQ's reason;
// queues that exist already do not count.
func TestDefinitionsImportQueueLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxQueuesPerVhost = 2 })
	_, err := ts.DeclareQueue("/", QueueSpec{Name: "q1"})
	must(t, err)
	d := Definitions{
		Exchanges: []ExchangeDefinition{{Vhost: "/", ExchangeSpec: ExchangeSpec{Name: "x", Type: "direct"}}},
		Queues: []QueueDefinition{
			{Vhost: "/", QueueSpec: QueueSpec{Name: "q1"}},
			{Vhost: "/", QueueSpec: QueueSpec{Name: "q2"}},
			{Vhost: "/", QueueSpec: QueueSpec{Name: "q3"}},
		},
	}
	err = ts.ImportDefinitions(d, "")
	want := "Adding 2 queue(s) to virtual host \"/\" would exceed the limit of 2 queue(s).\n\n" +
		"This virtual host currently has 1 queue(s) defined.\n\nImport aborted!"
	if !errors.Is(err, ErrInvalid) || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("import past the queue limit: %v", err)
	}
	if ts.Vhost("/").queue("q2") != nil || ts.Vhost("/").exchange("x") != nil {
		t.Fatal("an import refused for the queue limit applied something")
	}
	d.Queues = d.Queues[:2]
	must(t, ts.ImportDefinitions(d, ""))
	if ts.Vhost("/").queue("q2") == nil || ts.Vhost("/").exchange("x") == nil {
		t.Fatal("an import within the limit was not applied")
	}
}

// TestDefinitionsImportFailingBindingLeavesNothing: bindings are applied
// last, so a binding that fails (here to another connection's exclusive
// queue, which Warren refuses from the management side) must take back the
// bindings, queues and exchanges applied before it.
func TestDefinitionsImportFailingBindingLeavesNothing(t *testing.T) {
	ts := startServer(t)
	importBaseline(t, ts)
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("excl", false, false, true, false, nil)
	must(t, err)
	d := importProbe()
	d.Queues = slices.DeleteFunc(d.Queues, func(q QueueDefinition) bool { return q.Name == "iq3" })
	d.Bindings = append(d.Bindings, BindingInfo{Vhost: "/", Source: "amq.direct", Destination: "excl", DestinationType: DestQueue, RoutingKey: "k"})
	err = ts.ImportDefinitions(d, "")
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.ResourceLocked || !strings.Contains(ae.Text, "binding from exchange 'amq.direct'") {
		t.Fatalf("import binding another connection's exclusive queue: %v, want a 405 naming the binding", err)
	}
	checkBaselineOnly(t, ts, "after the failed binding")
}

// An import tells apart names that differ only around a NUL: a binding to
// queue "a\x00b" of vhost "v" is refused when only queue "b" of vhost
// "v\x00a" exists, and a failed import unbinds the binding to "q\x00x" it
// made even though the binding to "q" with key "x\x00y" was there before.
func TestDefinitionsImportTellsNULNamesApart(t *testing.T) {
	ts := startServer(t)
	declareNULDefinitions(t, ts)
	missing := Definitions{Bindings: []BindingInfo{{Vhost: "v", Source: "amq.direct", Destination: "a\x00b", DestinationType: DestQueue, RoutingKey: "k"}}}
	must(t, ts.DeleteQueue("v", "a\x00b", false, false))
	if err := ts.ImportDefinitions(missing, ""); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "destination does not exist") {
		t.Fatalf("import of a binding to a missing queue: %v, want ErrInvalid: destination does not exist", err)
	}

	must(t, ts.Unbind(BindingInfo{Vhost: "/", Source: "amq.direct", Destination: "q\x00x", DestinationType: DestQueue, RoutingKey: "y"}))
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("excl", false, false, true, false, nil)
	must(t, err)
	failing := Definitions{Bindings: []BindingInfo{
		{Vhost: "/", Source: "amq.direct", Destination: "q\x00x", DestinationType: DestQueue, RoutingKey: "y"},
		{Vhost: "/", Source: "amq.direct", Destination: "excl", DestinationType: DestQueue, RoutingKey: "k"},
	}}
	var ae *amqp.Error
	if err := ts.ImportDefinitions(failing, ""); !errors.As(err, &ae) || ae.Code != amqp.ResourceLocked {
		t.Fatalf("import binding another connection's exclusive queue: %v, want 405", err)
	}
	if n := len(ts.Vhost("/").LookupQueue("q\x00x").Bindings()); n != 1 {
		t.Errorf(`queue "q\x00x" has %d bindings after the failed import, want only the default exchange's`, n)
	}
	if n := len(ts.Vhost("/").LookupQueue("q").Bindings()); n != 4 {
		t.Errorf(`queue "q" has %d bindings after the failed import, want its 4`, n)
	}
}
