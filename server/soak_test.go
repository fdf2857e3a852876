package server

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/soakflag"
)

// The soak test runs a broker process for a long time under publishers,
// consumers, random client disconnects and broker restarts (clean and
// kill -9 in turn), and checks what the crash tests check, over and over:
// no confirmed message is lost, no message whose ack was proven durable
// comes back, and the broker's memory stays flat. It runs only with -soak:
//
//	go test ./server -run TestSoak -soak 10m -timeout 30m -v

const (
	soakQueues     = 3
	soakPublishers = 4
	soakConsumers  = 4
	// soakTick and soakBurst pace each publisher: soakBurst messages per
	// tick, so 4 publishers offer 1,000 messages a second. The pace keeps the
	// ledger (one map entry per message) small over a long run.
	soakTick  = 20 * time.Millisecond
	soakBurst = 5
	// soakAckBurst paces each consumer: soakAckBurst acks per tick, 200 a
	// second. Queue 0 has two consumers and drains; queues 1 and 2 have one
	// each and build a backlog up to soakMaxBacklog, so every restart has
	// thousands of messages to recover, many paged out of memory.
	soakAckBurst = 4
	// soakWindow is the most unconfirmed publishes of one publisher.
	soakWindow = 64
	// soakMaxBacklog bounds the confirmed messages not yet acked: publishers
	// wait above it, so memory is compared at a bounded backlog.
	soakMaxBacklog = 20000
	// soakSession is the mean life of a client connection before the client
	// drops it on purpose (clean close or socket cut, in turn).
	soakSession = 5 * time.Second
	// soakWarmup is how long a broker runs before its RSS counts.
	soakWarmup = 10 * time.Second
)

// Message states in the soak ledger.
const (
	soakConfirmed  uint8 = 1 << iota // the broker confirmed the publish
	soakAckSent                      // a consumer sent an ack: it may be gone
	soakAckDurable                   // a confirm after the ack proved it durable
)

// soakLedger records what the broker promised for every message of the run,
// keyed by publisher<<40 | sequence number.
type soakLedger struct {
	mu         sync.Mutex
	state      map[uint64]uint8
	confirmed  int64 // messages confirmed
	settled    int64 // confirmed messages with an ack sent
	violations []string

	published, acksSent, acksDurable, delivered, redelivered atomic.Int64
	sessions, disconnects                                    atomic.Int64
}

func soakID(key uint64) string { return fmt.Sprintf("s%d-%d", key>>40, key&(1<<40-1)) }

func soakKey(id string) (uint64, bool) {
	p, n, ok := strings.Cut(strings.TrimPrefix(id, "s"), "-")
	if !ok {
		return 0, false
	}
	pi, err1 := strconv.ParseUint(p, 10, 16)
	ni, err2 := strconv.ParseUint(n, 10, 40)
	return pi<<40 | ni, err1 == nil && err2 == nil
}

// set adds bits to a message's state and keeps the backlog counters.
func (l *soakLedger) set(key uint64, bits uint8) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.state[key]
	st := old | bits
	l.state[key] = st
	if old&soakConfirmed == 0 && st&soakConfirmed != 0 {
		l.confirmed++
	}
	both := soakConfirmed | soakAckSent
	if old&both != both && st&both == both {
		l.settled++
	}
}

// delivery checks a delivery against the ledger: a message whose ack was
// durable must never be delivered again.
func (l *soakLedger) delivery(id string) (uint64, bool) {
	key, ok := soakKey(id)
	if !ok {
		l.violate(fmt.Sprintf("delivery with a foreign message id %q", id))
		return 0, false
	}
	l.mu.Lock()
	st := l.state[key]
	l.mu.Unlock()
	if st&soakAckDurable != 0 {
		l.violate(fmt.Sprintf("message %s delivered again after its ack was durable", id))
	}
	return key, true
}

func (l *soakLedger) violate(v string) {
	l.mu.Lock()
	if len(l.violations) < 20 {
		l.violations = append(l.violations, v)
	}
	l.mu.Unlock()
}

func (l *soakLedger) backlog() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirmed - l.settled
}

// check compares the ledger with the queues' contents after a restart: every
// confirmed message without an ack sent is present, no durably acked one is.
// It also returns how many ids are there more than once.
func (l *soakLedger) check(present map[string]int) (lost, back []string, dups int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, st := range l.state {
		id := soakID(key)
		n := present[id]
		if st&soakConfirmed != 0 && st&soakAckSent == 0 && n == 0 {
			lost = append(lost, id)
		}
		if st&soakAckDurable != 0 && n > 0 {
			back = append(back, id)
		}
	}
	for _, n := range present {
		if n > 1 {
			dups++
		}
	}
	return lost, back, dups
}

