package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// durableDefs is the part of a node's definitions that survives a restart:
// everything but transient queues and exchanges and the bindings to or from
// them, as JSON for a readable comparison.
func durableDefs(t *testing.T, s *Server) string {
	t.Helper()
	d, err := s.ExportDefinitions("")
	must(t, err)
	durable := map[string]bool{}
	var qs []QueueDefinition
	for _, q := range d.Queues {
		if q.Durable {
			qs = append(qs, q)
			durable["queue\x00"+q.Vhost+"\x00"+q.Name] = true
		}
	}
	var xs []ExchangeDefinition
	for _, x := range d.Exchanges {
		if x.Durable {
			xs = append(xs, x)
			durable["exchange\x00"+x.Vhost+"\x00"+x.Name] = true
		}
	}
	var bs []BindingInfo
	for _, b := range d.Bindings {
		src := "exchange\x00" + b.Vhost + "\x00" + b.Source
		dst := b.DestinationType + "\x00" + b.Vhost + "\x00" + b.Destination
		builtin := len(b.Source) > 4 && b.Source[:4] == "amq."
		if (durable[src] || builtin) && durable[dst] {
			bs = append(bs, b)
		}
	}
	d.Queues, d.Exchanges, d.Bindings = qs, xs, bs
	js, err := json.MarshalIndent(d, "", " ")
	must(t, err)
	return string(js)
}

// restartMatches closes ts and starts a broker on the same data directory:
// what it loads from meta.db must be what ts had in memory.
func restartMatches(t *testing.T, ts *testServer, dir string, mutate ...func(*Config)) *testServer {
	t.Helper()
	inMemory := durableDefs(t, ts.Server)
	must(t, ts.Close())
	ts2 := startServer(t, append([]func(*Config){withDataDir(dir)}, mutate...)...)
	if loaded := durableDefs(t, ts2.Server); loaded != inMemory {
		t.Fatalf("after a restart meta.db holds\n%s\nbut memory had\n%s", loaded, inMemory)
	}
	return ts2
}

func noQueue(ts *testServer, vhost, name string) func() bool {
	return func() bool { return ts.Vhost(vhost).queue(name) == nil }
}

