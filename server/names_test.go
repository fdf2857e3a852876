package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// hostileNames are queue and vhost names that once addressed other objects'
// files: path steps, names equal to the layout's own directories, names equal
// up to the old 200-character cut, names equal but for case, and invalid
// UTF-8, which JSON would have replaced.
var hostileNames = []string{
	".", "..", "transient", "queues", "msgstore", "streams", "vhosts", "meta.db", "a/b", "%2F", `..\..`,
	strings.Repeat("n", 200) + "A", strings.Repeat("n", 200) + "B", "Case", "case", "names\xff\xfe",
}

// declareDurableWithMessage declares a durable queue (a stream when stream is
// set) and stores one persistent message in it, on a channel of its own (a
// confirm listener per publishConfirmed call).
func declareDurableWithMessage(t *testing.T, conn *amqp091.Connection, name string, stream bool) {
	t.Helper()
	ch, err := conn.Channel()
	must(t, err)
	defer ch.Close()
	var args amqp091.Table
	if stream {
		args = amqp091.Table{"x-queue-type": "stream"}
	}
	if _, err = ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declare durable %q: %v", name, err)
	}
	publishConfirmed(t, ch, name, 1, true, name)
}

// readyAfterRestart is the ready count of a durable queue of vhost vh.
func readyAfterRestart(t *testing.T, ts *testServer, vhost, queue string) int {
	t.Helper()
	vh := ts.Vhost(vhost)
	if vh == nil {
		t.Fatalf("vhost %q lost", vhost)
	}
	q := vh.queue(queue)
	if q == nil {
		t.Fatalf("queue %q in vhost %q lost", queue, vhost)
	}
	return q.Info().Ready
}

func TestHostileQueueNamesKeepOtherQueuesData(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	ts.addVhost(t, "streams")
	ts.grant(t, "guest", "streams", Permission{".*", ".*", ".*"})
	// Classic queues in "/", streams of the same names in vhost "streams".
	for _, vhost := range []string{"/", "streams"} {
		stream := vhost == "streams"
		conn, err := amqp091.DialConfig(ts.url, amqp091.Config{Vhost: vhost})
		must(t, err)
		ch, err := conn.Channel()
		must(t, err)
		_, err = ch.QueueDeclare("victim", true, false, false, false, nil)
		must(t, err)
		publishConfirmed(t, ch, "victim", 5, true, "v")
		for _, name := range hostileNames {
			declareDurableWithMessage(t, conn, name, stream)
		}
		for _, name := range []string{".", ".."} {
			_, err := ch.QueueDelete(name, false, false, false)
			must(t, err)
		}
		conn.Close()
	}
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	for _, vhost := range []string{"/", "streams"} {
		if n := readyAfterRestart(t, ts2, vhost, "victim"); n != 5 {
			t.Fatalf("vhost %q: victim has %d ready after hostile deletes and a restart, want 5", vhost, n)
		}
		for _, name := range hostileNames {
			if name == "." || name == ".." {
				if ts2.Vhost(vhost).queue(name) != nil {
					t.Fatalf("vhost %q: deleted queue %q came back", vhost, name)
				}
				continue
			}
			if vhost == "/" {
				if n := readyAfterRestart(t, ts2, vhost, name); n != 1 {
					t.Fatalf("queue %q has %d ready after restart, want 1", name, n)
				}
			} else if info, ok := ts2.Vhost(vhost).queue(name).StreamInfo(); !ok || info.NextOffset == 0 {
				t.Fatalf("stream %q after restart: %+v", name, info)
			}
		}
	}
	checkDirNames(t, dir)
	_, ch2 := ts2.channel(t)
	m := getOne(t, ch2, "names\xff\xfe")
	if string(m.Body) != "names\xff\xfe0" {
		t.Fatalf("message of the invalid UTF-8 queue: %q", m.Body)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.db")); err != nil {
		t.Fatal(err)
	}
}

func TestHostileVhostNamesKeepOtherVhostsData(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("victim", true, false, false, false, nil)
	must(t, err)
	publishConfirmed(t, ch, "victim", 5, true, "v")
	for _, name := range hostileNames {
		ts.addVhost(t, name)
		ts.grant(t, "guest", name, Permission{".*", ".*", ".*"})
		conn, err := amqp091.DialConfig(ts.url, amqp091.Config{Vhost: name})
		if err != nil {
			t.Fatalf("connect to vhost %q: %v", name, err)
		}
		declareDurableWithMessage(t, conn, "q", false)
		declareDurableWithMessage(t, conn, "s", true)
		conn.Close()
	}
	must(t, ts.Close())

	// A restart with every hostile vhost in place, then the deletes.
	ts2 := startServer(t, withDataDir(dir))
	for _, name := range hostileNames {
		if n := readyAfterRestart(t, ts2, name, "q"); n != 1 {
			t.Fatalf("vhost %q: queue has %d ready after restart, want 1", name, n)
		}
	}
	checkDirNames(t, dir)
	for _, name := range []string{".", ".."} {
		must(t, ts2.DeleteVhost(name))
	}
	must(t, ts2.Close())

	ts3 := startServer(t, withDataDir(dir))
	if n := readyAfterRestart(t, ts3, "/", "victim"); n != 5 {
		t.Fatalf("victim has %d ready after hostile vhost deletes, want 5", n)
	}
	for _, name := range hostileNames {
		if name == "." || name == ".." {
			if ts3.Vhost(name) != nil {
				t.Fatalf("deleted vhost %q came back", name)
			}
			continue
		}
		if n := readyAfterRestart(t, ts3, name, "q"); n != 1 {
			t.Fatalf("vhost %q: queue has %d ready after the deletes, want 1", name, n)
		}
	}
}

// checkDirNames checks that every vhost, queue and stream directory under
// dir is a nameDir: 64 digits and lowercase letters, so no two of them can
// be one directory on a case-insensitive file system either.
func checkDirNames(t *testing.T, dir string) {
	t.Helper()
	vhosts, err := os.ReadDir(filepath.Join(dir, "vhosts"))
	must(t, err)
	for _, v := range vhosts {
		if !isNameDir(v.Name()) {
			t.Fatalf("vhost directory %q", v.Name())
		}
		for _, sub := range []string{"queues", "streams"} {
			ents, err := os.ReadDir(filepath.Join(dir, "vhosts", v.Name(), sub))
			if os.IsNotExist(err) {
				continue
			}
			must(t, err)
			for _, e := range ents {
				if !isNameDir(e.Name()) {
					t.Fatalf("%s directory %q", sub, e.Name())
				}
			}
		}
	}
}