// soakClients runs the publishers and consumers of one broker lifetime.
type soakClients struct {
	url  string
	led  *soakLedger
	seq  []atomic.Uint64 // next sequence number per publisher, across lifetimes
	body []byte
	stop chan struct{}
	wg   sync.WaitGroup
}

func (c *soakClients) start() {
	c.stop = make(chan struct{})
	for p := range soakPublishers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.loop(func(rng *rand.Rand) error { return c.publishSession(p, rng) })
		}()
	}
	for i := range soakConsumers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.loop(func(rng *rand.Rand) error { return c.consumeSession(fmt.Sprintf("soak-%d", i%soakQueues), rng) })
		}()
	}
}

// halt stops the clients and waits for them.
func (c *soakClients) halt() {
	close(c.stop)
	c.wg.Wait()
}

func (c *soakClients) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// loop runs sessions until stop, reconnecting after each (a broker restart
// refuses dials for a while: retry every 50 ms).
func (c *soakClients) loop(session func(*rand.Rand) error) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	retry := time.NewTimer(0)
	defer retry.Stop()
	for !c.stopped() {
		_ = session(rng) // a failed session is expected across a restart: reconnect
		retry.Reset(50 * time.Millisecond)
		select {
		case <-c.stop:
			return
		case <-retry.C:
		}
	}
}

// soakConn is a client connection that can also be cut at the socket.
type soakConn struct {
	*amqp091.Connection
	mu sync.Mutex
	nc net.Conn
}

func dialSoak(url string) (*soakConn, error) {
	sc := &soakConn{}
	dial := amqp091.DefaultDial(5 * time.Second)
	conn, err := amqp091.DialConfig(url, amqp091.Config{
		Heartbeat: 10 * time.Second,
		Dial: func(network, addr string) (net.Conn, error) {
			nc, err := dial(network, addr)
			sc.mu.Lock()
			sc.nc = nc
			sc.mu.Unlock()
			return nc, err
		},
	})
	if err != nil {
		return nil, err
	}
	sc.Connection = conn
	return sc, nil
}

// drop ends the connection the way a client would vanish: half of the time
// with connection.close, half by cutting the socket.
func (sc *soakConn) drop(rng *rand.Rand) {
	if rng.IntN(2) == 0 {
		_ = sc.CloseDeadline(time.Now().Add(2 * time.Second))
		return
	}
	sc.mu.Lock()
	nc := sc.nc
	sc.mu.Unlock()
	nc.Close()
	_ = sc.CloseDeadline(time.Now().Add(time.Second)) // release the library's goroutines
}

// sessionEnd returns when the client drops its connection on purpose.
func sessionEnd(rng *rand.Rand) <-chan time.Time {
	d := time.Duration(rng.ExpFloat64()*float64(soakSession)) + 100*time.Millisecond
	return time.After(d)
}

// openSession dials, counts the session and opens a channel in confirm
// mode. The caller drops the connection when the session ends.
func (c *soakClients) openSession() (*soakConn, *amqp091.Channel, error) {
	conn, err := dialSoak(c.url)
	if err != nil {
		return nil, nil, err
	}
	c.led.sessions.Add(1)
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.CloseDeadline(time.Now().Add(2 * time.Second)) // the channel error is the one to report
		return nil, nil, err
	}
	return conn, ch, nil
}

// publishSession publishes persistent messages with confirms until the
// session ends, the connection fails or the clients stop.
func (c *soakClients) publishSession(p int, rng *rand.Rand) error {
	conn, ch, err := c.openSession()
	if err != nil {
		return err
	}
	defer conn.drop(rng)
	type pending struct {
		key uint64
		dc  *amqp091.DeferredConfirmation
	}
	var window []pending
	// harvest records the settled confirms at the window's head; with wait
	// it blocks for the oldest.
	harvest := func(wait bool) bool {
		for len(window) > 0 {
			select {
			case <-window[0].dc.Done():
			case <-c.stop:
				return false
			default:
				if !wait {
					return true
				}
				select {
				case <-window[0].dc.Done():
				case <-c.stop:
					return false
				}
			}
			if !window[0].dc.Acked() {
				return false // nacked, or the channel closed: in doubt
			}
			c.led.set(window[0].key, soakConfirmed)
			window = window[1:]
			wait = false
		}
		return true
	}
	tick := time.NewTicker(soakTick)
	defer tick.Stop()
	end := sessionEnd(rng)
	for {
		select {
		case <-c.stop:
			return nil
		case <-end:
			c.led.disconnects.Add(1)
			return nil
		case <-tick.C:
		}
		if !harvest(false) {
			return nil
		}
		if c.led.backlog() > soakMaxBacklog {
			continue
		}
		for range soakBurst {
			if len(window) >= soakWindow && !harvest(true) {
				return nil
			}
			key := uint64(p)<<40 | c.seq[p].Add(1)
			body := c.body[:64+rng.IntN(len(c.body)-64)]
			dc, err := ch.PublishWithDeferredConfirm("", fmt.Sprintf("soak-%d", key%soakQueues), false, false,
				amqp091.Publishing{DeliveryMode: amqp091.Persistent, MessageId: soakID(key), Body: body})
			if err != nil {
				return err
			}
			c.led.published.Add(1)
			window = append(window, pending{key, dc})
		}
	}
}

