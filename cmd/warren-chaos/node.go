package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// node is one warren process in its namespace. The harness owns its
// process: start launches it and a goroutine that waits for its exit;
// every other method acts on the running process.
type node struct {
	index   int
	name    string
	ip      string
	dataDir string
	logPath string
	binary  string
	args    []string
	events  *jsonLog // nemesis.log: unexpected exits are faults too

	wg sync.WaitGroup // the waiter goroutine of the current process

	mu       sync.Mutex
	proc     *os.Process
	exited   chan struct{} // closed when proc has exited
	killing  bool          // the harness sent SIGKILL or SIGTERM itself
	paused   bool
	starts   int
	selfExit []string // exits the harness did not cause
}

func newNode(cfg config, i int, events *jsonLog) *node {
	n := &node{
		index: i, name: nodeName(i), ip: nodeIP(i), binary: cfg.Warren, events: events,
		dataDir: filepath.Join(cfg.RunDir, nodeName(i)),
		logPath: filepath.Join(cfg.RunDir, nodeName(i)+".log"),
	}
	peers := make([]string, 0, cfg.Nodes)
	for j := 1; j <= cfg.Nodes; j++ {
		peers = append(peers, nodeIP(j))
	}
	n.args = []string{
		"--amqp-listen", n.ip + ":5672", "--mgmt-listen", n.ip + ":15672", "--metrics-listen", "",
		"--data-dir", n.dataDir, "--node-name", n.name,
		// The clients are on 10.99.0.1, not loopback.
		"--loopback-users=",
		// A small per-node tmpfs is the disk family's disk.
		"--disk-free-limit", "1048576",
	}
	if cfg.Scope == "cluster" {
		n.args = append(n.args, clusterArgs(cfg, n)...)
	}
	r := strings.NewReplacer("{node}", n.name, "{ip}", n.ip, "{peers}", strings.Join(peers, ","))
	for _, a := range cfg.NodeArgs {
		n.args = append(n.args, r.Replace(a))
	}
	return n
}

func (n *node) amqpAddr() string { return n.ip + ":5672" }
func (n *node) mgmtAddr() string { return n.ip + ":15672" }

// start launches warren inside the node's namespace (ip netns exec execs
// it in place, so the pid is warren's), appending to the node's log.
func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited != nil {
		select {
		case <-n.exited:
		default:
			return fmt.Errorf("%s is already running", n.name)
		}
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(logf, "=== warren-chaos: start %d of %s at %s\n", n.starts, n.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.name, n.binary}, n.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.name, err)
	}
	n.proc, n.exited, n.killing, n.paused = cmd.Process, make(chan struct{}), false, false
	n.wg.Add(1)
	go n.wait(cmd, logf, n.exited)
	return nil
}

// wait reaps the process and records an exit the harness did not cause.
func (n *node) wait(cmd *exec.Cmd, logf *os.File, exited chan struct{}) {
	defer n.wg.Done()
	err := cmd.Wait()
	fmt.Fprintf(logf, "=== warren-chaos: %s exited at %s: %v\n", n.name, time.Now().UTC().Format(time.RFC3339Nano), err)
	logf.Close()
	n.mu.Lock()
	expected := n.killing
	if !expected {
		n.selfExit = append(n.selfExit, fmt.Sprint(err))
	}
	n.mu.Unlock()
	if !expected {
		n.events.write(nemesisEvent{T: time.Now().UnixNano(), Event: "node-exit", Nodes: []string{n.name}, Err: fmt.Sprint(err)})
	}
	close(exited)
}

// running reports whether the process is alive (paused counts as alive).
func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// kill sends sig (SIGKILL or SIGTERM) and waits up to timeout for the exit.
func (n *node) kill(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	proc, exited := n.proc, n.exited
	if proc == nil {
		n.mu.Unlock()
		return fmt.Errorf("%s was never started", n.name)
	}
	n.killing = true
	n.mu.Unlock()
	if err := proc.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", n.name, err)
	}
	if n.isPaused() && sig != syscall.SIGKILL {
		if err := n.signalPause(false); err != nil {
			return err
		}
	}
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s did not exit %v after %v", n.name, timeout, sig)
	}
}

func (n *node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// signalPause sends SIGSTOP (pause) or SIGCONT.
func (n *node) signalPause(pause bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return fmt.Errorf("%s was never started", n.name)
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := n.proc.Signal(sig); err != nil {
		return fmt.Errorf("%v %s: %w", sig, n.name, err)
	}
	n.paused = pause
	return nil
}

// selfExits returns the exits the harness did not cause.
func (n *node) selfExits() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.selfExit...)
}
