package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// staticShovelYAML is a configuration file with one static shovel moving
// queue src to queue dest of the same broker.
func staticShovelYAML(amqpAddr, mgmtAddr, dataDir string) string {
	return fmt.Sprintf(`amqp-listen: %s
mgmt-listen: %s
metrics-listen: ""
data-dir: %s
shovels:
  - name: mover
    src-uri: amqp://
    src-queue: src
    dest-uri: amqp://
    dest-queue: dest
    src-prefetch-count: 100
    ack-mode: on-confirm
`, amqpAddr, mgmtAddr, dataDir)
}

// startWarrenProcess runs the built binary with the configuration file;
// the process is killed at test end if still running.
func startWarrenProcess(t *testing.T, bin, config, amqpAddr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "--config", config)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if os.Getenv("WARREN_TEST_DEBUG") == "" {
		cmd.Stdout, cmd.Stderr = nil, nil
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // already gone is fine
			_ = cmd.Wait()         // its exit status is that of the kill
		}
	})
	fedWait(t, 20*time.Second, "the broker listening", func() bool {
		c, err := amqp091.Dial("amqp://guest:guest@" + amqpAddr + "/")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return cmd
}

// queueDepth is a queue's ready count by a passive declare, -1 on error.
func queueDepth(url, queue string) int {
	c, err := amqp091.Dial(url)
	if err != nil {
		return -1
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return -1
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return -1
	}
	return q.Messages
}

// A static shovel from the configuration file runs in the warren process
// (type static in /api/shovels, not deletable there); the process killed
// with SIGKILL in the middle of a transfer and started again, every
// message confirmed to the source queue is in the destination (on-confirm:
// at least once).
func TestStaticShovelSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "warren")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	amqpAddr, mgmtAddr := freePort(t), freePort(t)
	config := filepath.Join(dir, "warren.yaml")
	fedMust(t, os.WriteFile(config, []byte(staticShovelYAML(amqpAddr, mgmtAddr, filepath.Join(dir, "data"))), 0o600))
	url := "amqp://guest:guest@" + amqpAddr + "/"
	proc := startWarrenProcess(t, bin, config, amqpAddr)

	conn, err := amqp091.Dial(url)
	fedMust(t, err)
	ch, err := conn.Channel()
	fedMust(t, err)
	for _, q := range []string{"src", "dest"} {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		fedMust(t, err)
	}
	fedMust(t, ch.Confirm(false))
	const total = 5000
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, total))
	for i := range total {
		fedMust(t, ch.Publish("", "src", false, false, amqp091.Publishing{MessageId: strconv.Itoa(i), DeliveryMode: 2, Body: []byte("m")}))
	}
	for range total {
		if c := <-confirms; !c.Ack {
			t.Fatalf("message %d nacked", c.DeliveryTag)
		}
	}
	conn.Close()
	fedWait(t, 20*time.Second, "the shovel moving", func() bool { return queueDepth(url, "dest") >= 500 })
	fedMust(t, proc.Process.Signal(syscall.SIGKILL))
	_ = proc.Wait() // killed: its exit status says so

	startWarrenProcess(t, bin, config, amqpAddr)
	code, body := mgmtCall(t, mgmtAddr, http.MethodGet, "/api/shovels")
	var list []map[string]any
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0]["type"] != "static" || list[0]["name"] != "mover" {
		t.Errorf("GET /api/shovels: %d %s", code, body)
	}
	if code, body := mgmtCall(t, mgmtAddr, http.MethodDelete, "/api/shovels/vhost/%2F/mover"); code != http.StatusNotFound {
		t.Errorf("DELETE a static shovel: %d %s, want 404", code, body)
	}
	fedWait(t, 60*time.Second, "the source queue empty", func() bool { return queueDepth(url, "src") == 0 })
	conn, err = amqp091.Dial(url)
	fedMust(t, err)
	defer conn.Close()
	ch, err = conn.Channel()
	fedMust(t, err)
	seen := map[string]bool{}
	for _, m := range getAll(t, ch, "dest") {
		seen[m.MessageId] = true
	}
	for i := range total {
		if !seen[strconv.Itoa(i)] {
			t.Fatalf("confirmed message %d lost (%d of %d arrived)", i, len(seen), total)
		}
	}
}

func mgmtCall(t *testing.T, addr, method, path string) (int, string) {
	t.Helper()
	rq, err := http.NewRequest(method, "http://"+addr+path, nil)
	fedMust(t, err)
	rq.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	fedMust(t, err)
	return resp.StatusCode, string(b)
}

// A static shovel the shovel parameter checks refuse stops start-up with
// exit 1, naming it and RabbitMQ's validation text.
func TestStaticShovelRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "warren.yaml")
	yaml := fmt.Sprintf(`amqp-listen: %s
mgmt-listen: ""
metrics-listen: ""
data-dir: %s
shovels:
  - name: broken
    src-uri: amqp://
    dest-uri: amqp://
    dest-queue: dest
`, freePort(t), filepath.Join(dir, "data"))
	fedMust(t, os.WriteFile(config, []byte(yaml), 0o600))
	var stdout, stderr bytes.Buffer
	// A stop already queued: a broker that wrongly starts stops at once
	// with exit 0 instead of hanging the test.
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	code := run([]string{"--config", config}, &stdout, &stderr, sigs)
	if code != 1 || !strings.Contains(stderr.String(), "shovels: broken: ") || !strings.Contains(stderr.String(), "src-queue") {
		t.Fatalf("exit %d, stderr %q; want 1 naming the shovel and the missing key", code, stderr.String())
	}
}
