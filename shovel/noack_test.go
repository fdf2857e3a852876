package shovel_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// pausingProxy forwards TCP connections to target; while paused it stops
// reading what clients send, so their writes back up as a slow broker's do.
type pausingProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	resumed chan struct{} // closed while not paused
	wg      sync.WaitGroup
	conns   []net.Conn
}

func startPausingProxy(t *testing.T, target string) *pausingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausingProxy{ln: ln, target: target, resumed: make(chan struct{})}
	close(p.resumed)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *pausingProxy) addr() string { return p.ln.Addr().String() }

func (p *pausingProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.copy(u, c, true) }()
		go func() { defer p.wg.Done(); p.copy(c, u, false) }()
	}
}

// copy moves bytes from src to dst; the client-to-broker direction waits
// while the proxy is paused.
func (p *pausingProxy) copy(dst, src net.Conn, pausable bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		if pausable {
			p.mu.Lock()
			resumed := p.resumed
			p.mu.Unlock()
			<-resumed
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *pausingProxy) pause() {
	p.mu.Lock()
	p.resumed = make(chan struct{})
	p.mu.Unlock()
}

func (p *pausingProxy) resume() {
	p.mu.Lock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
	p.mu.Unlock()
}

func (p *pausingProxy) close() {
	p.resume()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// A no-ack shovel whose destination stops reading takes no more than its
// prefetch (plus what the sockets buffer) from the source: the rest stays
// in the source queue, not in the shovel's memory. With a no-ack consumer
// the source pushes the whole queue into the client's unbounded buffer.
// Once the destination reads again, every message arrives exactly once.
func TestShovelNoAckIsBoundedBySlowDestination(t *testing.T) {
	src, dest := startBroker(t), startBroker(t)
	proxy := startPausingProxy(t, fmt.Sprintf("127.0.0.1:%d", dest.port))
	const n, size = 20000, 4 << 10 // 80 MiB, well above what the sockets buffer
	publishSized(t, src.url, "na-src", n, size)
	src.putShovel("na", map[string]any{"src-uri": "amqp://", "src-queue": "na-src",
		"dest-uri": "amqp://guest:guest@" + proxy.addr() + "/", "dest-queue": "na-dest",
		"ack-mode": "no-ack", "src-prefetch-count": 200})
	src.waitState(t, "na", "running")
	waitFor(t, 30*time.Second, "the first messages moved", func() bool { return queueLength(t, dest.url, "na-dest") > 0 })
	proxy.pause()
	// Let the source push whatever it will push while the destination is stuck.
	var left int
	stable := 0
	waitFor(t, 30*time.Second, "the source queue length to settle", func() bool {
		l := queueLength(t, src.url, "na-src")
		if l == left {
			stable++
		} else {
			left, stable = l, 0
		}
		return stable >= 10
	})
	if left < n/2 {
		t.Errorf("with the destination stuck the shovel took %d of %d messages out of the source (%d MiB held)",
			n-left, n, (n-left)*size>>20)
	}
	proxy.resume()
	waitFor(t, 60*time.Second, "every message moved", func() bool {
		return queueLength(t, src.url, "na-src") == 0 && queueLength(t, dest.url, "na-dest") >= n
	})
	if got := queueLength(t, dest.url, "na-dest"); got != n {
		t.Errorf("destination has %d messages, want %d (no-ack moves each once)", got, n)
	}
}

// publishSized publishes n persistent messages of size bytes to queue
// (declared durable), with confirms.
func publishSized(t *testing.T, url, queue string, n, size int) {
	t.Helper()
	ch := channel(t, url)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, size)
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", queue, false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 || i == n-1 {
			if !dc.Wait() {
				t.Fatalf("publish %d nacked", i)
			}
		}
	}
}
