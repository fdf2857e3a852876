package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Crash tests for the two phases a plain kill -9 rarely hits: start-up
// recovery and compaction of the message store. Both drive a broker in a
// child process (startCrashBroker) and keep the ledger of crash_test.go:
// every confirmed message the client had not acked must survive, and no
// message whose ack a later confirm proved durable may come back.

// phaseSegmentSize is the store segment size of the phase tests: 1 MiB, the
// smallest allowed, so a few MiB of messages seal several segments that
// acks then make mostly dead.
const phaseSegmentSize = 1 << 20

// publishLedger publishes persistent messages ids to queue with body,
// keeping up to 128 publishes in flight, and records each confirmed one in
// led. It returns the number confirmed and the first error (the broker may
// have been killed on purpose).
func publishLedger(ch *amqp091.Channel, queue string, ids []string, body []byte, led *crashLedger) (int, error) {
	type pending struct {
		id string
		dc *amqp091.DeferredConfirmation
	}
	var window []pending
	confirmed := 0
	settle := func(p pending) error {
		<-p.dc.Done()
		if !p.dc.Acked() {
			return fmt.Errorf("publish %s not confirmed", p.id)
		}
		led.mu.Lock()
		led.confirmed[p.id] = true
		led.mu.Unlock()
		confirmed++
		return nil
	}
	for _, id := range ids {
		if len(window) == 128 {
			if err := settle(window[0]); err != nil {
				return confirmed, err
			}
			window = window[1:]
		}
		dc, err := ch.PublishWithDeferredConfirm("", queue, false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, MessageId: id, Body: body})
		if err != nil {
			return confirmed, fmt.Errorf("publish %s: %w", id, err)
		}
		window = append(window, pending{id, dc})
	}
	for _, p := range window {
		if err := settle(p); err != nil {
			return confirmed, err
		}
	}
	return confirmed, nil
}

// dialCrash opens a connection and a channel in confirm mode.
func dialCrash(url string) (*amqp091.Connection, *amqp091.Channel, error) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("channel: %w", err)
	}
	return conn, ch, nil
}

// proveAcks publishes a persistent marker on ch and, once it is confirmed,
// records the acks of batch as durable: the commit round that confirms the
// marker flushed the queue index changes of every ack sent before it.
func proveAcks(ch *amqp091.Channel, batch []string, led *crashLedger) error {
	dc, err := ch.PublishWithDeferredConfirm("", "crash-marker", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent})
	if err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	if ok, err := dc.WaitContext(context.Background()); err != nil || !ok {
		return fmt.Errorf("marker not confirmed (err %v)", err)
	}
	led.mu.Lock()
	for _, id := range batch {
		led.acked[id] = true
	}
	led.mu.Unlock()
	return nil
}

// TestCrashPhaseKillDuringRecovery fills a durable queue (acking a fifth of
// it), kills the broker, then restarts it and kills it again at random
// moments of its start-up, 16 times; at least one kill must land while the
// stores are open but the broker does not serve yet, that is in recovery.
// The broker that finally starts must hold every confirmed message not
// acked, and none whose ack was durable.
func TestCrashPhaseKillDuringRecovery(t *testing.T) {
	dir, addr, url := crashEnv(t, "crash test")
	env := "WARREN_CRASH_SEGMENT_SIZE=" + strconv.Itoa(phaseSegmentSize)
	led := &crashLedger{confirmed: map[string]bool{}, ackSent: map[string]bool{}, acked: map[string]bool{}}

	b := startCrashBroker(t, dir, addr, env)
	conn, ch, err := dialCrash(url)
	must(t, err)
	for _, q := range []string{"crash", "crash-marker"} {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		must(t, err)
	}
	const total = 12000
	ids := make([]string, total)
	for i := range ids {
		ids[i] = fmt.Sprintf("rec-p0-%d", i)
	}
	n, err := publishLedger(ch, "crash", ids, make([]byte, 700), led)
	must(t, err)
	// Ack the first fifth, so recovery also has acked entries and dead
	// records to account for.
	var batch []string
	for range total / 5 {
		m, ok, err := ch.Get("crash", false)
		must(t, err)
		if !ok {
			t.Fatal("queue empty before the acks were done")
		}
		led.ackSent[m.MessageId] = true
		must(t, m.Ack(false))
		batch = append(batch, m.MessageId)
	}
	must(t, proveAcks(ch, batch, led))
	conn.Close()
	b.kill()

	// How long a start takes from exec to serving sets the range of the
	// random kill moments; the measured start is itself a recovery.
	began := time.Now()
	b = startCrashBroker(t, dir, addr, env)
	ready := time.Since(began)
	b.kill()
	const kills = 16
	var inRecovery, early int
	var delays []string
	for range kills {
		delay := time.Duration(rand.Int64N(int64(ready)))
		b := spawnCrashBroker(t, dir, addr, env)
		time.Sleep(delay) // the random moment of the crash
		// New opens and recovers the stores before Start listens: a broker
		// with files of dir open that does not serve yet is recovering.
		opened := holdsFileUnder(b.cmd.Process.Pid, dir)
		serving := accepting(addr)
		b.kill()
		switch {
		case !serving && opened:
			inRecovery++
		case !serving:
			early++
		}
		delays = append(delays, delay.Round(time.Millisecond).String())
	}
	if inRecovery == 0 {
		t.Fatalf("no kill landed during recovery (start takes %s, delays %v, %d before the stores opened)", ready, delays, early)
	}

	startCrashBroker(t, dir, addr, env)
	present := drainCrashQueue(t, url)
	nConf, nAck := checkCrashLedger(t, 0, led, present)
	t.Logf("%d published, %d confirmed, %d durably acked; start takes %s; %d kills at %v: %d during recovery, %d before it; %d present at the end",
		total, n, nAck, ready.Round(time.Millisecond), kills, delays, inRecovery, early, len(present))
	if nConf != total {
		t.Fatalf("%d confirmed, want %d", nConf, total)
	}
}

