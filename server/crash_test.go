package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// runCrashBroker is the child process of the crash and soak tests: a broker
// on addr with its data in dir, serving until it is killed (or, on SIGTERM,
// closed cleanly).
func runCrashBroker(dir, addr string) {
	if crashBrokerSetup != nil {
		d, err := crashBrokerSetup(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash broker: setup:", err)
			os.Exit(3)
		}
		dir = d
	}
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
	setNofileFromEnv("WARREN_CRASH_BROKER_NOFILE")
	if shadow := os.Getenv("WARREN_CRASH_SHADOW"); shadow != "" {
		observe := func(path string) { snapshotSynced(dir, shadow, path) }
		msgstore.SetSyncObserver(observe)
		queueindex.SetSyncObserver(observe)
	}
	cfg := DefaultConfig()
	cfg.AMQPListen = addr
	cfg.DataDir = dir
	if os.Getenv("WARREN_CRASH_SHADOW") != "" {
		cfg.SegmentSize = 1 << 20 // small segments keep the snapshots cheap
	}
	if size := os.Getenv("WARREN_CRASH_SEGMENT_SIZE"); size != "" {
		// Small segments fill, seal and get compacted within a short test.
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash broker: segment size:", err)
			os.Exit(3)
		}
		cfg.SegmentSize = n
	}
	if head := os.Getenv("WARREN_CRASH_QUEUE_HEAD"); head != "" {
		// A small head makes queues page to their indexes early.
		n, err := strconv.Atoi(head)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash broker: queue head:", err)
			os.Exit(3)
		}
		cfg.QueueHeadMessages = n
	}
	if files := os.Getenv("WARREN_CRASH_INDEX_FILES"); files != "" {
		n, err := strconv.Atoi(files)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash broker: index files:", err)
			os.Exit(3)
		}
		cfg.MaxOpenIndexFiles = n
	}
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
	setNofileFromEnv("WARREN_CRASH_BROKER_NOFILE_AFTER_START")
	if op := os.Getenv("WARREN_CRASH_META_OP"); op != "" {
		runMetaCrashOp(s, op, os.Getenv("WARREN_CRASH_META_WRITE")) // exits
	}
	// SIGTERM is a clean stop (checkpoints written); SIGKILL, the crash.
	// SIGHUP is a clean restart in the same process, for a broker whose
	// data lives as long as the process does (a tmpfs of its own).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGHUP)
	for got := range sig {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "crash broker: close:", err)
			os.Exit(4)
		}
		if got == syscall.SIGTERM {
			os.Exit(0)
		}
		if s, err = New(cfg); err == nil {
			err = s.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash broker: restart:", err)
			os.Exit(3)
		}
	}
}

// crashBrokerSetup, if set (by an OS-specific test file), prepares the
// child's data directory and returns the one to use.
var crashBrokerSetup func(dir string) (string, error)

type crashBroker struct {
	cmd  *exec.Cmd
	addr string
}

func startCrashBroker(t *testing.T, dir, addr string, env ...string) *crashBroker {
	t.Helper()
	b := spawnCrashBroker(t, dir, addr, env...)
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

// spawnCrashBroker starts a broker process without waiting for it to serve.
func spawnCrashBroker(t *testing.T, dir, addr string, env ...string) *crashBroker {
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
	return b
}

func (b *crashBroker) kill() {
	if b.cmd.Process != nil && b.cmd.ProcessState == nil {
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		_ = b.cmd.Wait()
	}
}

// crashEnv prepares a test that runs broker processes: it skips in -short
// mode (what names the test there) and returns a data directory, a free
// address and the guest URL on it.
func crashEnv(t *testing.T, what string) (dir, addr, url string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what + " skipped in -short mode")
	}
	addr = freeAddr(t)
	return t.TempDir(), addr, "amqp://guest:guest@" + addr + "/"
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
	dir, addr, url := crashEnv(t, "crash test")
	rounds := 20
	for round := range rounds {
		b := startCrashBroker(t, dir, addr)
		led := runCrashLoad(t, url, round, 3, true, time.Duration(100+rand.IntN(400))*time.Millisecond, b)
		b = startCrashBroker(t, dir, addr)
		present := drainCrashQueue(t, url)
		nConf, nAck := checkCrashLedger(t, round, led, present)
		t.Logf("round %d: %d confirmed, %d durably acked, %d present after restart", round, nConf, nAck, len(present))
		b.kill()
	}
}

// runCrashLoad declares the crash queues, runs publishers (and an acking
// consumer when ack is set) against the broker at url, kills b after wait
// (the random moment of the crash) and returns what the broker promised.
func runCrashLoad(t *testing.T, url string, round, publishers int, ack bool, wait time.Duration, b *crashBroker) *crashLedger {
	t.Helper()
	led := &crashLedger{confirmed: map[string]bool{}, ackSent: map[string]bool{}, acked: map[string]bool{}}
	setup, err := amqp091.Dial(url)
	must(t, err)
	sch, err := setup.Channel()
	must(t, err)
	for _, q := range []string{"crash", "crash-marker"} {
		_, err = sch.QueueDeclare(q, true, false, false, false, nil)
		must(t, err)
	}
	setup.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashPublisher(url, fmt.Sprintf("r%d-p%d", round, p), led, stop)
		}()
	}
	if ack {
		wg.Add(1)
		go func() {
			defer wg.Done()
			crashAcker(url, led, stop)
		}()
	}
	time.Sleep(wait)
	b.kill()
	close(stop)
	wg.Wait()
	return led
}