// consumeSession consumes queue with manual acks until the session ends, the
// connection fails or the clients stop. Every 50 acks, or when deliveries
// pause, it publishes a marker with a confirm on the same channel: its
// confirm proves the acks before it durable.
func (c *soakClients) consumeSession(queue string, rng *rand.Rand) error {
	conn, ch, err := c.openSession()
	if err != nil {
		return err
	}
	defer conn.drop(rng)
	if err := ch.Qos(100, 0, false); err != nil {
		return err
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	var batch []uint64
	prove := func() bool {
		dc, err := ch.PublishWithDeferredConfirm("", "soak-marker", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent})
		if err != nil {
			return false
		}
		select {
		case <-dc.Done():
		case <-c.stop:
			return false
		}
		if !dc.Acked() {
			return false
		}
		for _, key := range batch {
			c.led.set(key, soakAckDurable)
		}
		c.led.acksDurable.Add(int64(len(batch)))
		batch = batch[:0]
		return true
	}
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	tick := time.NewTicker(soakTick)
	defer tick.Stop()
	end := sessionEnd(rng)
	budget := soakAckBurst
	for {
		in := ds
		if budget == 0 {
			in = nil // paced: leave the deliveries waiting until the next tick
		}
		select {
		case <-c.stop:
			return nil
		case <-end:
			c.led.disconnects.Add(1)
			return nil
		case <-tick.C:
			budget = soakAckBurst
		case <-idle.C:
			if len(batch) > 0 && !prove() {
				return nil
			}
		case d, ok := <-in:
			budget--
			if !ok {
				return nil
			}
			c.led.delivered.Add(1)
			if d.Redelivered {
				c.led.redelivered.Add(1)
			}
			key, ok := c.led.delivery(d.MessageId)
			if !ok {
				continue
			}
			c.led.set(key, soakAckSent)
			if err := d.Ack(false); err != nil {
				return err
			}
			c.led.acksSent.Add(1)
			if batch = append(batch, key); len(batch) >= 50 && !prove() {
				return nil
			}
			idle.Reset(50 * time.Millisecond)
		}
	}
}

// stop ends the broker process with SIGTERM (a clean close) and waits up to
// timeout for it to exit; after that it is killed and an error returned.
func (b *crashBroker) stop(timeout time.Duration) error {
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("clean stop: %w", err)
		}
		return nil
	case <-time.After(timeout):
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("clean stop did not finish within %s", timeout)
	}
}

// procRSS returns the resident set size of process pid (Linux /proc).
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// soakSchedule returns the soak's length, fitted into the test's -timeout,
// and the life of one broker: 30-60 s, shorter for short soaks so that at
// least four brokers run.
func soakSchedule(t *testing.T) (total time.Duration, life func() time.Duration) {
	d := *soakflag.Duration
	if deadline, ok := t.Deadline(); ok {
		if room := time.Until(deadline) - 2*time.Minute; room < d {
			t.Logf("soak shortened from %s to %s to fit -timeout; pass a larger -timeout to run it all", d, room.Round(time.Second))
			d = max(room, time.Minute)
		}
	}
	return d, func() time.Duration {
		if d < 4*time.Minute {
			return d / 4
		}
		return 30*time.Second + rand.N(30*time.Second)
	}
}

