package server

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// withDataDir points a test server at dir, so a second server can reopen it.
func withDataDir(dir string) func(*Config) { return func(c *Config) { c.DataDir = dir } }

func TestDefinitionsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	_, ch := ts.channel(t)
	must(t, ch.ExchangeDeclare("dx", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "ae"}))
	must(t, ch.ExchangeDeclare("tx", "fanout", false, false, false, false, nil))
	_, err := ch.QueueDeclare("dq", true, false, false, false, amqp091.Table{"x-max-length": int32(5), "x-message-ttl": int64(60000)})
	must(t, err)
	_, err = ch.QueueDeclare("tq", false, false, false, false, nil)
	must(t, err)
	_, err = ch.QueueDeclare("xq", true, false, true, false, nil) // exclusive: gone with the connection
	must(t, err)
	must(t, ch.QueueBind("dq", "a.#", "dx", false, amqp091.Table{"k": int32(1)}))
	must(t, ch.QueueBind("dq", "x", "amq.direct", false, nil))
	must(t, ch.QueueBind("tq", "y", "dx", false, nil)) // to a transient queue: not durable
	must(t, ch.ExchangeDeclare("dx2", "fanout", true, false, false, false, nil))
	must(t, ch.ExchangeBind("dx2", "b", "dx", false, nil))
	ts.addUser(t, "app", "pw", "management")
	ts.grant(t, "app", "/", Permission{Configure: "^app", Write: ".*", Read: ".*"})
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	vh := ts2.Vhost("/")
	if ex := vh.exchange("dx"); ex == nil || ex.kind != "topic" || !ex.durable || ex.alternate() != "ae" {
		t.Fatalf("durable exchange after restart: %+v", ex)
	}
	if vh.exchange("tx") != nil {
		t.Fatal("transient exchange survived")
	}
	q := vh.queue("dq")
	if q == nil || !q.durable || q.qa.maxLength != 5 || q.qa.messageTTL != 60000 {
		t.Fatalf("durable queue after restart: %+v", q)
	}
	if vh.queue("tq") != nil || vh.queue("xq") != nil {
		t.Fatal("transient or exclusive queue survived")
	}
	_, ch2 := ts2.channel(t)
	if got := routedTo(t, ch2, "dx", "a.b", nil, "dq"); len(got) != 1 {
		t.Fatal("topic binding with arguments lost")
	}
	if got := routedTo(t, ch2, "amq.direct", "x", nil, "dq"); len(got) != 1 {
		t.Fatal("binding from amq.direct lost")
	}
	if ex := vh.exchange("dx2"); ex == nil || len(ex.incoming) != 1 {
		t.Fatal("exchange-to-exchange binding lost")
	}
	conn, err := amqp091.Dial("amqp://app:pw@" + ts2.addr + "/")
	must(t, err)
	c3, err := conn.Channel()
	must(t, err)
	_, err = c3.QueueDeclare("other", false, false, false, false, nil)
	expectCode(t, err, 403) // the permission came back too
	conn.Close()

	// Deleting durable objects removes them for good.
	must(t, ch2.ExchangeDelete("dx", false, false))
	_, err = ch2.QueueDelete("dq", false, false, false)
	must(t, err)
	must(t, ts2.Close())
	ts3 := startServer(t, withDataDir(dir))
	if ts3.Vhost("/").exchange("dx") != nil || ts3.Vhost("/").queue("dq") != nil {
		t.Fatal("deleted definitions came back")
	}
}

func TestDeletedDefaultUserStaysDeleted(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	ts.addUser(t, "admin", "pw", "administrator")
	if _, err := ts.users.remove("guest"); err != nil {
		t.Fatal(err)
	}
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	if _, ok := ts2.users.authenticate("guest", "guest"); ok {
		t.Fatal("guest re-created on a non-first boot")
	}
}

func TestUnreadableMetadataStopsStartup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		contents []byte
	}{
		{"not a bbolt file", []byte("this is not a bbolt file")},
		{"empty", nil}, // bbolt alone would make it a new store: a first boot with guest again
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "meta.db")
			if err := os.WriteFile(path, tc.contents, 0o600); err != nil {
				t.Fatal(err)
			}
			expectMetaUnreadable(t, dir)
			if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, tc.contents) {
				t.Fatalf("a failed start changed meta.db: %q, %v", b, err)
			}
		})
	}
}

// metaTestConfig is a broker configuration on dir that is never started.
func metaTestConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// expectMetaUnreadable checks that a broker on dir refuses to start with
// ErrMetaUnreadable, naming the file.
func expectMetaUnreadable(t *testing.T, dir string) {
	t.Helper()
	s, err := New(metaTestConfig(dir))
	if err == nil {
		s.Close()
		t.Fatal("started over an unreadable meta.db")
	}
	if !errorsIs(err, ErrMetaUnreadable) || !strings.Contains(err.Error(), filepath.Join(dir, "meta.db")) {
		t.Fatalf("error %q does not wrap ErrMetaUnreadable or name the file", err)
	}
}
