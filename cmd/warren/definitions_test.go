package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// guestHash is the reference node's hash of guest's password "guest"
// (GET /api/users/guest of RabbitMQ 3.10.8).
const guestHash = "TVymHo83lvsoJj5hio51OTgsMtqTC/3VV/Cfmh5a8kVAV1tD"

// bootAccounts creates the vhost and user the topology file uses; the hash is
// RabbitMQ 3.10.8's of s3cret-app (testdata/definitions).
const bootAccounts = `{"rabbit_version": "3.10.8",
 "users": [{"name": "boot-app", "password_hash": "RS4gbTrWneE3azn7cktvFcyqjY283KYrquyzx9t8UVuvz0tl",
            "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []}],
 "vhosts": [{"name": "boot"}],
 "permissions": [{"user": "boot-app", "vhost": "boot", "configure": ".*", "write": ".*", "read": ".*"}]}`

const bootTopology = `{"policies": [{"vhost": "boot", "name": "cap", "pattern": "^boot\\.", "apply-to": "queues",
               "definition": {"max-length": 2, "queue-version": 2}, "priority": 0}],
 "queues": [{"name": "boot.q", "vhost": "boot", "durable": true, "auto_delete": false, "arguments": {}}],
 "exchanges": [{"name": "boot.x", "vhost": "boot", "type": "fanout", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}],
 "bindings": [{"source": "boot.x", "vhost": "boot", "destination": "boot.q", "destination_type": "queue", "routing_key": "", "arguments": {}}]}`

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
}

// bootQueueDepth connects as the file's user and returns boot.q's depth.
func bootQueueDepth(t *testing.T, addr string) (int, *amqp091.Channel) {
	t.Helper()
	c, err := amqp091.Dial("amqp://boot-app:s3cret-app@" + addr + "/boot")
	must(t, err)
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	must(t, err)
	q, err := ch.QueueDeclarePassive("boot.q", true, false, false, false, nil)
	must(t, err)
	return q.Messages, ch
}

// TestLoadDefinitionsAtBoot: load-definitions names a directory; its .json
// files are imported in name order before the listener opens (the topology
// file needs the accounts file's vhost), other files are not read, and the
// policy applies. A restart with the same directory keeps the queue and its
// messages as they are.
func TestLoadDefinitionsAtBoot(t *testing.T) {
	quiet(t)
	dir, data := t.TempDir(), t.TempDir()
	writeFiles(t, dir, map[string]string{"20-topology.json": bootTopology, "10-accounts.json": bootAccounts,
		"notes.txt": "not definitions"})
	addr := freePort(t)
	args := []string{"--amqp-listen", addr, "--mgmt-listen", "", "--metrics-listen", "", "--data-dir", data, "--load-definitions", dir, "--login-failure-delay", "1ms"}
	stop := startRun(t, addr, args...)
	depth, ch := bootQueueDepth(t, addr)
	if depth != 0 {
		t.Fatalf("boot.q has %d messages at first boot", depth)
	}
	for i := 0; i < 3; i++ {
		must(t, ch.Publish("boot.x", "", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("m")}))
	}
	must(t, ch.Close())
	if depth, _ = bootQueueDepth(t, addr); depth != 2 {
		t.Fatalf("boot.q has %d messages, want 2 (the file's max-length policy)", depth)
	}
	stop()

	stop = startRun(t, addr, args...)
	defer stop()
	if depth, _ = bootQueueDepth(t, addr); depth != 2 {
		t.Fatalf("after a restart with the same definitions boot.q has %d messages, want the 2 it had", depth)
	}
}

// TestLoadDefinitionsSkipsDefaultUser: as RabbitMQ, a first boot that
// imports definitions creates no default user, so guest/guest is refused;
// a node first started without the key keeps the guest it made then.
func TestLoadDefinitionsSkipsDefaultUser(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"accounts.json": bootAccounts})
	addr := freePort(t)
	base := []string{"--amqp-listen", addr, "--mgmt-listen", "", "--metrics-listen", "", "--login-failure-delay", "1ms"}
	stop := startRun(t, addr, append(base, "--data-dir", t.TempDir(), "--load-definitions", dir)...)
	_, err := amqp091.Dial("amqp://guest:guest@" + addr + "/")
	if e, ok := err.(*amqp091.Error); !ok || e.Code != 403 {
		t.Errorf("guest on a first boot with load-definitions: %v, want 403", err)
	}
	stop()

	data := t.TempDir()
	stop = startRun(t, addr, append(base, "--data-dir", data)...)
	stop()
	stop = startRun(t, addr, append(base, "--data-dir", data, "--load-definitions", dir)...)
	defer stop()
	c, err := amqp091.Dial("amqp://guest:guest@" + addr + "/")
	if err != nil {
		t.Fatalf("guest made at an earlier first boot: %v", err)
	}
	c.Close()
	if c, err = amqp091.Dial("amqp://boot-app:s3cret-app@" + addr + "/boot"); err != nil {
		t.Fatalf("the file's user next to guest: %v", err)
	}
	c.Close()
}

