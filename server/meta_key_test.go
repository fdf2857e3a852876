package server

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	bolt "go.etcd.io/bbolt"

	"github.com/warrenmq/warren/amqp"
)

// nulBindings are bindings to queue "q" whose keys NUL-joined collide in
// pairs: the NUL moves between destination and routing key, or between
// routing key and the encoded arguments. RabbitMQ 3.10 accepts all of them
// and lists each as its own binding.
func nulBindings() []BindingInfo {
	args := amqp.Table{"k": int32(0)}
	canon := canonicalArgs(args) // ends in a NUL: int32 0
	return []BindingInfo{
		{Source: "amq.direct", Destination: "q", DestinationType: DestQueue, RoutingKey: "x\x00y"},
		{Source: "amq.direct", Destination: "q\x00x", DestinationType: DestQueue, RoutingKey: "y"},
		{Source: "x", Destination: "q", DestinationType: DestQueue, RoutingKey: "a", Arguments: args},
		{Source: "x", Destination: "q", DestinationType: DestQueue, RoutingKey: "a\x00" + canon[:len(canon)-1]},
	}
}

// declareNULDefinitions declares, over AMQP, durable queues and bindings
// whose NUL-joined keys collide: queues "q" and "q\x00x" in "/", queue
// "a\x00b" in vhost "v" and queue "b" in vhost "v\x00a", and nulBindings.
func declareNULDefinitions(t *testing.T, ts *testServer) {
	t.Helper()
	for _, vhost := range []string{"v", "v\x00a"} {
		ts.addVhost(t, vhost)
		ts.grant(t, "guest", vhost, Permission{".*", ".*", ".*"})
	}
	declare := func(vhost string, queues ...string) *amqp091.Channel {
		conn, err := amqp091.DialConfig(ts.url, amqp091.Config{Vhost: vhost})
		must(t, err)
		t.Cleanup(func() { conn.Close() })
		ch, err := conn.Channel()
		must(t, err)
		for _, q := range queues {
			_, err := ch.QueueDeclare(q, true, false, false, false, nil)
			must(t, err)
		}
		return ch
	}
	declare("v", "a\x00b")
	declare("v\x00a", "b")
	ch := declare("/", "q", "q\x00x")
	must(t, ch.ExchangeDeclare("x", "direct", true, false, false, false, nil))
	for _, b := range nulBindings() {
		must(t, ch.QueueBind(b.Destination, b.RoutingKey, b.Source, false, amqp091.Table(b.Arguments)))
	}
}

// checkNULDefinitions checks that every definition declareNULDefinitions made is there.
func checkNULDefinitions(t *testing.T, ts *testServer) {
	t.Helper()
	if ts.Vhost("v") == nil || ts.Vhost("v").LookupQueue("a\x00b") == nil {
		t.Error(`queue "a\x00b" of vhost "v" is lost`)
	}
	if ts.Vhost("v\x00a") == nil || ts.Vhost("v\x00a").LookupQueue("b") == nil {
		t.Error(`queue "b" of vhost "v\x00a" is lost`)
	}
	var got []BindingInfo
	for _, b := range ts.Vhost("/").Bindings() {
		if b.Source != "" {
			b.Vhost = ""
			got = append(got, b)
		}
	}
	want := nulBindings()
	sortBindings(want)
	same := slices.EqualFunc(got, want, func(a, b BindingInfo) bool {
		return a.Source == b.Source && a.Destination == b.Destination && a.RoutingKey == b.RoutingKey &&
			canonicalArgs(a.Arguments) == canonicalArgs(b.Arguments)
	})
	if !same {
		t.Errorf("bindings:\n got %q\nwant %q", got, want)
	}
}