// TestTopologyPathsMatchAfterRestart changes topology by every path —
// AMQP declares, binds, unbinds and deletes, a queue's auto-delete, an
// exchange's auto-delete, the cleanup of an exclusive queue, x-expires, a
// definitions import and the configuration at boot — and checks each left
// meta.db holding what memory holds: a path that changed memory alone (or
// meta.db alone) brings a definition back, or loses one, at the restart.
func TestTopologyPathsMatchAfterRestart(t *testing.T) {
	t.Run("amqp", func(t *testing.T) {
		dir := t.TempDir()
		ts := startServer(t, withDataDir(dir))
		_, ch := ts.channel(t)
		must(t, ch.ExchangeDeclare("ap-x", "topic", true, false, false, false, nil))
		must(t, ch.ExchangeDeclare("ap-x2", "fanout", true, false, false, false, nil))
		must(t, ch.ExchangeDeclare("ap-gone", "direct", true, false, false, false, nil))
		for _, q := range []string{"ap-q", "ap-q2", "ap-gone"} {
			_, err := ch.QueueDeclare(q, true, false, false, false, amqp091.Table{"x-max-length": int32(7)})
			must(t, err)
		}
		must(t, ch.QueueBind("ap-q", "a.#", "ap-x", false, amqp091.Table{"k": "v"}))
		must(t, ch.QueueBind("ap-q2", "b", "ap-x", false, nil))
		must(t, ch.QueueBind("ap-gone", "c", "ap-x", false, nil))
		must(t, ch.ExchangeBind("ap-x2", "x.*", "ap-x", false, nil))
		must(t, ch.ExchangeBind("ap-gone", "y", "ap-x", false, nil))
		must(t, ch.QueueUnbind("ap-q2", "b", "ap-x", nil))
		must(t, ch.ExchangeUnbind("ap-x2", "x.*", "ap-x", false, nil))
		_, err := ch.QueueDelete("ap-gone", false, false, false)
		must(t, err)
		must(t, ch.ExchangeDelete("ap-gone", false, false))
		ts = restartMatches(t, ts, dir)
		d := durableDefs(t, ts.Server)
		var defs Definitions
		must(t, json.Unmarshal([]byte(d), &defs))
		if len(defs.Queues) != 2 || len(defs.Exchanges) != 2 || len(defs.Bindings) != 1 {
			t.Fatalf("want 2 queues, 2 exchanges, 1 binding after the changes, got\n%s", d)
		}
	})
	t.Run("auto-delete", func(t *testing.T) {
		dir := t.TempDir()
		ts := startServer(t, withDataDir(dir))
		_, ch := ts.channel(t)
		// A durable auto-delete queue bound to a durable auto-delete
		// exchange: cancelling the last consumer deletes the queue, which
		// leaves the exchange unbound, which deletes it.
		must(t, ch.ExchangeDeclare("ad-x", "direct", true, true, false, false, nil))
		_, err := ch.QueueDeclare("ad-q", true, true, false, false, nil)
		must(t, err)
		must(t, ch.QueueBind("ad-q", "k", "ad-x", false, nil))
		_, err = ch.QueueDeclare("ad-keep", true, false, false, false, nil)
		must(t, err)
		// An auto-delete exchange unbound by queue.unbind goes too.
		must(t, ch.ExchangeDeclare("ad-x2", "fanout", true, true, false, false, nil))
		must(t, ch.QueueBind("ad-keep", "", "ad-x2", false, nil))
		must(t, ch.QueueUnbind("ad-keep", "", "ad-x2", nil))
		_, err = ch.Consume("ad-q", "c1", false, false, false, false, nil)
		must(t, err)
		must(t, ch.Cancel("c1", false))
		waitFor(t, 5*time.Second, "the auto-delete queue to go", noQueue(ts, "/", "ad-q"))
		for _, x := range []string{"ad-x", "ad-x2"} {
			if ts.Vhost("/").exchange(x) != nil {
				t.Fatalf("auto-delete exchange %s is still there", x)
			}
		}
		restartMatches(t, ts, dir)
	})
	t.Run("exclusive", func(t *testing.T) {
		dir := t.TempDir()
		ts := startServer(t, withDataDir(dir))
		_, ch := ts.channel(t)
		must(t, ch.ExchangeDeclare("ex-x", "direct", true, true, false, false, nil))
		_, err := ch.QueueDeclare("ex-keep", true, false, false, false, nil)
		must(t, err)
		must(t, ch.QueueBind("ex-keep", "k", "ex-x", false, nil))
		conn2, ch2 := ts.channel(t)
		_, err = ch2.QueueDeclare("ex-q", true, false, true, false, nil)
		must(t, err)
		must(t, ch2.QueueBind("ex-q", "k", "ex-x", false, nil))
		must(t, conn2.Close())
		waitFor(t, 5*time.Second, "the exclusive queue to go", noQueue(ts, "/", "ex-q"))
		if ex := ts.Vhost("/").exchange("ex-x"); ex == nil || ex.bindings.Len() != 1 {
			t.Fatal("the exclusive queue's binding is still there, or the exchange went")
		}
		restartMatches(t, ts, dir)
	})
	t.Run("x-expires", func(t *testing.T) {
		dir := t.TempDir()
		ts := startServer(t, withDataDir(dir))
		_, ch := ts.channel(t)
		must(t, ch.ExchangeDeclare("xe-x", "direct", true, true, false, false, nil))
		_, err := ch.QueueDeclare("xe-q", true, false, false, false, amqp091.Table{"x-expires": int32(50)})
		must(t, err)
		must(t, ch.QueueBind("xe-q", "k", "xe-x", false, nil))
		waitFor(t, 5*time.Second, "the queue to expire", noQueue(ts, "/", "xe-q"))
		if ts.Vhost("/").exchange("xe-x") != nil {
			t.Fatal("the auto-delete exchange of the expired queue is still there")
		}
		restartMatches(t, ts, dir)
	})
	t.Run("import", func(t *testing.T) {
		dir := t.TempDir()
		ts := startServer(t, withDataDir(dir))
		d := Definitions{
			Vhosts:    []VhostDefinition{{Name: "imp-v", VhostMeta: VhostMeta{Description: "imported"}}},
			Exchanges: []ExchangeDefinition{{Vhost: "imp-v", ExchangeSpec: ExchangeSpec{Name: "imp-x", Type: "topic", Durable: true}}},
			Queues: []QueueDefinition{
				{Vhost: "imp-v", QueueSpec: QueueSpec{Name: "imp-q", Durable: true, Arguments: amqp.Table{"x-max-length": int64(3)}}},
			},
			Bindings: []BindingInfo{{Vhost: "imp-v", Source: "imp-x", Destination: "imp-q", DestinationType: DestQueue, RoutingKey: "#"}},
		}
		must(t, ts.ImportDefinitions(d, ""))
		ts = restartMatches(t, ts, dir)
		if ts.Vhost("imp-v") == nil || ts.Vhost("imp-v").queue("imp-q") == nil {
			t.Fatal("the imported definitions are not there after a restart")
		}
	})
	t.Run("boot config", func(t *testing.T) {
		dir := t.TempDir()
		boot := func(c *Config) {
			c.Vhosts = []string{"boot-v"}
			c.Users = []User{{Name: "boot-u", Password: "pw", Permissions: map[string]Permission{"boot-v": {".*", ".*", ".*"}}}}
		}
		ts := startServer(t, withDataDir(dir), boot)
		// Started again without them in the configuration, the node still
		// has them: they were stored at the first boot.
		ts = restartMatches(t, ts, dir)
		if ts.Vhost("boot-v") == nil || ts.users.permission("boot-u", "boot-v") == nil {
			t.Fatal("the configured vhost and user were not stored at boot")
		}
	})
}

