package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// startWarrenProcess builds cmd/warren and starts it as a process of its
// own (so that it can be killed with SIGKILL) on a free loopback port. It
// returns the process and its AMQP URI once it accepts connections.
func startWarrenProcess(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "warren")
	build := exec.Command("go", "build", "-o", bin, "../warren")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build warren: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--amqp-listen", addr, "--mgmt-listen", "", "--metrics-listen", "",
		"--data-dir", filepath.Join(dir, "data"), "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // not killed and waited for by the test
			_ = cmd.Process.Kill() // the test failed before the kill; it is going anyway
			_ = cmd.Wait()
		}
	})
	url := "amqp://guest:guest@" + addr + "/"
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := dial(url, "wait")
		if err == nil {
			if err := conn.close(); err != nil {
				t.Fatal(err)
			}
			return cmd, url
		}
		if time.Now().After(deadline) {
			t.Fatalf("warren at %s did not start: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
}

// declareQueue declares a durable queue on the broker at url.
func declareQueue(t *testing.T, url, queue string) {
	t.Helper()
	conn, ch, err := openChannel(url, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := conn.close(); err != nil {
		t.Fatal(err)
	}
}

// TestFailoverKillAndReconnect: publisher and consumer start on a Warren
// process that warren-perf kills with SIGKILL mid-run; both reconnect to
// the failover broker and go on, and the summary times the first confirm
// and the first delivery of a message published after the kill.
func TestFailoverKillAndReconnect(t *testing.T) {
	victim, victimURL := startWarrenProcess(t)
	spareURL := brokerURL(t)
	queue := fmt.Sprintf("warren-perf-failover-%d", time.Now().UnixNano())
	declareQueue(t, spareURL, queue) // the spare is not clustered with the victim
	cfg := DefaultConfig()
	cfg.URL, cfg.FailoverURLs, cfg.QueuePattern = victimURL, []string{spareURL}, queue
	cfg.Durable, cfg.Persistent, cfg.Size, cfg.Confirm, cfg.Rate = true, true, 64, 32, 500
	cfg.KillPID, cfg.KillAfter, cfg.Duration = victim.Process.Pid, 700*time.Millisecond, 2*time.Second
	sum, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	werr := victim.Wait()
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("victim ended with %v, want killed by SIGKILL", werr)
	}
	f := sum.Failover
	if f == nil || f.KilledPID != victim.Process.Pid || f.KillAtSeconds < 0.6 || f.Reconnects != 2 {
		t.Fatalf("failover summary %+v", f)
	}
	for what, v := range map[string]*float64{"confirm": f.ConfirmAfterKillMS, "delivery": f.DeliveryAfterKillMS} {
		if v == nil || *v <= 0 || *v > 1500 {
			t.Fatalf("first %s after kill: %v ms, want within the run", what, v)
		}
	}
	// Messages from after the kill went through the spare broker.
	if sum.Confirmed < 300 || sum.Consumed < 300 {
		t.Fatalf("confirmed %d consumed %d over 2 s at 500/s", sum.Confirmed, sum.Consumed)
	}
	if err := deleteTopology(spareURL, "", []string{queue}); err != nil {
		t.Fatal(err)
	}
}

// TestFailoverWithoutURLsFailsTheRun: without --failover-urls a killed
// broker ends the run with the connection's error, as before.
func TestFailoverWithoutURLsFailsTheRun(t *testing.T) {
	victim, victimURL := startWarrenProcess(t)
	cfg := DefaultConfig()
	cfg.URL, cfg.QueuePattern, cfg.Confirm = victimURL, "warren-perf-nofailover", 32
	cfg.KillPID, cfg.KillAfter, cfg.Duration = victim.Process.Pid, 300*time.Millisecond, 5*time.Second
	sum, err := run(context.Background(), cfg)
	if !errors.Is(err, ErrWorker) {
		t.Fatalf("run error %v, want ErrWorker", err)
	}
	_ = victim.Wait() // killed: its exit status is the kill's
	if sum.Failover == nil || sum.Failover.Reconnects != 0 || sum.Failover.KilledPID != victim.Process.Pid {
		t.Fatalf("failover summary %+v", sum.Failover)
	}
}

// TestQueueArgsAreDeclared: --queue-arg values reach the broker with their
// types: an x-max-length of 5 keeps 5 of 20 confirmed messages.
func TestQueueArgsAreDeclared(t *testing.T) {
	cfg := e2eConfig(t)
	o, err := parseFlags([]string{"--url", cfg.URL, "--queue-pattern", cfg.QueuePattern, "--queue-arg", "x-max-length=5",
		"--queue-arg", "x-overflow=drop-head", "-y", "0", "-C", "20", "-c", "20"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := o.cfg.QueueArgs["x-max-length"].(int64); !ok || v != 5 || o.cfg.QueueArgs["x-overflow"] != "drop-head" {
		t.Fatalf("queue args %#v", o.cfg.QueueArgs)
	}
	if _, err := run(context.Background(), o.cfg); err != nil {
		t.Fatal(err)
	}
	if d := queueDepth(t, cfg.URL, cfg.queueNames()[0]); d != 5 {
		t.Fatalf("queue depth %d, want 5 (x-max-length)", d)
	}
}

// TestSetupURLDeclaresElsewhere: with --setup-url the queue is declared on
// that broker, not on --url's.
func TestSetupURLDeclaresElsewhere(t *testing.T) {
	cfg := e2eConfig(t)
	other := brokerURL(t)
	cfg.SetupURL = other
	cfg.Publishers, cfg.Consumers, cfg.Duration = 0, 1, 100*time.Millisecond
	_, err := run(context.Background(), *cfg)
	var sce *ServerCloseError
	if !errors.As(err, &sce) || sce.Code != amqp.NotFound {
		t.Fatalf("consume on --url's broker: %v, want 404: the queue is on --setup-url's", err)
	}
	_ = queueDepth(t, other, cfg.queueNames()[0]) // fails the test if it is not there
	if err := deleteTopology(other, "", cfg.queueNames()); err != nil {
		t.Fatal(err)
	}
}