// TestSoak runs for -soak: a broker process, 4 publishers with confirms on 3
// durable queues, 4 consumers with manual acks, every client dropping its
// connection at random moments, and the broker restarted every 30-60 s,
// with a clean stop and kill -9 in turn. After every restart the queues
// hold every confirmed message not acked and no durably acked one, and
// consumers never see a durably acked message again. The broker's RSS at
// the end of its last life may exceed that of the first life that ended
// with a full backlog by at most 2x + 32 MiB (the backlog is bounded
// throughout). Most redeliveries come from the check after each restart,
// which reads every message and lets the broker requeue it.
func TestSoak(t *testing.T) {
	if *soakflag.Duration <= 0 {
		t.Skip("soak test runs only with -soak DURATION")
	}
	total, life := soakSchedule(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	url := "amqp://guest:guest@" + addr + "/"
	env := "WARREN_CRASH_SEGMENT_SIZE=" + strconv.Itoa(4<<20) // segments seal, die and compact within a life
	led := &soakLedger{state: map[uint64]uint8{}}
	clients := &soakClients{url: url, led: led, seq: make([]atomic.Uint64, soakPublishers), body: make([]byte, 2048)}
	for i := range clients.body {
		clients.body[i] = byte('a' + i%26)
	}

	b := startCrashBroker(t, dir, addr, env)
	conn, err := amqp091.Dial(url)
	must(t, err)
	ch, err := conn.Channel()
	must(t, err)
	for i := range soakQueues {
		_, err := ch.QueueDeclare(fmt.Sprintf("soak-%d", i), true, false, false, false, nil)
		must(t, err)
	}
	_, err = ch.QueueDeclare("soak-marker", true, false, false, false, amqp091.Table{"x-max-length": int32(100)})
	must(t, err)
	conn.Close()

	began := time.Now()
	var rss, backlogs []int64 // RSS samples and the backlog at each
	var restarts, kills int
	for lives := 1; ; lives++ {
		lifeStart := time.Now()
		clients.start()
		wait, remaining := life(), total-time.Since(began)
		last := remaining <= wait*3/2
		if last {
			wait = remaining
		}
		watchLife(led, wait) // the broker's life: the load runs meanwhile
		if time.Since(lifeStart) >= soakWarmup {
			n, err := procRSS(b.cmd.Process.Pid)
			if err != nil {
				t.Logf("no RSS sample: %v", err)
			} else {
				rss = append(rss, n)
				backlogs = append(backlogs, led.backlog())
			}
		}
		var how string
		if lives%2 == 1 {
			// Killed under load: the clients see their connections die.
			b.kill()
			kills++
			how = "kill -9"
			clients.halt()
		} else {
			clients.halt()
			if err := b.stop(30 * time.Second); err != nil {
				t.Errorf("life %d: %v", lives, err)
			}
			how = "clean stop"
		}
		restarts++
		b = startCrashBroker(t, dir, addr, env)
		present := scanQueues(t, url, "soak-0", "soak-1", "soak-2")
		lost, back, dups := led.check(present)
		t.Logf("life %d (%s, ended by %s): published %d, confirmed %d, acks sent %d, durable %d, delivered %d (%d redelivered), sessions %d, disconnects %d; after restart %d present (%d duplicated), data dir %d MiB, RSS %v at backlogs %v",
			lives, time.Since(lifeStart).Round(time.Second), how, led.published.Load(), led.confirmed, led.acksSent.Load(),
			led.acksDurable.Load(), led.delivered.Load(), led.redelivered.Load(), led.sessions.Load(), led.disconnects.Load(),
			len(present), dups, dirBytes(dir)>>20, mib(rss), backlogs)
		if len(lost) > 0 || len(back) > 0 || len(led.violations) > 0 {
			t.Fatalf("life %d: %d confirmed messages lost (e.g. %v), %d durably acked came back (e.g. %v), violations %v",
				lives, len(lost), lost[:min(5, len(lost))], len(back), back[:min(5, len(back))], led.violations)
		}
		if last {
			break
		}
	}
	t.Logf("soak %s: %d restarts (%d kill -9, %d clean), %d published, %d confirmed, %d unconfirmed (in flight at a restart or drop), %d acks sent, %d proven durable, %d deliveries (%d redelivered), %d client sessions, %d dropped on purpose, RSS per life %v at backlogs %v",
		time.Since(began).Round(time.Second), restarts, kills, restarts-kills, led.published.Load(), led.confirmed,
		led.published.Load()-led.confirmed, led.acksSent.Load(), led.acksDurable.Load(), led.delivered.Load(),
		led.redelivered.Load(), led.sessions.Load(), led.disconnects.Load(), mib(rss), backlogs)
	// The baseline is the first life that ended with the backlog at its
	// bound (the first life if none did): RSS follows the backlog while it
	// builds up.
	base := 0
	for i, n := range backlogs {
		if n >= soakMaxBacklog*9/10 {
			base = i
			break
		}
	}
	if len(rss) >= 2 && base < len(rss)-1 {
		if first, last := rss[base], rss[len(rss)-1]; last > 2*first+32<<20 {
			t.Fatalf("broker memory grew: RSS %d MiB in its last life, %d MiB in life %d (backlogs %v)", last>>20, first>>20, base+1, backlogs)
		}
	}
	if led.confirmed == 0 || led.acksDurable.Load() == 0 {
		t.Fatalf("the soak did no work: %d confirmed, %d acks proven durable", led.confirmed, led.acksDurable.Load())
	}
}

// watchLife waits d, returning early once the ledger records a violation.
func watchLife(led *soakLedger, d time.Duration) {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-end.C:
			return
		case <-tick.C:
			led.mu.Lock()
			bad := len(led.violations) > 0
			led.mu.Unlock()
			if bad {
				return
			}
		}
	}
}

// mib formats byte counts as MiB.
func mib(ns []int64) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprintf("%dMiB", n>>20)
	}
	return out
}
