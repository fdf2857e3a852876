package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// blockPath puts a regular file where the broker wants a directory, so
// creating or opening what lives there fails.
func blockPath(t *testing.T, path string) {
	t.Helper()
	must(t, os.RemoveAll(path))
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte("not a directory"), 0o644))
}

func TestFailedVhostCreateIsNotSaved(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	blockPath(t, vhostDir(dir, "blocked"))
	if _, err := ts.PutVhost("blocked", VhostMeta{}); err == nil {
		t.Fatal("a vhost whose directory cannot be made was created")
	}
	if ts.Vhost("blocked") != nil {
		t.Fatal("a failed vhost is listed")
	}
	// A record meta.db refuses (bbolt keys are at most 32 KiB): the files
	// made for it are removed again.
	long := strings.Repeat("v", 40000)
	if _, err := ts.PutVhost(long, VhostMeta{}); err == nil {
		t.Fatal("a vhost meta.db cannot store was created")
	}
	if _, err := os.Stat(vhostDir(dir, long)); !os.IsNotExist(err) {
		t.Fatalf("files of the vhost that could not be saved are left: %v", err)
	}
	must(t, ts.Close())
	must(t, os.Remove(vhostDir(dir, "blocked")))

	ts2 := startServer(t, withDataDir(dir))
	if ts2.Vhost("blocked") != nil || ts2.Vhost(long) != nil {
		t.Fatal("a vhost whose create failed was saved")
	}
	ts2.addVhost(t, "blocked")
}

func TestBrokerStartsOverDefinitionsItCannotLoad(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	for _, vhost := range []string{"/", "broken", "fine"} {
		ts.addVhost(t, vhost)
		ts.grant(t, "guest", vhost, Permission{".*", ".*", ".*"})
		conn, err := amqp091.DialConfig(ts.url, amqp091.Config{Vhost: vhost})
		must(t, err)
		declareDurableWithMessage(t, conn, "good", false)
		declareDurableWithMessage(t, conn, "bad-index", false)
		ch, err := conn.Channel()
		must(t, err)
		must(t, ch.QueueBind("bad-index", "k", "amq.direct", false, nil))
		conn.Close()
	}
	must(t, ts.Close())
	blockPath(t, filepath.Join(vhostDir(dir, "broken"), "msgstore"))
	blockPath(t, filepath.Join(vhostDir(dir, "/"), "queues", nameDir("bad-index")))

	var logs lockedBuffer
	ts2 := startServer(t, withDataDir(dir), func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	if ts2.Vhost("broken") != nil || ts2.Vhost("/").queue("bad-index") != nil {
		t.Fatal("a definition that cannot be loaded was loaded")
	}
	for _, want := range []string{`vhost \"broken\"`, "queue=bad-index"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not name the skipped %s:\n%s", want, logs.String())
		}
	}
	for _, vhost := range []string{"/", "fine"} {
		if n := readyAfterRestart(t, ts2, vhost, "good"); n != 1 {
			t.Fatalf("vhost %q: %d ready next to a skipped definition, want 1", vhost, n)
		}
	}
	if n := readyAfterRestart(t, ts2, "fine", "bad-index"); n != 1 {
		t.Fatalf("the queue of the same name in another vhost: %d ready, want 1", n)
	}
}
