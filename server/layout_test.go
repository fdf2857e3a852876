package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	bolt "go.etcd.io/bbolt"
)

// layout1Vhosts are the vhosts of the layout 1 data directory the migration
// tests build: "." and ".." lived at data/vhosts and data themselves.
var layout1Vhosts = []string{"/", "orders", ".", "..", "names\xff\xfe"}

// layout1Queues are the durable queues of each vhost, with a stream.
var layout1Queues = []string{"q", "a/b", strings.Repeat("long", 60), "names\xff\xfe"}

// fillLayout1 builds a data directory with messages in every vhost and
// queue, then turns it into layout 1: percent-encoded directories, no .name
// files, no data/layout, meta.db keys joined with NUL, and meta.db records
// as encoding/json alone wrote them (invalid UTF-8 replaced by U+FFFD).
func fillLayout1(t *testing.T, dir string) {
	t.Helper()
	ts := startServer(t, withDataDir(dir))
	for _, vhost := range layout1Vhosts {
		ts.addVhost(t, vhost)
		ts.grant(t, "guest", vhost, Permission{".*", ".*", ".*"})
		conn, err := amqp091.DialConfig(ts.url, amqp091.Config{Vhost: vhost})
		must(t, err)
		for _, q := range layout1Queues {
			declareDurableWithMessage(t, conn, q, false)
		}
		declareDurableWithMessage(t, conn, "stream", true)
		conn.Close()
	}
	must(t, ts.Close())
	vhostsDir := filepath.Join(dir, "vhosts")
	for _, vhost := range layout1Vhosts {
		from := filepath.Join(vhostsDir, nameDir(vhost))
		to := filepath.Join(vhostsDir, legacyDirName(vhost))
		moveForLayout1(t, filepath.Join(from, "msgstore"), filepath.Join(to, "msgstore"))
		for _, q := range layout1Queues {
			moveForLayout1(t, filepath.Join(from, "queues", nameDir(q)), filepath.Join(to, "queues", legacyDirName(q)))
		}
		moveForLayout1(t, filepath.Join(from, "streams", nameDir("stream")), filepath.Join(to, "streams", "stream"))
		must(t, os.RemoveAll(from))
	}
	must(t, os.Remove(filepath.Join(dir, "layout")))
	nulJoinKeys(t, filepath.Join(dir, "meta.db"))
	stripRawNames(t, filepath.Join(dir, "meta.db"))
}

func moveForLayout1(t *testing.T, from, to string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(to), 0o755))
	must(t, os.Rename(from, to))
	if err := os.Remove(filepath.Join(to, nameFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// stripRawNames rewrites every record of meta.db as encoding/json alone
// wrote it before records had "_raw" members and sums.
func stripRawNames(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	must(t, err)
	defer db.Close()
	must(t, db.Update(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			type kv struct{ k, v []byte }
			var edits []kv
			err := b.ForEach(func(k, v []byte) error {
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(v[:len(v)-sumLen], &obj); err != nil {
					return err
				}
				delete(obj, rawField)
				nv, err := json.Marshal(obj)
				edits = append(edits, kv{append([]byte(nil), k...), nv})
				return err
			})
			for _, e := range edits {
				err = errors.Join(err, b.Put(e.k, e.v))
			}
			return err
		})
	}))
}

// expectAllRecordsSummed checks that every record of meta.db at path ends
// in its sum: records of an older broker get theirs at the first start.
func expectAllRecordsSummed(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	must(t, err)
	defer db.Close()
	n := 0
	must(t, db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				n++
				if !hasSum(v) {
					t.Errorf("%s %q has no sum: %s", name, k, v)
				}
				return nil
			})
		})
	}))
	if n == 0 {
		t.Fatal("meta.db holds no records")
	}
}

// checkLayout1Data checks that every message fillLayout1 stored is back,
// under the vhost's and queue's exact names, in layout 2.
func checkLayout1Data(t *testing.T, dir string) {
	t.Helper()
	ts := startServer(t, withDataDir(dir))
	for _, vhost := range layout1Vhosts {
		for _, q := range layout1Queues {
			if n := readyAfterRestart(t, ts, vhost, q); n != 1 {
				t.Fatalf("vhost %q queue %q: %d ready after the move, want 1", vhost, q, n)
			}
		}
		if info, ok := ts.Vhost(vhost).queue("stream").StreamInfo(); !ok || info.NextOffset == 0 {
			t.Fatalf("vhost %q: stream after the move: %+v", vhost, info)
		}
		if _, err := os.Stat(filepath.Join(vhostDir(dir, vhost), "queues", nameDir("q"), nameFile)); err != nil {
			t.Fatalf("vhost %q: %v", vhost, err)
		}
	}
	if got, err := readLayout(dir); err != nil || got != layoutVersion {
		t.Fatalf("layout after the move: %q, %v", got, err)
	}
	must(t, ts.Close())
}

func TestLayout1DataDirectoryMoves(t *testing.T) {
	dir := t.TempDir()
	fillLayout1(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "vhosts", "orders", "queues", "a%2Fb")); err != nil {
		t.Fatalf("the test did not build layout 1: %v", err)
	}
	checkLayout1Data(t, dir)
	expectAllRecordsSummed(t, filepath.Join(dir, "meta.db"))
	// Nothing of layout 1 is left, and the next start moves nothing.
	ents, err := os.ReadDir(filepath.Join(dir, "vhosts"))
	must(t, err)
	for _, e := range ents {
		if !isNameDir(e.Name()) {
			t.Errorf("left in data/vhosts after the move: %s", e.Name())
		}
	}
	checkLayout1Data(t, dir)
}

func TestLayout1MoveInterruptedAtEveryStep(t *testing.T) {
	dir := t.TempDir()
	fillLayout1(t, dir)
	// Each start makes one rename and then "crashes"; the next start goes on.
	errCrash := errors.New("simulated crash")
	t.Cleanup(func() { testHookLayoutMove = nil })
	starts := 0
	for ; starts < 100; starts++ {
		testHookLayoutMove = func() error { return errCrash }
		cfg := DefaultConfig()
		cfg.AMQPListen = "127.0.0.1:0"
		cfg.DataDir = dir
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		s, err := New(cfg)
		if err == nil {
			must(t, s.Close())
			break
		}
		if !errors.Is(err, errCrash) {
			t.Fatalf("start %d: %v", starts, err)
		}
	}
	testHookLayoutMove = nil
	if starts < 10 {
		t.Fatalf("the move took %d interrupted starts; the test expects one per directory", starts)
	}
	checkLayout1Data(t, dir)
}

func TestNamedDirRefusesAnotherName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), nameDir("a"))
	must(t, makeNamedDir(dir, "a"))
	if err := makeNamedDir(dir, "b"); err == nil || !strings.Contains(err.Error(), `belongs to "a"`) {
		t.Fatalf("a directory recording another name: %v", err)
	}
	// A record cut short, as a crash may leave it, is written again.
	long := filepath.Join(t.TempDir(), nameDir("abc"))
	must(t, os.MkdirAll(long, 0o755))
	must(t, os.WriteFile(filepath.Join(long, nameFile), []byte("ab"), 0o644))
	must(t, makeNamedDir(long, "abc"))
	if b, err := os.ReadFile(filepath.Join(long, nameFile)); err != nil || string(b) != "abc" {
		t.Fatalf("name record after a rewrite: %q, %v", b, err)
	}
}