// TestTopologyAppliesMetaFirst makes each topology change over AMQP and
// checks it is one meta.db transaction, made before memory changes.
func TestTopologyAppliesMetaFirst(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	_, ch := ts.channel(t)
	vh := ts.Vhost("/")
	bound := func(q string) bool {
		q0 := vh.queue(q)
		if q0 == nil {
			return false
		}
		vh.mu.RLock()
		defer vh.mu.RUnlock()
		return len(q0.bindings) > 0
	}
	steps := []struct {
		what    string
		change  func() error
		visible func() bool // the change as memory shows it
	}{
		{"declare exchange", func() error { return ch.ExchangeDeclare("mf-x", "direct", true, false, false, false, nil) },
			func() bool { return vh.exchange("mf-x") != nil }},
		{"declare queue", func() error { _, err := ch.QueueDeclare("mf-q", true, false, false, false, nil); return err },
			func() bool { return vh.queue("mf-q") != nil }},
		{"bind", func() error { return ch.QueueBind("mf-q", "k", "mf-x", false, nil) }, func() bool { return bound("mf-q") }},
		{"unbind", func() error { return ch.QueueUnbind("mf-q", "k", "mf-x", nil) }, func() bool { return !bound("mf-q") }},
		{"delete queue", func() error { _, err := ch.QueueDelete("mf-q", false, false, false); return err },
			func() bool { return vh.queue("mf-q") == nil }},
		{"delete exchange", func() error { return ch.ExchangeDelete("mf-x", false, false) },
			func() bool { return vh.exchange("mf-x") == nil }},
		{"create vhost", func() error { _, err := ts.PutVhost("mf-v", VhostMeta{}); return err },
			func() bool { return ts.Vhost("mf-v") != nil }},
	}
	defer func() { metaCommitHook = nil }()
	for _, st := range steps {
		commits, early := 0, false
		metaCommitHook = func() {
			commits++
			early = early || st.visible()
		}
		must(t, st.change())
		metaCommitHook = nil
		if commits != 1 || early || !st.visible() {
			t.Errorf("%s: %d meta.db transactions, change visible before the write: %t, after: %t", st.what, commits, early, st.visible())
		}
	}
}

// encodeAll encodes commands for ApplyCommitted.
func encodeAll(t *testing.T, cs ...Command) [][]byte {
	t.Helper()
	out := make([][]byte, len(cs))
	for i, c := range cs {
		b, err := EncodeCommand(c)
		must(t, err)
		out[i] = b
	}
	return out
}

