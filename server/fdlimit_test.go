package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// setNofileFromEnv sets the crash broker's RLIMIT_NOFILE to the number in
// the environment variable key, when it is set.
func setNofileFromEnv(key string) {
	v := os.Getenv(key)
	if v == "" {
		return
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err == nil {
		err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash broker: descriptor limit:", err)
		os.Exit(3)
	}
}

func TestSocketShare(t *testing.T) {
	// RabbitMQ 3.10's sockets_limit for these descriptor limits.
	for fds, want := range map[uint64]int64{20000: 17910, 1024: 832, 256: 141, 0: 0} {
		if got := socketShare(fds); got != want {
			t.Errorf("socketShare(%d) = %d, want %d", fds, got, want)
		}
	}
}

// socketProbe is what became of sockets that sent the AMQP header.
type socketProbe struct {
	served, refused, unanswered int
	conns                       []net.Conn
}

func (p *socketProbe) closeAll() {
	for _, nc := range p.conns {
		nc.Close()
	}
	p.conns = nil
}

// probeSockets opens n sockets to addr, sends the AMQP header on each and
// sorts them by what the broker did within wait: served (connection.start
// arrived), refused (closed by the broker) or unanswered (still in the
// listen queue: the broker did not accept them).
func probeSockets(t *testing.T, addr string, n int, wait time.Duration) *socketProbe {
	t.Helper()
	p := &socketProbe{}
	t.Cleanup(p.closeAll)
	for range n {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(p.conns)+1, err)
		}
		p.conns = append(p.conns, nc)
		_, _ = nc.Write(amqp.ProtocolHeader) // a refused socket may be reset already
	}
	deadline := time.Now().Add(wait)
	for _, nc := range p.conns {
		must(t, nc.SetReadDeadline(deadline))
		var hdr [7]byte
		_, err := io.ReadFull(nc, hdr[:])
		var ne net.Error
		switch {
		case err == nil && hdr[0] == amqp.TypeMethod:
			p.served++
		case errors.Is(err, io.EOF) || isReset(err):
			p.refused++
		case errors.As(err, &ne) && ne.Timeout():
			p.unanswered++
		default:
			t.Fatalf("probe read: %v (% x)", err, hdr)
		}
	}
	return p
}

// dialWorks reports whether a real client connects within a short timeout
// and opens a channel.
func dialWorks(url string) bool {
	c, err := amqp091.DialConfig(url, amqp091.Config{Dial: amqp091.DefaultDial(2 * time.Second)})
	if err != nil {
		return false
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return false
	}
	return ch.Close() == nil
}

// TestSocketShareRefusesBeforeDescriptorsRunOut runs a broker process with
// 256 descriptors and opens 400 sockets to it. The broker serves at most its
// socket share (141) and closes every other socket right after accept, so
// none is left unaccepted for want of a descriptor; once they close, a real
// client connects.
func TestSocketShareRefusesBeforeDescriptorsRunOut(t *testing.T) {
	const fds, sockets = 256, 400
	dir, addr, url := crashEnv(t, "descriptor budget test")
	startCrashBroker(t, dir, addr, fmt.Sprintf("WARREN_CRASH_BROKER_NOFILE=%d", fds))
	p := probeSockets(t, addr, sockets, 5*time.Second)
	t.Logf("%d sockets: %d served, %d refused, %d unanswered", sockets, p.served, p.refused, p.unanswered)
	if p.unanswered > 0 {
		t.Fatalf("%d sockets neither served nor refused: the broker ran out of descriptors", p.unanswered)
	}
	if share := int(socketShare(fds)); p.served > share || p.served == 0 {
		t.Fatalf("%d sockets served, want 1..%d (the socket share)", p.served, share)
	}
	p.closeAll()
	waitFor(t, 10*time.Second, "an AMQP connection after the flood", func() bool { return dialWorks(url) })
}

// TestAcceptLoopSurvivesEMFILE makes a broker process run out of descriptors
// for real: its limit is lowered to 128 after start, below what its socket
// share (computed at start) allows. The sockets past the limit wait in the
// listen queue while accept fails with EMFILE; once the test closes them, the
// listener (which backs off and retries) serves a real client again.
func TestAcceptLoopSurvivesEMFILE(t *testing.T) {
	const sockets = 200
	dir, addr, url := crashEnv(t, "EMFILE test")
	startCrashBroker(t, dir, addr, "WARREN_CRASH_BROKER_NOFILE_AFTER_START=128")
	p := probeSockets(t, addr, sockets, 3*time.Second)
	t.Logf("%d sockets: %d served, %d refused, %d unanswered", sockets, p.served, p.refused, p.unanswered)
	if p.unanswered == 0 {
		t.Fatalf("every socket was answered: the broker never ran out of descriptors, the test proves nothing")
	}
	p.closeAll()
	waitFor(t, 15*time.Second, "an AMQP connection after EMFILE", func() bool { return dialWorks(url) })
}