// TestLoadDefinitionsBrokenFileStopsStart: a file that does not import stops
// start-up with exit 1, naming the file and the entry; so does one that is
// not JSON and a path that does not exist. The listener never opens.
func TestLoadDefinitionsBrokenFileStopsStart(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	badQueue := filepath.Join(dir, "bad-queue.json")
	badJSON := filepath.Join(dir, "bad-json.json")
	writeFiles(t, dir, map[string]string{
		"bad-queue.json": `{"queues": [{"name": "q", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {"x-max-length": "ten"}}]}`,
		"bad-json.json":  `{"queues": [`,
	})
	for _, c := range []struct{ path, want string }{
		{badQueue, "load-definitions: " + badQueue + ": queue 'q' in vhost '/': "},
		{badJSON, "load-definitions: " + badJSON + ": not valid JSON"},
		{filepath.Join(dir, "missing.json"), "load-definitions: stat " + filepath.Join(dir, "missing.json")},
	} {
		addr := freePort(t)
		out := runFails(t, "--amqp-listen", addr, "--mgmt-listen", "", "--metrics-listen", "", "--data-dir", t.TempDir(),
			"--load-definitions", c.path)
		if !strings.Contains(out, c.want) {
			t.Errorf("stderr %q, want it to contain %q", out, c.want)
		}
		if conn, err := amqp091.Dial("amqp://guest:guest@" + addr + "/"); err == nil {
			conn.Close()
			t.Errorf("%s: the AMQP listener opened", c.path)
		}
	}
}

// TestLoadDefinitionsRabbitMQExports boots with load-definitions naming
// testdata/definitions, the files of RabbitMQ 3.10 to 4.1 (imported in name
// order, each over the objects of the ones before), and checks their objects
// are served: users log in with RabbitMQ's hashes, the queues exist, the
// vhost's default queue type applies to declares, and a restart with the
// same directory starts and serves the same.
func TestLoadDefinitionsRabbitMQExports(t *testing.T) {
	quiet(t)
	data, addr, defs := t.TempDir(), freePort(t), t.TempDir()
	// The files grant guest permissions but, filtered from a real export,
	// leave out the exporting node's own guest user; a boot with
	// load-definitions makes no guest (as RabbitMQ), so 00-guest.json
	// gives it back first, as the unfiltered export had it.
	files := map[string]string{"00-guest.json": `{"users": [{"name": "guest", "password_hash": "` +
		guestHash + `", "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"]}]}`}
	shared, err := filepath.Glob(filepath.Join("..", "..", "testdata", "definitions", "*.json"))
	must(t, err)
	for _, f := range shared {
		b, err := os.ReadFile(f)
		must(t, err)
		files[filepath.Base(f)] = string(b)
	}
	writeFiles(t, defs, files)
	args := []string{"--amqp-listen", addr, "--mgmt-listen", "", "--metrics-listen", "", "--data-dir", data,
		"--load-definitions", defs}
	for round := 0; round < 2; round++ {
		stop := startRun(t, addr, args...)
		c, err := amqp091.Dial("amqp://seams-admin:s3cret-admin@" + addr + "/seams-orders")
		must(t, err)
		ch, err := c.Channel()
		must(t, err)
		for _, q := range []string{"orders.quorum", "orders.classic", "app.transient"} {
			if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
				t.Fatalf("round %d: %s: %v", round, q, err)
			}
		}
		// orders.dead has no arguments in the files. The first file (3.10.8)
		// made it a classic queue; the later ones keep it and give its
		// vhost the default queue type quorum, so a redeclare as classic is
		// equivalent and one without x-queue-type, now made quorum, is not.
		if _, err := ch.QueueDeclare("orders.dead", true, false, false, false, amqp091.Table{"x-queue-type": "classic"}); err != nil {
			t.Fatalf("round %d: orders.dead is not a classic queue: %v", round, err)
		}
		_, err = ch.QueueDeclare("orders.dead", true, false, false, false, nil)
		if e, ok := err.(*amqp091.Error); !ok || e.Code != 406 || !strings.Contains(e.Reason, "inequivalent arg 'x-queue-type'") {
			t.Fatalf("round %d: redeclaring orders.dead without x-queue-type: %v, want 406 for x-queue-type", round, err)
		}
		c.Close()
		c, err = amqp091.Dial("amqp://guest:guest@" + addr + "/seams-events")
		must(t, err)
		ch, err = c.Channel()
		must(t, err)
		if _, err := ch.QueueDeclarePassive("events.stream", true, false, false, false, nil); err != nil {
			t.Fatalf("round %d: events.stream: %v", round, err)
		}
		c.Close()
		stop()
	}
}