// Definitions whose names differ only around a NUL keep a record each in
// meta.db, so all of them come back from a restart.
func TestNULNamesKeepTheirOwnRecords(t *testing.T) {
	want := nulBindings()
	if k := func(b BindingInfo) []byte {
		return nulJoin([]string{"/", b.Source, b.DestinationType, b.Destination, b.RoutingKey, canonicalArgs(b.Arguments)})
	}; !bytes.Equal(k(want[0]), k(want[1])) || !bytes.Equal(k(want[2]), k(want[3])) {
		t.Fatal("the test's bindings do not collide under the NUL-joined keys")
	}
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	declareNULDefinitions(t, ts)
	checkNULDefinitions(t, ts)
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	checkNULDefinitions(t, ts2)
	// Deleting vhost "v" and queue "q\x00x" removes their records and no
	// other's: not queue "b" of vhost "v\x00a", not the bindings to "q".
	must(t, ts2.DeleteVhost("v"))
	must(t, ts2.DeleteQueue("/", "q\x00x", false, false))
	must(t, ts2.Close())

	ts3 := startServer(t, withDataDir(dir))
	if ts3.Vhost("v") != nil || ts3.Vhost("/").LookupQueue("q\x00x") != nil {
		t.Fatal(`vhost "v" or queue "q\x00x" came back after its delete`)
	}
	if vh := ts3.Vhost("v\x00a"); vh == nil || vh.LookupQueue("b") == nil {
		t.Error(`deleting vhost "v" deleted queue "b" of vhost "v\x00a"`)
	}
	if n := len(ts3.Vhost("/").LookupQueue("q").Bindings()); n != 4 {
		t.Errorf(`queue "q" has %d bindings after deleting queue "q\x00x", want 4 (with the default exchange's)`, n)
	}
}

// fillKeyedDefinitions makes a data directory holding a record in every
// bucket of meta.db: names with a NUL, with invalid UTF-8, a binding with
// arguments, both kinds of policy, parameters and a global parameter.
func fillKeyedDefinitions(t *testing.T) string {
	t.Helper()
	dir := setupDeleteDefs(t)
	ts := startServer(t, withDataDir(dir))
	const odd = "n\x00ul\xff"
	ts.addVhost(t, odd)
	ts.addUser(t, odd, "pw")
	ts.grant(t, odd, odd, Permission{".*", ".*", ".*"})
	ts.grant(t, "guest", odd, Permission{".*", ".*", ".*"})
	_, err := ts.SetTopicPermission(TopicPermission{User: odd, Vhost: odd, Exchange: odd, Write: ".*", Read: ".*"})
	must(t, err)
	_, err = ts.PutPolicy(Policy{Vhost: odd, Name: odd, Pattern: ".*", ApplyTo: "queues", Definition: map[string]any{"max-length": int64(3)}}, true)
	must(t, err)
	must(t, ts.putParameter(Parameter{Component: "federation-upstream", Vhost: odd, Name: odd, Value: map[string]any{"uri": "amqp://"}}))
	must(t, ts.putGlobal(odd, "g"))
	conn, err := amqp091.DialConfig(ts.url, amqp091.Config{Vhost: odd})
	must(t, err)
	ch, err := conn.Channel()
	must(t, err)
	must(t, ch.ExchangeDeclare(odd, "headers", true, false, false, false, nil))
	_, err = ch.QueueDeclare(odd, true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind(odd, odd, odd, false, amqp091.Table{"x-match": "any", odd: int32(0)}))
	must(t, conn.Close())
	must(t, ts.Close())
	return dir
}

// exportAfterRestart starts a broker on dir and returns its definitions.
func exportAfterRestart(t *testing.T, dir string) Definitions {
	t.Helper()
	ts := startServer(t, withDataDir(dir))
	d, err := ts.ExportDefinitions("")
	must(t, err)
	must(t, ts.Close())
	return d
}

// toLayout2Keys rewrites every meta.db key of dir as layout 2 wrote it, its
// parts joined with NUL, and records layout 2.
func toLayout2Keys(t *testing.T, dir string) {
	t.Helper()
	nulJoinKeys(t, filepath.Join(dir, "meta.db"))
	must(t, os.WriteFile(filepath.Join(dir, "layout"), []byte("2\n"), 0o644))
}

// nulJoinKeys rewrites every key of the meta.db at path as layouts 1 and 2
// wrote them, their parts joined with NUL.
func nulJoinKeys(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	must(t, err)
	defer db.Close()
	must(t, db.Update(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			var from, to, vals [][]byte
			err := b.ForEach(func(k, v []byte) error {
				parts, err := splitMetaKey(k)
				from, to = append(from, bytes.Clone(k)), append(to, nulJoin(parts))
				vals = append(vals, resumRecord(nulJoin(parts), v))
				return err
			})
			for i := range from {
				err = errors.Join(err, b.Delete(from[i]))
			}
			for i := range to {
				err = errors.Join(err, b.Put(to[i], vals[i]))
			}
			return err
		})
	}))
}

// metaRecords returns every record of meta.db in dir by bucket and key.
func metaRecords(t *testing.T, dir string) map[string]string {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "meta.db"), 0o600, &bolt.Options{ReadOnly: true})
	must(t, err)
	defer db.Close()
	out := make(map[string]string)
	must(t, db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				out[string(name)+"/"+string(k)] = string(v)
				return nil
			})
		})
	}))
	return out
}

