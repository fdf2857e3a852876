package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// nodeReadyTimeout bounds how long a started node may take to accept AMQP.
const nodeReadyTimeout = 60 * time.Second

// runInner is the harness inside its namespaces: network, nodes, workload
// and nemesis, then heal, recovery and drain. The checker runs outside.
func runInner(runJSON string, stdout, stderr io.Writer) int {
	cfg, err := readConfig(filepath.Dir(runJSON))
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	if err := setupNetwork(cfg.Nodes); err != nil {
		fmt.Fprintf(stderr, "warren-chaos: cannot build the namespaces' network, not running (no fallback to other addresses): %v\n", err)
		return exitSetup
	}
	netem := netemWorks()
	if netem != nil {
		msg := fmt.Sprintf("tc netem unavailable (%v): netem family skipped", netem)
		fmt.Fprintln(stdout, "warren-chaos:", msg)
		if cfg.Family == "netem" {
			return exitSkipped
		}
	}
	events, err := createJSONLog(filepath.Join(cfg.RunDir, "nemesis.log"))
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	events.flushEach = true
	defer events.Close()
	if netem != nil {
		events.write(nemesisEvent{T: time.Now().UnixNano(), Event: "skip", Family: "netem", Err: netem.Error()})
	}
	nodes := make([]*node, cfg.Nodes)
	for i := range nodes {
		nodes[i] = newNode(cfg, i+1, events)
	}
	code := runNodes(cfg, nodes, events, netem == nil, stdout, stderr)
	for _, n := range nodes {
		if n.running() {
			if err := n.kill(syscall.SIGTERM, 15*time.Second); err != nil {
				fmt.Fprintln(stderr, "warren-chaos:", err, "- killing it")
				n.kill(syscall.SIGKILL, 5*time.Second)
			}
		}
		n.wg.Wait()
	}
	return code
}

func runNodes(cfg config, nodes []*node, events *jsonLog, netem bool, stdout, stderr io.Writer) int {
	for _, n := range nodes {
		if cfg.Family == "disk" || cfg.Family == "mixed" {
			if err := mountDataTmpfs(n.dataDir, cfg.DiskMB); err != nil {
				fmt.Fprintln(stderr, "warren-chaos: disk tmpfs:", err)
				return exitSetup
			}
		}
		if err := n.start(); err != nil {
			fmt.Fprintln(stderr, "warren-chaos:", err)
			return exitSetup
		}
	}
	if err := waitReady(nodes); err != nil {
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	if err := declareWorkQueues(cfg, nodes); err != nil {
		fmt.Fprintln(stderr, "warren-chaos: declare the work queues:", err)
		return exitSetup
	}
	hlog, err := createJSONLog(filepath.Join(cfg.RunDir, "history.jsonl"))
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	h := &history{log: hlog, maxOps: cfg.MaxOps}
	runWorkload(cfg, nodes, h, events, netem)
	fmt.Fprintln(stdout, "warren-chaos: workload done; recovering and draining")
	err = recoverAndDrain(cfg, nodes, h)
	if cerr := hlog.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	return exitOK
}

// runWorkload runs the clients and the nemesis for the run's duration.
func runWorkload(cfg config, nodes []*node, h *history, events *jsonLog, netem bool) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	w := &workload{cfg: cfg, nodes: nodes, queues: workQueues(cfg), h: h}
	w.start(ctx)
	m := newNemesis(cfg, nodes, events, netem)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.run(ctx)
	}()
	<-ctx.Done()
	wg.Wait()
	w.wg.Wait()
}

// waitReady waits until every node completes an AMQP handshake.
func waitReady(nodes []*node) error {
	for _, n := range nodes {
		deadline := time.Now().Add(nodeReadyTimeout)
		for {
			c, err := dial(n)
			if err == nil {
				c.Close()
				break
			}
			if !n.running() {
				return fmt.Errorf("%s exited before answering (see %s): %v", n.name, n.logPath, err)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not answer AMQP within %v: %v", n.name, nodeReadyTimeout, err)
			}
			time.Sleep(100 * time.Millisecond) // poll until the deadline
		}
	}
	return nil
}

// queueArgs are the work queues' declare arguments.
func queueArgs(cfg config) amqp.Table {
	if cfg.QueueType == "classic" {
		return nil
	}
	return amqp.Table{"x-queue-type": cfg.QueueType}
}

// declareWorkQueues declares the durable work queue on each node, or in a
// cluster each node's own work queue on it (its home).
func declareWorkQueues(cfg config, nodes []*node) error {
	if cfg.Scope == "cluster" {
		return declareClusterQueues(cfg, nodes)
	}
	for _, n := range nodes {
		if err := declareOn(n, workQueue, queueArgs(cfg)); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}
