package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	bolt "go.etcd.io/bbolt"
)

// runMetaCrashOp runs in a crash broker process: it performs op ("queue
// VHOST NAME", "vhost NAME" or "user NAME") with the process killed by
// SIGKILL just before its crashAt-th meta.db write transaction, and exits 0
// if op finished first (5 if it failed).
func runMetaCrashOp(s *Server, op, crashAt string) {
	n, err := strconv.Atoi(crashAt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash broker: WARREN_CRASH_META_WRITE:", err)
		os.Exit(3)
	}
	var writes atomic.Int64
	metaCommitHook = func() {
		if writes.Add(1) == int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	f := strings.Fields(op)
	switch f[0] {
	case "queue":
		err = s.DeleteQueue(f[1], f[2], false, false)
	case "vhost":
		err = s.DeleteVhost(f[1])
	case "user":
		err = s.DeleteUser(f[1])
	default:
		err = fmt.Errorf("unknown op %q", op)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash broker: meta op:", err)
		os.Exit(5)
	}
	os.Exit(0)
}

// TestDeleteIsOneMetaWrite kills the broker just before each meta.db write of
// a delete — of a durable queue with bindings (one to an auto-delete
// exchange), of a vhost full of definitions, of a user with permissions —
// and starts it again on the same directory: it must start, and meta.db must
// hold the definitions as they were before the delete or as they are after
// it, nothing in between.
func TestDeleteIsOneMetaWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	for _, op := range []string{"queue defs-v defs-q", "vhost defs-v", "user defs-u"} {
		t.Run(strings.Fields(op)[0], func(t *testing.T) {
			template := setupDeleteDefs(t)
			before := metaAfterRestart(t, copyDataDir(t, template))
			dir := copyDataDir(t, template)
			ts := startServer(t, withDataDir(dir))
			must(t, runOp(ts.Server, op))
			must(t, ts.Close())
			after := metaAfterRestart(t, dir)
			if bytes.Equal(before, after) {
				t.Fatal("the delete changed nothing in meta.db")
			}
			for n := 1; ; n++ {
				if n > 50 {
					t.Fatal("the delete did not finish in 50 writes")
				}
				dir := copyDataDir(t, template)
				crashed := crashMetaOp(t, dir, op, n)
				got := metaAfterRestart(t, dir)
				if !bytes.Equal(got, before) && !bytes.Equal(got, after) {
					t.Fatalf("killed at write %d: meta.db is neither before nor after the delete:\n%s\nbefore:\n%s\nafter:\n%s", n, got, before, after)
				}
				if !crashed {
					if !bytes.Equal(got, after) {
						t.Fatal("the finished delete is not in meta.db")
					}
					t.Logf("%s: %d meta.db writes", op, n-1)
					return
				}
			}
		})
	}
}

func runOp(s *Server, op string) error {
	f := strings.Fields(op)
	switch f[0] {
	case "queue":
		return s.DeleteQueue(f[1], f[2], false, false)
	case "vhost":
		return s.DeleteVhost(f[1])
	}
	return s.DeleteUser(f[1])
}

// crashMetaOp runs op in a broker process on dir that kills itself before
// its n-th meta.db write, and reports whether it did.
func crashMetaOp(t *testing.T, dir, op string, n int) bool {
	t.Helper()
	b := spawnCrashBroker(t, dir, freeAddr(t), "WARREN_CRASH_META_OP="+op, "WARREN_CRASH_META_WRITE="+strconv.Itoa(n))
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("broker process running %q did not end", op)
	}
	st := b.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true
	}
	if !st.Success() {
		t.Fatalf("broker process running %q: %v", op, st)
	}
	return false
}