// checkCrashLedger fails the test if a confirmed message the consumer had not
// acked is missing after the restart, or a durably acked one came back. It
// returns the numbers of confirmed and durably acked messages.
func checkCrashLedger(t *testing.T, round int, led *crashLedger, present map[string]bool) (confirmed, acked int) {
	t.Helper()
	led.mu.Lock()
	defer led.mu.Unlock()
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
	if len(lost) > 0 {
		t.Fatalf("round %d: %d confirmed messages lost, e.g. %v", round, len(lost), lost[:min(5, len(lost))])
	}
	if len(back) > 0 {
		t.Fatalf("round %d: %d durably acked messages came back, e.g. %v", round, len(back), back[:min(5, len(back))])
	}
	return len(led.confirmed), len(led.acked)
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
	conn, ch := dialURL(t, url)
	defer conn.Close()
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
	_, err := ch.QueuePurge("crash-marker", false)
	must(t, err)
	roundTrip(t, ch)
	return present
}

// TestDiskFullNacksAndRecovers fills the disk under a broker process (a file
// size limit makes writes fail as on a full disk): publishes are nacked, the
// broker keeps serving, and after a restart with space every confirmed
// message is there.
func TestDiskFullNacksAndRecovers(t *testing.T) {
	dir, addr, url := crashEnv(t, "disk-full test")
	b := startCrashBroker(t, dir, addr, "WARREN_CRASH_BROKER_FSIZE="+strconv.Itoa(2<<20))
	conn, ch := dialURL(t, url)
	_, err := ch.QueueDeclare("full", true, false, false, false, nil)
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

// snapshotSynced copies a file that was just fdatasynced into the shadow
// directory, under its final name (temporary .tmp and .compact names are
// renamed into place right after their sync). The shadow holds what a power
// cut would leave of every file the stores sync.
func snapshotSynced(dataDir, shadow, path string) {
	rel, err := filepath.Rel(dataDir, path)
	if err != nil {
		return
	}
	rel = strings.TrimSuffix(strings.TrimSuffix(rel, ".compact"), ".tmp")
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	dst := filepath.Join(shadow, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return
	}
	tmp := dst + ".part"
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, dst)
	}
}

// powerCut rewinds the data directory of a killed broker to what a power cut
// after the last fdatasyncs would leave: every store file as it was at its
// last sync, files never synced gone. meta.db (bbolt fsyncs every commit
// before returning) and lock files stay as they are.
func powerCut(t *testing.T, dataDir, shadow string) (restored, removed int) {
	t.Helper()
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if name == "meta.db" || name == "LOCK" || name == "lock" || name == "cluster_id" || name == nodeIDFile {
			return nil
		}
		rel, err := filepath.Rel(dataDir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(shadow, rel))
		if errors.Is(err, fs.ErrNotExist) {
			removed++
			return os.Remove(path)
		}
		if err != nil {
			return err
		}
		restored++
		return os.WriteFile(path, b, 0o644)
	})
	if err != nil {
		t.Fatalf("simulating the power cut: %v", err)
	}
	return restored, removed
}

// TestPowerCutLosesNothingConfirmed runs the broker under the fsync policy
// while publishers publish with confirms and a consumer acks, kills it, and
// rewinds every store file to its last fdatasync before restarting it, as a
// power cut would. Every confirmed message the consumer had not acked is
// there, and no message whose ack was proven durable comes back. 5 rounds;
// from round 2 on the index file cache holds only 2 files, so the indexes'
// files are closed and reopened between their writes.
func TestPowerCutLosesNothingConfirmed(t *testing.T) {
	if testing.Short() {
		t.Skip("power-cut test skipped in -short mode")
	}
	dir, shadow := t.TempDir(), t.TempDir()
	addr := freeAddr(t)
	url := "amqp://guest:guest@" + addr + "/"
	for round := range 5 {
		files := "WARREN_CRASH_INDEX_FILES=0"
		if round >= 2 {
			files = "WARREN_CRASH_INDEX_FILES=2"
		}
		b := startCrashBroker(t, dir, addr, "WARREN_CRASH_SHADOW="+shadow, files)
		// Odd rounds also ack; even rounds keep every message.
		led := runCrashLoad(t, url, round, 2, round%2 == 1, time.Duration(150+rand.IntN(250))*time.Millisecond, b)
		restored, removed := powerCut(t, dir, shadow)

		b = startCrashBroker(t, dir, addr)
		present := drainCrashQueue(t, url)
		nConf, _ := checkCrashLedger(t, round, led, present)
		t.Logf("round %d: %d confirmed, %d files rewound, %d never-synced files dropped, %d present after restart",
			round, nConf, restored, removed, len(present))
		b.kill()
		// The drain above ran on a broker that is now killed too: start the
		// next round from a clean cut again.
		powerCut(t, dir, shadow)
	}
}
