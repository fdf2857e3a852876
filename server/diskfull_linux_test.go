package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sys/unix"
)

func init() { crashBrokerSetup = mountCrashTmpfs }

// crashTmpfsEnv asks the crash broker for a tmpfs of this many bytes at its
// data directory (the child runs in a mount namespace of its own).
const crashTmpfsEnv = "WARREN_CRASH_TMPFS"

// mountCrashTmpfs mounts the tmpfs crashTmpfsEnv asks for over dir and
// returns the data directory in it; without the variable it returns dir.
func mountCrashTmpfs(dir string) (string, error) {
	size := os.Getenv(crashTmpfsEnv)
	if size == "" {
		return dir, nil
	}
	// Private first, so nothing mounted here reaches the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		return "", fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	data := filepath.Join(dir, "data")
	return data, os.Mkdir(data, 0o755)
}

// startTmpfsBroker starts a crash broker in a mount namespace of its own (and
// a user namespace unless the test runs as root) with its data on a tmpfs of
// size bytes mounted over dir. Its log goes to log as well as to stderr.
// The host sees the tmpfs at /proc/<pid>/root/<dir> (tmpfsPath).
func startTmpfsBroker(t *testing.T, dir, addr string, size int, log io.Writer, env ...string) *crashBroker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WARREN_CRASH_BROKER_DIR="+dir, "WARREN_CRASH_BROKER_ADDR="+addr,
		crashTmpfsEnv+"="+strconv.Itoa(size))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = io.MultiWriter(os.Stderr, log)
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a broker in a mount namespace of its own here: %v", err)
	}
	b := &crashBroker{cmd: cmd, addr: addr}
	t.Cleanup(b.kill)
	waitFor(t, 20*time.Second, "tmpfs broker to accept connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		return false
	})
	return b
}

// tmpfsPath is path inside the broker's tmpfs as the test sees it.
func (b *crashBroker) tmpfsPath(dir, path string) string {
	return filepath.Join("/proc", strconv.Itoa(b.cmd.Process.Pid), "root", dir, path)
}

// fillTmpfs writes path until the file system is full, then gives back
// leave bytes.
func fillTmpfs(t *testing.T, path string, leave int64) {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var n int64
	for i := 0; ; i++ {
		if i > 1<<16 {
			t.Fatal("filler never filled the tmpfs")
		}
		w, err := f.Write(chunk)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		must(t, err)
	}
	must(t, f.Truncate(max(n-leave, 0)))
}

// TestDiskFullIndexRecoversWithoutRestart fills the disk (a tmpfs of the
// broker's own) while persistent messages fan out to several queues, so
// queue indexes fail their writes, then frees the space while the broker
// runs: publishes are confirmed again without a restart, every confirmed
// message is consumed exactly once from every queue, and none acked while
// its queue's index was down comes back. The failures are logged once per
// queue, not once per publish.
func TestDiskFullIndexRecoversWithoutRestart(t *testing.T) {
	// With a small head the failed appends are of messages only on disk;
	// with the default one, of messages in memory.
	for _, head := range []int{32, 2048} {
		t.Run(fmt.Sprint("head-", head), func(t *testing.T) { testDiskFullIndexRecovers(t, head) })
	}
}