// replicatedBatches are log entries as the meta Raft log would carry them:
// later commands of an entry depend on earlier ones, and some are refused.
func replicatedBatches(t *testing.T) [][][]byte {
	args := tableBytes(amqp.Table{"x-max-length": int32(5)})
	return [][][]byte{
		encodeAll(t,
			DeclareVhost{Name: "r-v", Meta: VhostMeta{Description: "replicated"}},
			PutUser{Name: "r-u", PasswordHash: HashPassword("pw"), Tags: []string{"management"}},
			SetPermission{User: "r-u", Vhost: "r-v", Permission: Permission{".*", ".*", ".*"}},
			DeclareExchange{Vhost: "r-v", Name: "r-x", Type: "topic", Durable: true},
			DeclareExchange{Vhost: "r-v", Name: "r-ad", Type: "fanout", Durable: true, AutoDelete: true},
			DeclareQueue{Vhost: "r-v", Name: "r-q", Durable: true, Arguments: args},
			Bind{Vhost: "r-v", Source: "r-x", Destination: "r-q", DestinationType: "queue", RoutingKey: "a.*"},
			Bind{Vhost: "r-v", Source: "r-ad", Destination: "r-x", DestinationType: "exchange"},
		),
		encodeAll(t,
			// An equivalent redeclare is a no-op; a different one is refused.
			DeclareQueue{Vhost: "r-v", Name: "r-q", Durable: true, Arguments: args},
			DeclareQueue{Vhost: "r-v", Name: "r-q", Durable: false},
			Bind{Vhost: "r-v", Source: "r-x", Destination: "missing", DestinationType: "queue"},
			DeclareQueue{Vhost: "r-v", Name: "r-q2", Durable: true},
			SetPolicy{Policy: Policy{Vhost: "r-v", Name: "p", Pattern: "^r-", ApplyTo: ApplyToQueues, Definition: map[string]any{"max-length": json.Number("9")}}},
			// Unbinding the auto-delete exchange's last binding deletes it.
			Unbind{Vhost: "r-v", Source: "r-ad", Destination: "r-x", DestinationType: "exchange"},
			DeleteQueue{Vhost: "r-v", Name: "r-q2"},
		),
	}
}

func refusedCode(err error) uint16 {
	var r *CommandRefused
	if errors.As(err, &r) {
		return r.Code
	}
	return 0
}

// TestSameCommandsSameDefinitions applies the same encoded log entries to
// two fresh nodes: their meta.db contents and definitions exports must be
// identical, with the same results per command.
func TestSameCommandsSameDefinitions(t *testing.T) {
	var metas, exports, bootIDs [2]string
	var results [2][][]error
	// Entry 1 is what a cluster's seed entry carries besides the
	// definitions: the id its bootstrapping node made at boot. Each fresh
	// node below made its own at boot (the random choice is the boot's, not
	// the apply's); the entry replaces it, so all of meta.db must agree.
	seed := encodeAll(t, SetGlobalParameter{Name: internalClusterIDParam, Value: "rabbitmq-cluster-id-4kDo-sGDUnWRVen27TDC9A"})
	entries := append([][][]byte{seed}, replicatedBatches(t)...)
	for n := range 2 {
		dir := t.TempDir()
		// No default user: its password hash is salted at each node's boot.
		ts := startServer(t, withDataDir(dir), func(c *Config) { c.DefaultUser = "" })
		bootIDs[n] = ts.InternalClusterID()
		for i, entry := range entries {
			res, err := ts.ApplyCommitted(uint64(i+1), entry)
			must(t, err)
			results[n] = append(results[n], res)
		}
		d, err := ts.ExportDefinitions("r-v")
		must(t, err)
		js, err := json.Marshal(d)
		must(t, err)
		exports[n] = string(js)
		must(t, ts.Close())
		metas[n] = string(metaAfterRestart(t, dir))
	}
	if bootIDs[0] == "" || bootIDs[0] == bootIDs[1] {
		t.Fatalf("boot-made internal cluster ids %q and %q: want two different ones", bootIDs[0], bootIDs[1])
	}
	if metas[0] != metas[1] {
		t.Fatalf("meta.db differs:\n%s\n---\n%s", metas[0], metas[1])
	}
	if exports[0] != exports[1] {
		t.Fatalf("definitions differ:\n%s\n---\n%s", exports[0], exports[1])
	}
	want := [][]uint16{{0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, amqp.PreconditionFailed, amqp.NotFound, 0, 0, 0, 0}}
	for n := range 2 {
		for i, entry := range results[n] {
			for j, err := range entry {
				if got := refusedCode(err); got != want[i][j] || (got == 0 && err != nil) {
					t.Errorf("node %d entry %d command %d: %v, want code %d", n, i+1, j, err, want[i][j])
				}
			}
		}
	}
	var defs Definitions
	must(t, json.Unmarshal([]byte(exports[0]), &defs))
	if len(defs.Queues) != 1 || len(defs.Exchanges) != 1 || len(defs.Bindings) != 1 || len(defs.Policies) != 1 {
		t.Fatalf("want r-q, r-x, its binding and the policy, got %s", exports[0])
	}
}

