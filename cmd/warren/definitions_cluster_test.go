package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// launched is a broker run in the background whose start may wait for
// others (a cluster node importing definitions waits for a majority).
type launched struct {
	addr string
	sigs chan os.Signal
	exit chan int
	out  *lockedWriter
}

func launch(addr string, args ...string) *launched {
	l := &launched{addr: addr, sigs: make(chan os.Signal, 1), exit: make(chan int, 1), out: &lockedWriter{}}
	go func() { l.exit <- run(args, io.Discard, l.out, l.sigs) }()
	return l
}

// up waits until the broker serves AMQP to the definitions file's user
// (with load-definitions no guest is created, as in RabbitMQ).
func (l *launched) up(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := amqp091.Dial("amqp://boot-app:s3cret-app@" + l.addr + "/boot")
		if err == nil {
			c.Close()
			return
		}
		select {
		case code := <-l.exit:
			t.Fatalf("broker %s exited %d: %s", l.addr, code, l.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %s did not come up: %v", l.addr, err)
		}
	}
}

func (l *launched) stop(t *testing.T) {
	t.Helper()
	l.sigs <- syscall.SIGTERM
	select {
	case code := <-l.exit:
		if code != 0 {
			t.Errorf("broker %s exit %d: %s", l.addr, code, l.out.String())
		}
	case <-time.After(15 * time.Second):
		t.Errorf("broker %s did not stop", l.addr)
	}
}

// bootQueues reports which of names exist, declared passively as the
// definitions file's user.
func bootQueues(t *testing.T, addr string, names ...string) string {
	t.Helper()
	c, err := amqp091.Dial("amqp://boot-app:s3cret-app@" + addr + "/boot")
	must(t, err)
	defer c.Close()
	var out []string
	for _, n := range names {
		ch, err := c.Channel()
		must(t, err)
		_, err = ch.QueueDeclarePassive(n, true, false, false, false, nil)
		// A queue whose home node restarted a moment ago answers 404 "home
		// node ... is down or inaccessible" until gossip sees the node
		// again (memberlist's LAN timings here): it is defined all the same.
		defined := err == nil || strings.Contains(err.Error(), "is down or inaccessible")
		out = append(out, fmt.Sprintf("%s:%v", n, defined))
		if err == nil {
			ch.Close()
		}
	}
	return fmt.Sprint(out)
}

// TestLoadDefinitionsClusterRestartKeepsLaterChanges: three cluster nodes
// boot with the same load-definitions directory (their cluster nodes start
// before the import, which goes through Raft). A queue of the files is
// deleted afterwards; a restart of a node with the unchanged files does
// not import them again, so the queue stays deleted everywhere (RabbitMQ's
// definitions.skip_if_unchanged, on by default on cluster nodes). A restart
// with changed files imports them: the new queue and the deleted one are
// there.
func TestLoadDefinitionsClusterRestartKeepsLaterChanges(t *testing.T) {
	quiet(t)
	defs := t.TempDir()
	writeFiles(t, defs, map[string]string{"10-accounts.json": bootAccounts, "20-topology.json": bootTopology})
	type node struct{ amqp, cluster, data string }
	nodes := make([]node, 3)
	for i := range nodes {
		nodes[i] = node{freePort(t), freePort(t), t.TempDir()}
	}
	args := func(i int) []string {
		return []string{"--amqp-listen", nodes[i].amqp, "--mgmt-listen", "", "--metrics-listen", "",
			"--data-dir", nodes[i].data, "--node-name", fmt.Sprintf("warren@d%d", i+1), "--load-definitions", defs,
			"--cluster-listen", nodes[i].cluster, "--cluster-seeds", nodes[0].cluster, "--cluster-bootstrap-expect", "3",
			"--cluster-secret", "a definitions test secret"}
	}
	brokers := make([]*launched, 3)
	for i := range brokers {
		brokers[i] = launch(nodes[i].amqp, args(i)...)
	}
	defer func() {
		for _, b := range brokers {
			b.stop(t)
		}
	}()
	for _, b := range brokers {
		b.up(t, 30*time.Second)
	}
	const both = "[boot.q:true boot.q2:false]"
	everyNode := func(want, when string) {
		t.Helper()
		for i := range nodes {
			deadline := time.Now().Add(10 * time.Second)
			for got := ""; got != want; got = bootQueues(t, nodes[i].amqp, "boot.q", "boot.q2") {
				if time.Now().After(deadline) {
					t.Fatalf("node %d %s: %s, want %s", i+1, when, got, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	everyNode(both, "after the first boot")
	c, err := amqp091.Dial("amqp://boot-app:s3cret-app@" + nodes[0].amqp + "/boot")
	must(t, err)
	ch, err := c.Channel()
	must(t, err)
	_, err = ch.QueueDelete("boot.q", false, false, false)
	must(t, err)
	c.Close()

	brokers[1].stop(t)
	brokers[1] = launch(nodes[1].amqp, args(1)...)
	brokers[1].up(t, 30*time.Second)
	const deleted = "[boot.q:false boot.q2:false]"
	everyNode(deleted, "after a restart with the same files (the delete kept)")

	writeFiles(t, defs, map[string]string{"30-more.json": `{"queues": [{"name": "boot.q2", "vhost": "boot", "durable": true, "auto_delete": false, "arguments": {}}]}`})
	brokers[2].stop(t)
	brokers[2] = launch(nodes[2].amqp, args(2)...)
	brokers[2].up(t, 30*time.Second)
	const changed = "[boot.q:true boot.q2:true]"
	everyNode(changed, "after a restart with changed files")
}