// setupDeleteDefs makes a data directory with a vhost defs-v holding a
// durable topic exchange bound to another, a durable queue bound from it,
// from amq.direct and from an auto-delete exchange, and a policy; and a user
// defs-u with permissions and topic permissions on defs-v and "/".
func setupDeleteDefs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	_, err := ts.PutVhost("defs-v", VhostMeta{})
	must(t, err)
	ts.addUser(t, "defs-u", "pw")
	all := Permission{Configure: ".*", Write: ".*", Read: ".*"}
	for _, vh := range []string{"defs-v", "/"} {
		ts.grant(t, "defs-u", vh, all)
		_, err = ts.SetTopicPermission(TopicPermission{User: "defs-u", Vhost: vh, Exchange: "amq.topic", Write: "^a", Read: ".*"})
		must(t, err)
	}
	ts.grant(t, "guest", "defs-v", all)
	_, err = ts.PutPolicy(Policy{Vhost: "defs-v", Name: "p", Pattern: "^defs", ApplyTo: "queues", Definition: map[string]any{"max-length": int64(10)}}, false)
	must(t, err)
	conn, ch := dialURL(t, "amqp://guest:guest@"+ts.addr+"/defs-v")
	must(t, ch.ExchangeDeclare("defs-x", "topic", true, false, false, false, nil))
	must(t, ch.ExchangeDeclare("defs-x2", "fanout", true, false, false, false, nil))
	must(t, ch.ExchangeDeclare("defs-ad", "fanout", true, true, false, false, nil))
	must(t, ch.ExchangeBind("defs-x2", "k", "defs-x", false, nil))
	_, err = ch.QueueDeclare("defs-q", true, false, false, false, nil)
	must(t, err)
	must(t, ch.QueueBind("defs-q", "a.#", "defs-x", false, nil))
	must(t, ch.QueueBind("defs-q", "b.*", "defs-x", false, amqp091.Table{"k": int32(1)}))
	must(t, ch.QueueBind("defs-q", "q", "amq.direct", false, nil))
	must(t, ch.QueueBind("defs-q", "", "defs-ad", false, nil))
	must(t, conn.Close())
	must(t, ts.Close())
	return dir
}

// metaAfterRestart starts a broker on dir (failing the test if it cannot),
// closes it and returns every record of meta.db, a line per key.
func metaAfterRestart(t *testing.T, dir string) []byte {
	t.Helper()
	must(t, startServer(t, withDataDir(dir)).Close())
	db, err := bolt.Open(filepath.Join(dir, "meta.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	must(t, err)
	defer db.Close()
	var out bytes.Buffer
	must(t, db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				fmt.Fprintf(&out, "%s %q %q\n", name, k, v)
				return nil
			})
		})
	}))
	return out.Bytes()
}

// copyDataDir copies a stopped broker's data directory to a new one.
func copyDataDir(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "data")
	must(t, os.CopyFS(to, os.DirFS(dir)))
	return to
}

// TestConcurrentDeclareDeleteOfOneName has four connections declare, bind
// and delete the same durable queue at once (its disk work runs outside
// Vhost.mu, with the name busy), then checks that memory and meta.db agree
// after a restart.
func TestConcurrentDeclareDeleteOfOneName(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			errs <- declareDeleteLoop(ts.url, w)
		}()
	}
	for range 4 {
		must(t, <-errs)
	}
	inMemory := ts.Vhost("/").queue("defs-race")
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	afterRestart := ts2.Vhost("/").queue("defs-race")
	if (inMemory == nil) != (afterRestart == nil) {
		t.Fatalf("queue present before the restart: %t, after: %t", inMemory != nil, afterRestart != nil)
	}
}

func declareDeleteLoop(url string, w int) error {
	conn, ch, err := dialCrash(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	for i := range 50 {
		if _, err := ch.QueueDeclare("defs-race", true, false, false, false, nil); err != nil {
			return fmt.Errorf("worker %d, round %d: declare: %w", w, i, err)
		}
		// A bind may find the queue deleted by another worker: 404 closes the channel.
		if err := ch.QueueBind("defs-race", fmt.Sprint(w), "amq.direct", false, nil); err != nil {
			if ch, err = conn.Channel(); err != nil {
				return err
			}
		}
		if (i+w)%2 == 0 {
			if _, err := ch.QueueDelete("defs-race", false, false, false); err != nil {
				return fmt.Errorf("worker %d, round %d: delete: %w", w, i, err)
			}
		}
	}
	return nil
}