// TestReplayedIndexIsSkipped restarts a node that applied entries 1 and 2:
// it reports applied index 2, skips the entries again (and an older one),
// and applies entry 3.
func TestReplayedIndexIsSkipped(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	for i, entry := range replicatedBatches(t) {
		_, err := ts.ApplyCommitted(uint64(i+1), entry)
		must(t, err)
	}
	must(t, ts.Close())
	ts = startServer(t, withDataDir(dir))
	if got := ts.AppliedIndex(); got != 2 {
		t.Fatalf("applied index %d after a restart, want 2", got)
	}
	del := encodeAll(t, DeleteQueue{Vhost: "r-v", Name: "r-q"})
	for _, index := range []uint64{1, 2} {
		res, err := ts.ApplyCommitted(index, del)
		must(t, err)
		if res[0] != nil || ts.Vhost("r-v").queue("r-q") == nil {
			t.Fatalf("entry %d was applied again", index)
		}
	}
	_, err := ts.ApplyCommitted(3, del)
	must(t, err)
	if ts.Vhost("r-v").queue("r-q") != nil || ts.AppliedIndex() != 3 {
		t.Fatalf("entry 3 was not applied (applied index %d)", ts.AppliedIndex())
	}
}

// TestRacingInequivalentDeclares has two connections declare the same
// queue at once with different durability, many times: each time one
// declare wins and the other gets RabbitMQ's 406.
func TestRacingInequivalentDeclares(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	const rounds = 20
	type outcome struct {
		durable bool
		err     error
	}
	var chs [2]*amqp091.Channel
	for i := range chs {
		_, chs[i] = ts.channel(t)
	}
	for r := range rounds {
		name := "race-" + string(rune('a'+r))
		out := make(chan outcome, 2)
		for i, ch := range chs {
			durable := i == 0
			go func() {
				_, err := ch.QueueDeclare(name, durable, false, false, false, nil)
				out <- outcome{durable, err}
			}()
		}
		won, lost := 0, 0
		for range 2 {
			o := <-out
			if o.err == nil {
				won++
				continue
			}
			lost++
			want := "PRECONDITION_FAILED - inequivalent arg 'durable' for queue '" + name + "' in vhost '/': received '" +
				map[bool]string{true: "true", false: "false"}[o.durable] + "' but current is '" +
				map[bool]string{true: "false", false: "true"}[o.durable] + "'"
			expectReason(t, o.err, 406, want)
			// The channel is closed by the 406: open a new one.
			idx := 1
			if o.durable {
				idx = 0
			}
			_, chs[idx] = ts.channel(t)
		}
		if won != 1 || lost != 1 {
			t.Fatalf("round %d: %d declares won, %d lost", r, won, lost)
		}
	}
}

// TestSnapshotRestoreMeta snapshots a node's meta.db after two log entries
// and restores it into a new data directory: the node started on it has
// the same definitions and the applied index of the snapshot, and a
// snapshot that is not a bbolt file is refused, leaving meta.db as it was.
func TestSnapshotRestoreMeta(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	for i, entry := range replicatedBatches(t) {
		_, err := ts.ApplyCommitted(uint64(i+1), entry)
		must(t, err)
	}
	var snap bytes.Buffer
	must(t, ts.SnapshotMeta(&snap))
	want := durableDefs(t, ts.Server)

	dir := t.TempDir()
	must(t, RestoreMeta(dir, bytes.NewReader(snap.Bytes())))
	ts2 := startServer(t, withDataDir(dir))
	if got := durableDefs(t, ts2.Server); got != want {
		t.Fatalf("restored definitions\n%s\nwant\n%s", got, want)
	}
	if got := ts2.AppliedIndex(); got != 2 {
		t.Fatalf("restored applied index %d, want 2", got)
	}
	must(t, ts2.Close())

	if err := RestoreMeta(dir, strings.NewReader("not a bbolt file")); err == nil {
		t.Fatal("a damaged snapshot was restored")
	}
	ts3 := startServer(t, withDataDir(dir))
	if got := durableDefs(t, ts3.Server); got != want {
		t.Fatalf("a refused restore changed meta.db:\n%s", got)
	}
}