// startRefused starts a broker on dir that must fail with want.
func startRefused(t *testing.T, dir string, want error) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(cfg)
	if err == nil {
		must(t, s.Close())
		t.Fatal("the broker started")
	}
	if !errors.Is(err, want) {
		t.Fatalf("start: %v, want %v", err, want)
	}
}

// A layout 2 meta.db, its keys NUL-joined, moves to metaKey's keys at the
// first start, in one transaction: interrupted inside it, meta.db is as it
// was; interrupted after it, the next start moves nothing more. Either way
// every definition comes back.
func TestMetaKeysMoveFromLayout2(t *testing.T) {
	dir := fillKeyedDefinitions(t)
	want := exportAfterRestart(t, dir)
	toLayout2Keys(t, dir)
	old := metaRecords(t, dir)
	if _, ok := old["queues/"+"n\x00ul\xff\x00n\x00ul\xff"]; !ok {
		t.Fatalf("the test did not write layout 2 keys: %q", slices.Sorted(maps.Keys(old)))
	}

	errCrash := errors.New("simulated crash")
	t.Cleanup(func() { testHookMetaKeys = nil })
	testHookMetaKeys = func(committed bool) error {
		if !committed {
			return errCrash
		}
		return nil
	}
	startRefused(t, dir, errCrash)
	if got := metaRecords(t, dir); !maps.Equal(got, old) {
		t.Fatal("a migration interrupted inside its transaction changed meta.db")
	}
	testHookMetaKeys = func(committed bool) error {
		if committed {
			return errCrash
		}
		return nil
	}
	startRefused(t, dir, errCrash)
	if got, err := readLayout(dir); err != nil || got != "2" {
		t.Fatalf("layout after a start that died before recording it: %q, %v", got, err)
	}
	testHookMetaKeys = nil

	if got := exportAfterRestart(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("definitions after the move:\n got %+v\nwant %+v", got, want)
	}
	if got, err := readLayout(dir); err != nil || got != layoutVersion {
		t.Fatalf("layout after the move: %q, %v", got, err)
	}
	recs := metaRecords(t, dir)
	if len(recs) != len(old) {
		t.Fatalf("%d records after the move, %d before", len(recs), len(old))
	}
	if _, ok := recs["queues/"+string(metaKey("n\x00ul\xff", "n\x00ul\xff"))]; !ok {
		t.Fatalf("queue record not under its new key: %q", slices.Sorted(maps.Keys(recs)))
	}
	expectAllRecordsSummed(t, filepath.Join(dir, "meta.db"))
}

// metaKey is injective, reads back exactly, sorts as its tuples, and a
// tuple's keys start with metaKeyPrefix of its leading parts and no other's.
func TestMetaKeyEncodesTuples(t *testing.T) {
	alphabet := []string{"", "\x00", "\x01", "\xff", "a", "a\x00", "\x00\x01", "\x00\xff", "b\x00\x00"}
	var tuples [][]string
	for _, a := range alphabet {
		for _, b := range alphabet {
			for _, c := range alphabet {
				tuples = append(tuples, []string{a, b, c})
			}
		}
	}
	for _, x := range tuples {
		kx := metaKey(x...)
		if got, err := splitMetaKey(kx); err != nil || !slices.Equal(got, x) {
			t.Fatalf("splitMetaKey(metaKey(%q)) = %q, %v", x, got, err)
		}
		for _, y := range tuples {
			ky := metaKey(y...)
			if got, want := bytes.Compare(kx, ky), slices.Compare(x, y); got != want {
				t.Fatalf("keys of %q and %q compare %d, the tuples %d", x, y, got, want)
			}
			if got, want := bytes.HasPrefix(ky, metaKeyPrefix(x[0])), y[0] == x[0]; got != want {
				t.Fatalf("key of %q starts with the prefix of %q: %v", y, x[0], got)
			}
			if got, want := bytes.HasPrefix(ky, metaKeyPrefix(x[:2]...)), slices.Equal(y[:2], x[:2]); got != want {
				t.Fatalf("key of %q starts with the prefix of %q: %v", y, x[:2], got)
			}
		}
	}
	for _, bad := range []string{"a\x00", "a\x00b", "\x00\x02"} {
		if _, err := splitMetaKey([]byte(bad)); err == nil {
			t.Errorf("splitMetaKey(%q) read a key metaKey cannot make", bad)
		}
	}
}
