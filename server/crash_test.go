package server

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// runCrashBroker is the child process of TestCrashKill9: a broker on addr
// with its data in dir, serving until it is killed.
func runCrashBroker(dir, addr string) {
	if limit := os.Getenv("WARREN_CRASH_BROKER_FSIZE"); limit != "" {
		// Simulate a full disk: writes past this file size fail with EFBIG.
		n, err := strconv.ParseUint(limit, 10, 64)
		if err == nil {
			err = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash broker: file size limit:", err)
			os.Exit(3)
		}
	}
	cfg := DefaultConfig()
	cfg.AMQPListen = addr
	cfg.DataDir = dir
	cfg.MemoryHighWatermark = 0
	cfg.DiskFreeLimit = 0
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash broker:", err)
		os.Exit(3)
	}
	if err := s.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "crash broker:", err)
		os.Exit(3)
	}
	select {}
}

type crashBroker struct {
	cmd  *exec.Cmd
	addr string
}

func startCrashBroker(t *testing.T, dir, addr string, env ...string) *crashBroker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WARREN_CRASH_BROKER_DIR="+dir, "WARREN_CRASH_BROKER_ADDR="+addr)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &crashBroker{cmd: cmd, addr: addr}
	t.Cleanup(func() { b.kill() })
	waitFor(t, 20*time.Second, "crash broker to accept connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		return false
	})
	return b
}

func (b *crashBroker) kill() {
	if b.cmd.Process != nil && b.cmd.ProcessState == nil {
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		_ = b.cmd.Wait()
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// crashLedger records what the broker promised: confirmed publishes and acks
// that a later confirm proves were processed (and so flushed) by the broker.
type crashLedger struct {
	mu        sync.Mutex
	confirmed map[string]bool
	ackSent   map[string]bool // acks sent: the broker may have taken them
	acked     map[string]bool // acks a later confirm proves the broker made durable
}

// TestCrashKill9 kills a broker process with SIGKILL at random moments while
// several publishers publish persistent messages with confirms and a consumer
// acknowledges, 20 rounds. After every restart each confirmed message is
// present (at least once) unless the consumer had sent its ack, and no
// message whose ack was durable comes back.
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	url := "amqp://guest:guest@" + addr + "/"
	rounds := 20
	for round := range rounds {
		b := startCrashBroker(t, dir, addr)
		led := &crashLedger{confirmed: map[string]bool{}, ackSent: map[string]bool{}, acked: map[string]bool{}}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		setup, err := amqp091.Dial(url)
		must(t, err)
		sch, err := setup.Channel()
		must(t, err)
		_, err = sch.QueueDeclare("crash", true, false, false, false, nil)
		must(t, err)
		_, err = sch.QueueDeclare("crash-marker", true, false, false, false, nil)
		must(t, err)
		setup.Close()
		for p := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crashPublisher(url, fmt.Sprintf("r%d-p%d", round, p), led, stop)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashAcker(url, led, stop)
		}()
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond) // the random moment of the crash
		b.kill()
		close(stop)
		wg.Wait()

		b = startCrashBroker(t, dir, addr)
		present := drainCrashQueue(t, url)
		led.mu.Lock()
		var lost, back []string
		for id := range led.confirmed {
			if !present[id] && !led.ackSent[id] {
				lost = append(lost, id)
			}
		}
		for id := range led.acked {
			if present[id] {
				back = append(back, id)
			}
		}
		nConf, nAck := len(led.confirmed), len(led.acked)
		led.mu.Unlock()
		if len(lost) > 0 {
			t.Fatalf("round %d: %d confirmed messages lost, e.g. %v", round, len(lost), lost[:min(5, len(lost))])
		}
		if len(back) > 0 {
			t.Fatalf("round %d: %d acked messages came back, e.g. %v", round, len(back), back[:min(5, len(back))])
		}
		t.Logf("round %d: %d confirmed, %d durably acked, %d present after restart", round, nConf, nAck, len(present))
		b.kill()
	}
}

func crashPublisher(url, prefix string, led *crashLedger, stop chan struct{}) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil || ch.Confirm(false) != nil {
		return
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		id := fmt.Sprintf("%s-%d", prefix, i)
		dc, err := ch.PublishWithDeferredConfirm("", "crash", false, false, amqp091.Publishing{DeliveryMode: 2, MessageId: id, Body: []byte(id)})
		if err != nil {
			return
		}
		ok, err := dc.WaitContext(contextWithStop(stop))
		if err != nil || !ok {
			return
		}
		led.mu.Lock()
		led.confirmed[id] = true
		led.mu.Unlock()
	}
}