// TestQueueHomedElsewhereIsNotServedYet applies a DeclareQueue whose home
// is another node: every node applies the same declare, so it is accepted
// and listed with its home, but this node creates no storage for it, and
// until the remote queue proxy serves it basic.get is refused with
// RabbitMQ's 404 for a queue whose home node is down, and a publish routed
// to it is nacked.
func TestQueueHomedElsewhereIsNotServedYet(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	res, err := ts.ApplyCommitted(1, encodeAll(t,
		DeclareQueue{Vhost: "/", Name: "elsewhere", Durable: true, Node: "warren@other"},
		DeclareQueue{Vhost: "/", Name: "here", Durable: true, Node: ts.NodeName()},
		Bind{Vhost: "/", Source: "amq.direct", Destination: "elsewhere", DestinationType: "queue", RoutingKey: "e"},
	))
	must(t, err)
	if res[0] != nil || res[1] != nil || res[2] != nil {
		t.Fatalf("results %v, want all nil", res)
	}
	q := ts.Vhost("/").queue("elsewhere")
	if q == nil || q.HomeNode(ts.NodeName()) != "warren@other" || q.index != nil {
		t.Fatalf("the queue homed elsewhere: %+v", q)
	}
	if here := ts.Vhost("/").queue("here"); here == nil || here.HomeNode(ts.NodeName()) != ts.NodeName() || here.index == nil {
		t.Fatal("the local queue was not created with its index")
	}
	_, ch := ts.channel(t)
	_, _, err = ch.Get("elsewhere", true)
	expectCode(t, err, amqp.NotFound)
	if !strings.Contains(err.Error(), "home node 'warren@other' of durable queue 'elsewhere' in vhost '/' is down or inaccessible") {
		t.Fatalf("basic.get: %v", err)
	}
	_, ch = ts.channel(t)
	_, err = ch.QueuePurge("elsewhere", false)
	expectCode(t, err, amqp.NotFound)
	_, ch = ts.channel(t)
	_, err = ch.Consume("elsewhere", "", false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)
	_, ch = ts.channel(t)
	must(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	must(t, ch.Publish("amq.direct", "e", false, false, amqp091.Publishing{Body: []byte("x")}))
	if c := nextConfirm(t, confirms); c.Ack {
		t.Fatal("a publish to a queue homed elsewhere was confirmed")
	}
}

// TestStorageFailureIsDistinct applies an entry while meta.db cannot be
// written: ApplyCommitted returns a StorageError (fatal for the node), not
// per-command results, and nothing of the entry is in memory; over AMQP
// the same failure is 541 and the queue is not there either.
func TestStorageFailureIsDistinct(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	_, ch := ts.channel(t)
	must(t, ts.meta.db.Close()) // every write transaction now fails
	res, err := ts.ApplyCommitted(1, encodeAll(t, DeclareQueue{Vhost: "/", Name: "sf-q", Durable: true}))
	var se *StorageError
	if !errors.As(err, &se) || res != nil {
		t.Fatalf("got results %v, error %v; want a StorageError", res, err)
	}
	if ts.AppliedIndex() != 0 || ts.Vhost("/").queue("sf-q") != nil {
		t.Fatal("the failed entry changed the node")
	}
	_, err = ch.QueueDeclare("sf-q2", true, false, false, false, nil)
	var ae *amqp091.Error
	if !errors.As(err, &ae) || ae.Code != 541 {
		t.Fatalf("declare with meta.db unwritable: %v, want 541", err)
	}
	if ts.Vhost("/").queue("sf-q2") != nil {
		t.Fatal("the queue whose record failed is in memory")
	}
}