// accepting reports whether something accepts connections at addr.
func accepting(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 50*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// holdsFileUnder reports whether process pid has a file under dir open
// (Linux /proc; false elsewhere, which fails the recovery test there).
func holdsFileUnder(pid int, dir string) bool {
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// compacting reports whether a compaction is under way in the broker's data
// directory: compactSegment writes its output to *.compact files and renames
// them over the segment when done.
func compacting(dataDir string) bool {
	matches, _ := filepath.Glob(filepath.Join(dataDir, "vhosts", "*", "msgstore", "*.compact"))
	return len(matches) > 0
}

// TestCrashPhaseKillDuringCompaction makes a broker with 1 MiB segments
// compact: every round publishes 4 MiB and acks nine messages in ten, so
// sealed segments become mostly dead, and the broker is killed at a random
// moment 0-39 ms after a compaction output file appears. Restarts after a
// crash rebuild the reference counts and compact what the crash left; odd
// rounds kill that compaction too. After every restart each confirmed
// message not acked is there (the tenth messages of every earlier round,
// which live on in the compacted segments) and no durably acked one.
func TestCrashPhaseKillDuringCompaction(t *testing.T) {
	dir, addr, url := crashEnv(t, "crash test")
	env := "WARREN_CRASH_SEGMENT_SIZE=" + strconv.Itoa(phaseSegmentSize)
	led := &crashLedger{confirmed: map[string]bool{}, ackSent: map[string]bool{}, acked: map[string]bool{}}
	const rounds = 6
	var caught, caughtRecovery int
	for round := range rounds {
		b := startCrashBroker(t, dir, addr, env)
		if round%2 == 1 && waitCompaction(dir, 500*time.Millisecond) {
			// The restart is compacting what the last crash left: kill it
			// there, then start again.
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			b.kill()
			caughtRecovery++
			b = startCrashBroker(t, dir, addr, env)
		}
		if round > 0 {
			present := scanQueue(t, url, "crash")
			checkCrashLedger(t, round, led, present)
		}
		loadDone := make(chan error, 1)
		go func() { loadDone <- compactionLoad(url, round, led) }()
		killed, loadErr := killOnCompaction(dir, b, loadDone)
		if killed {
			caught++
			loadErr = <-loadDone
		}
		t.Logf("round %d: %d confirmed and %d durably acked so far; load ended with %v", round, len(led.confirmed), len(led.acked), loadErr)
	}
	startCrashBroker(t, dir, addr, env)
	present := drainCrashQueue(t, url)
	nConf, nAck := checkCrashLedger(t, rounds, led, present)
	t.Logf("%d rounds: kills during compaction %d under load, %d during post-crash compaction; %d confirmed, %d durably acked, %d present at the end",
		rounds, caught, caughtRecovery, nConf, nAck, len(present))
	if caught < rounds/2 {
		t.Fatalf("only %d of %d kills landed during a compaction", caught, rounds)
	}
}

// waitCompaction polls dataDir for a compaction in progress for up to d.
func waitCompaction(dataDir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if compacting(dataDir) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// killOnCompaction kills b a random 0-39 ms after a compaction output file
// appears in dataDir and reports true. If the load ends (loadDone) and no
// compaction starts within 3 s, it kills b anyway and returns false with the
// load's error.
func killOnCompaction(dataDir string, b *crashBroker, loadDone <-chan error) (bool, error) {
	var giveUp <-chan time.Time
	var loadErr error
	for {
		if compacting(dataDir) {
			// A random moment of the crash: a 1 MiB segment takes about
			// 30 ms to copy at the store's default rate, so some kills land
			// in the copy and some at or after the swap.
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			b.kill()
			return true, nil
		}
		select {
		case loadErr = <-loadDone:
			loadDone = nil
			giveUp = time.After(3 * time.Second)
		case <-giveUp:
			b.kill()
			return false, loadErr
		default:
			time.Sleep(time.Millisecond)
		}
	}
}

// compactionLoad publishes 4 MiB to the crash queue with confirms, then gets
// every message and acks all but those whose number ends in 0, proving the
// acks durable every 50. It returns the first error, the expected end when
// the broker is killed under it.
func compactionLoad(url string, round int, led *crashLedger) error {
	conn, ch, err := dialCrash(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{"crash", "crash-marker"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare %s: %w", q, err)
		}
	}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%d-p0-%d", round, i)
	}
	if _, err := publishLedger(ch, "crash", ids, make([]byte, 4<<10), led); err != nil {
		return err
	}
	var batch []string
	for {
		m, ok, err := ch.Get("crash", false)
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		if !ok {
			break
		}
		if strings.HasSuffix(m.MessageId, "0") {
			continue // kept, unacked on this channel until it closes
		}
		led.mu.Lock()
		led.ackSent[m.MessageId] = true
		led.mu.Unlock()
		if err := m.Ack(false); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		if batch = append(batch, m.MessageId); len(batch) == 50 {
			if err := proveAcks(ch, batch, led); err != nil {
				return err
			}
			batch = nil
		}
	}
	return proveAcks(ch, batch, led)
}

// scanQueue returns the message ids in queue without removing anything: it
// consumes every ready message without acking and closes the connection, so
// the broker requeues them all.
func scanQueue(t *testing.T, url, queue string) map[string]bool {
	t.Helper()
	counts := scanQueues(t, url, queue)
	present := make(map[string]bool, len(counts))
	for id := range counts {
		present[id] = true
	}
	return present
}

// scanQueues returns how many times each message id is in the queues, read
// as scanQueue does. A message the broker announced but could not deliver
// (its record lost) is absent from the result.
func scanQueues(t *testing.T, url string, queues ...string) map[string]int {
	t.Helper()
	conn, ch := dialURL(t, url)
	defer conn.Close()
	probe, err := conn.Channel() // passive declares, apart from the deliveries
	must(t, err)
	counts := map[string]int{}
	for _, name := range queues {
		scanOneQueue(t, ch, probe, name, counts)
	}
	return counts
}

// scanOneQueue consumes queue without acking until the broker holds no ready
// message in it, then cancels the consumer and reads what the broker sent
// before the cancel-ok. Only then is a missing message truly missing: the
// broker writes a delivery under the queue lock as the message leaves the
// ready list, so "0 ready" means every message was written to the socket
// (or dropped), but a client stalled by a loaded machine may not have read
// them yet.
func scanOneQueue(t *testing.T, ch, probe *amqp091.Channel, name string, counts map[string]int) {
	t.Helper()
	q, err := probe.QueueDeclarePassive(name, true, false, false, false, nil)
	must(t, err)
	if q.Messages == 0 {
		return
	}
	tag := "scan-" + name
	ds, err := ch.Consume(name, tag, false, false, false, false, nil)
	must(t, err)
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for got < q.Messages {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("scanning %s: the delivery channel closed", name)
			}
			counts[d.MessageId]++
			got++
			continue
		case <-time.After(200 * time.Millisecond):
		}
		left, err := probe.QueueDeclarePassive(name, true, false, false, false, nil)
		must(t, err)
		if left.Messages == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scanning %s: %d of %d messages delivered, %d still ready after 30 s", name, got, q.Messages, left.Messages)
		}
	}
	before := got
	must(t, ch.Cancel(tag, false))
	for d := range ds { // closed once every delivery sent before the cancel-ok is read
		counts[d.MessageId]++
		got++
	}
	if got != q.Messages || got != before {
		t.Logf("scanning %s: %d messages announced, %d delivered (%d of them after the cancel)", name, q.Messages, got, got-before)
	}
}