// crashAcker gets and acks messages; a batch of acks counts as durable once a
// publish on the same channel, sent after them, is confirmed (the commit round
// that confirms it flushed the acks too).
func crashAcker(url string, led *crashLedger, stop chan struct{}) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil || ch.Confirm(false) != nil {
		return
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		var batch []string
		for range 5 {
			m, ok, err := ch.Get("crash", false)
			if err != nil {
				return
			}
			if !ok {
				break
			}
			led.mu.Lock()
			led.ackSent[m.MessageId] = true
			led.mu.Unlock()
			if m.Ack(false) != nil {
				return
			}
			batch = append(batch, m.MessageId)
		}
		dc, err := ch.PublishWithDeferredConfirm("", "crash-marker", false, false, amqp091.Publishing{DeliveryMode: 2})
		if err != nil {
			return
		}
		ok, err := dc.WaitContext(contextWithStop(stop))
		if err != nil || !ok {
			return
		}
		led.mu.Lock()
		for _, id := range batch {
			led.acked[id] = true
		}
		led.mu.Unlock()
	}
}

// drainCrashQueue reads every message of the crash queue after a restart and
// acknowledges it, so the next round starts empty.
func drainCrashQueue(t *testing.T, url string) map[string]bool {
	t.Helper()
	conn, err := amqp091.Dial(url)
	must(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	must(t, err)
	present := map[string]bool{}
	for {
		m, ok, err := ch.Get("crash", false)
		must(t, err)
		if !ok {
			break
		}
		if strings.Contains(m.MessageId, "-p") {
			present[m.MessageId] = true
		}
		must(t, m.Ack(false))
	}
	_, err = ch.QueuePurge("crash-marker", false)
	must(t, err)
	roundTrip(t, ch)
	return present
}

// TestDiskFullNacksAndRecovers fills the disk under a broker process (a file
// size limit makes writes fail as on a full disk): publishes are nacked, the
// broker keeps serving, and after a restart with space every confirmed
// message is there.
func TestDiskFullNacksAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("disk-full test skipped in -short mode")
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	url := "amqp://guest:guest@" + addr + "/"
	b := startCrashBroker(t, dir, addr, "WARREN_CRASH_BROKER_FSIZE="+strconv.Itoa(2<<20))
	conn, err := amqp091.Dial(url)
	must(t, err)
	ch, err := conn.Channel()
	must(t, err)
	_, err = ch.QueueDeclare("full", true, false, false, false, nil)
	must(t, err)
	must(t, ch.Confirm(false))
	body := make([]byte, 10<<10)
	var acked []string
	nacks := 0
	for i := 0; i < 1000 && nacks < 5; i++ {
		id := fmt.Sprint("m", i)
		dc, err := ch.PublishWithDeferredConfirm("", "full", false, false, amqp091.Publishing{DeliveryMode: 2, MessageId: id, Body: body})
		must(t, err)
		ok, err := dc.WaitContext(context.Background())
		must(t, err)
		if ok {
			acked = append(acked, id)
		} else {
			nacks++
		}
	}
	if nacks == 0 {
		t.Fatalf("no publish was refused although the disk was full (%d acked)", len(acked))
	}
	// The broker still serves: a transient queue works.
	c2, err := conn.Channel()
	must(t, err)
	mustDeclare(t, c2, "still-alive", nil)
	publish(t, c2, "", "still-alive", "x")
	if _, ok, err := c2.Get("still-alive", true); err != nil || !ok {
		t.Fatalf("broker unusable after the disk filled: ok=%v err=%v", ok, err)
	}
	conn.Close()
	b.kill()

	startCrashBroker(t, dir, addr)
	present := map[string]bool{}
	conn, err = amqp091.Dial(url)
	must(t, err)
	defer conn.Close()
	ch, err = conn.Channel()
	must(t, err)
	for {
		m, ok, err := ch.Get("full", true)
		must(t, err)
		if !ok {
			break
		}
		present[m.MessageId] = true
	}
	for _, id := range acked {
		if !present[id] {
			t.Fatalf("confirmed message %s lost after the disk filled (%d confirmed, %d present)", id, len(acked), len(present))
		}
	}
	t.Logf("%d confirmed before the disk filled, %d nacked, all %d present after restart", len(acked), nacks, len(present))
}