func testDiskFullIndexRecovers(t *testing.T, head int) {
	dir, addr, url := crashEnv(t, "disk-full recovery test")
	var log lockedBuffer
	b := startTmpfsBroker(t, dir, addr, 8<<20, &log,
		"WARREN_CRASH_SEGMENT_SIZE=1048576", "WARREN_CRASH_QUEUE_HEAD="+strconv.Itoa(head))
	conn, ch := dialURL(t, url)
	defer func() { conn.Close() }()
	const queues = 8
	must(t, ch.ExchangeDeclare("fan", "fanout", true, false, false, false, nil))
	for i := range queues {
		name := fmt.Sprint("full-", i)
		_, err := ch.QueueDeclare(name, true, false, false, false, nil)
		must(t, err)
		must(t, ch.QueueBind(name, "", "fan", false, nil))
	}
	must(t, ch.Confirm(false))
	pub := &confirmLedger{ch: ch}
	for range 50 {
		if !pub.publish(t) {
			t.Fatal("publish nacked before the disk filled")
		}
	}

	filler := b.tmpfsPath(dir, "filler")
	fillTmpfs(t, filler, 32<<10)
	// The queueindex error text, whoever logs it.
	const indexFailed = "queueindex: index failed after a write error"
	for i := 0; i < 5000 && (pub.nacks < 30 || !strings.Contains(log.String(), indexFailed)); i++ {
		pub.publish(t)
	}
	if !strings.Contains(log.String(), indexFailed) {
		t.Fatalf("no queue index failed although the disk filled (%d confirmed, %d nacked)", len(pub.acked), pub.nacks)
	}
	// While the disk is full consumers still get and ack messages.
	taken := make([]map[string]bool, queues)
	for i := range queues {
		taken[i] = map[string]bool{}
		for range 3 {
			m, ok, err := ch.Get(fmt.Sprint("full-", i), false)
			must(t, err)
			if !ok {
				t.Fatalf("queue full-%d empty although messages were confirmed", i)
			}
			taken[i][m.MessageId] = true
			must(t, m.Ack(false))
		}
	}
	nackedFull := pub.nacks

	must(t, os.Remove(filler)) // space returns
	waitFor(t, 15*time.Second, "publishes to be confirmed again", func() bool { return pub.publish(t) })
	for range 300 {
		if !pub.publish(t) {
			t.Fatal("a publish was nacked after the space returned")
		}
	}
	// Half of the queues are drained now, the other half after a clean
	// restart: what the reopened indexes hold is right in memory and on disk.
	for i := 0; i < queues; i += 2 {
		checkConsumedOnce(t, ch, fmt.Sprint("full-", i), pub.acked, taken[i])
	}
	must(t, b.cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, 10*time.Second, "the broker to close for its restart", conn.IsClosed)
	waitFor(t, 20*time.Second, "the broker to serve again", func() bool {
		c, err := amqp091.Dial(url)
		if err == nil {
			conn = c
		}
		return err == nil
	})
	ch, err := conn.Channel()
	must(t, err)
	for i := range queues {
		if i%2 == 0 {
			q, err := ch.QueueDeclarePassive(fmt.Sprint("full-", i), true, false, false, false, nil)
			must(t, err)
			if q.Messages != 0 {
				t.Fatalf("full-%d: %d messages back after a restart, all were consumed", i, q.Messages)
			}
			continue
		}
		checkConsumedOnce(t, ch, fmt.Sprint("full-", i), pub.acked, taken[i])
	}
	out := log.String()
	if n := strings.Count(out, "message lost"); n > 0 {
		// An index entry left behind by an ack made while the index was
		// down points to a record the store released.
		t.Errorf("%d index entries point to released messages", n)
	}
	if n := strings.Count(out, "queue index write failed"); n > 4*queues {
		t.Errorf("%d index failures logged for %d queues: not rate-limited", n, queues)
	}
	if n := strings.Count(out, "queue index append failed"); n > 0 {
		t.Errorf("%d refused appends logged one by one", n)
	}
	for _, op := range []string{"ack", "mark-delivered"} {
		// The reopened index must hold an entry for every message in memory.
		if n := strings.Count(out, "queue index "+op+" failed"); n > 0 {
			t.Errorf("%d index %ss failed", n, op)
		}
	}
	t.Logf("%d confirmed, %d nacked (%d while the disk was full), %d index failures logged",
		len(pub.acked), pub.nacks, nackedFull, strings.Count(out, "queue index write failed"))
}

// checkConsumedOnce drains queue and checks that it held every confirmed
// message but those in taken exactly once, none of taken, and none
// redelivered.
func checkConsumedOnce(t *testing.T, ch *amqp091.Channel, queue string, confirmed []string, taken map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; ; i++ {
		if i > 1<<20 {
			t.Fatalf("%s: never empty", queue)
		}
		m, ok, err := ch.Get(queue, true)
		must(t, err)
		if !ok {
			break
		}
		switch {
		case seen[m.MessageId]:
			t.Fatalf("%s: %s delivered twice", queue, m.MessageId)
		case taken[m.MessageId]:
			t.Fatalf("%s: %s was acked while the disk was full and came back", queue, m.MessageId)
		case m.Redelivered:
			t.Errorf("%s: %s redelivered, but it was never delivered before", queue, m.MessageId)
		}
		seen[m.MessageId] = true
	}
	for _, id := range confirmed {
		if !seen[id] && !taken[id] {
			t.Fatalf("%s: confirmed message %s lost (%d confirmed, %d consumed)", queue, id, len(confirmed), len(seen))
		}
	}
}

// confirmLedger publishes numbered persistent messages on a confirm channel
// and records which were confirmed: to the fanout "fan", or to exchange
// with key and headers when exchange is set.
type confirmLedger struct {
	ch       *amqp091.Channel
	exchange string
	key      string
	headers  amqp091.Table
	next     int
	acked    []string
	nacks    int
}

// publish sends one message and waits for its confirm.
func (l *confirmLedger) publish(t *testing.T) bool {
	t.Helper()
	id := fmt.Sprint("m", l.next)
	l.next++
	exchange := l.exchange
	if exchange == "" {
		exchange = "fan"
	}
	dc, err := l.ch.PublishWithDeferredConfirm(exchange, l.key, false, false,
		amqp091.Publishing{DeliveryMode: 2, MessageId: id, Body: make([]byte, 200), Headers: l.headers})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := dc.WaitContext(ctx)
	must(t, err)
	if ok {
		l.acked = append(l.acked, id)
	} else {
		l.nacks++
	}
	return ok
}
