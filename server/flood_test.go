package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// floodPhase is when a round trip of TestConnectionFlood was measured.
type floodPhase int32

const (
	floodBefore floodPhase = iota
	floodDuring
	floodAfter
	floodPhases
)

func (p floodPhase) String() string {
	return [...]string{"before", "during", "after"}[p]
}

// floodWorker is one working connection of TestConnectionFlood: it
// publishes to its own queue and waits for the delivery, over and over,
// recording each round trip under the current phase.
type floodWorker struct {
	conn  *amqp091.Connection
	ch    *amqp091.Channel
	queue string
	ds    <-chan amqp091.Delivery

	mu      sync.Mutex
	samples [floodPhases][]time.Duration
	err     error
}

func newFloodWorker(t *testing.T, ts *testServer, i int) *floodWorker {
	t.Helper()
	conn, ch := ts.channel(t)
	q, err := ch.QueueDeclare(fmt.Sprintf("flood-w%d", i), false, false, true, false, nil)
	must(t, err)
	ds, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	must(t, err)
	return &floodWorker{conn: conn, ch: ch, queue: q.Name, ds: ds}
}

// run does round trips until stop closes or one fails.
func (w *floodWorker) run(phase *atomic.Int32, stop <-chan struct{}) {
	body := []byte("ping")
	for {
		select {
		case <-stop:
			return
		default:
		}
		p := floodPhase(phase.Load())
		start := time.Now()
		err := w.ch.Publish("", w.queue, false, false, amqp091.Publishing{Body: body})
		if err == nil {
			select {
			case _, ok := <-w.ds:
				if !ok {
					err = errors.New("delivery channel closed")
				}
			case <-time.After(5 * time.Second):
				err = errors.New("no delivery within 5 s")
			}
		}
		w.mu.Lock()
		if err != nil {
			w.err = fmt.Errorf("round trip in phase %s: %w", p, err)
			w.mu.Unlock()
			return
		}
		w.samples[p] = append(w.samples[p], time.Since(start))
		w.mu.Unlock()
	}
}

// count returns the round trips done in phase p and the worker's error.
func (w *floodWorker) count(p floodPhase) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.samples[p]), w.err
}

// floodDial makes one flood connection of kind i%3 (AMQP header, garbage,
// silence) and reports whether the broker closed it without sending a byte,
// as it does with sockets over MaxConnections.
func floodDial(addr string, i int) (refused bool, err error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	defer nc.Close()
	switch i % 3 {
	case 0:
		_, err = nc.Write(amqp.ProtocolHeader)
	case 1:
		_, err = nc.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	}
	if err != nil {
		return true, nil // reset by the broker before the write
	}
	if err := nc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return false, err
	}
	var buf [64]byte
	n, err := nc.Read(buf[:])
	switch {
	case n > 0:
		return false, nil // served: the broker answered
	case errors.Is(err, io.EOF) || isReset(err):
		return true, nil
	default:
		return false, nil // held open: admitted
	}
}

// holdSlot opens a socket that the broker admits and that then stalls in
// the handshake: kind 0 sends the AMQP header and reads connection.start,
// kind 1 sends nothing, kind 2 sends half a header.
func holdSlot(t *testing.T, addr string, kind int) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	must(t, err)
	t.Cleanup(func() { nc.Close() })
	switch kind {
	case 0:
		_, err = nc.Write(amqp.ProtocolHeader)
		must(t, err)
		must(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
		var buf [7]byte
		if _, err := io.ReadFull(nc, buf[:]); err != nil {
			t.Fatalf("no connection.start on an admitted socket: %v", err)
		}
	case 2:
		_, err = nc.Write(amqp.ProtocolHeader[:4])
		must(t, err)
	}
	return nc
}

// TestConnectionFlood floods a broker with MaxConnections 50 while four
// working connections do publish/consume round trips. The flood first takes
// every free slot with sockets stalled in the handshake, then dials 2,000
// more, a third sending the AMQP header, a third garbage, a third nothing:
// each must be closed by the broker without a byte. The working
// connections must keep working during and after the flood, the socket
// count must fall back to the working set once the flood closes, and a new
// connection must work. Round-trip latencies are logged, not asserted.
func TestConnectionFlood(t *testing.T) {
	const (
		limit   = 50
		working = 4
		dials   = 2000
		dialers = 4
	)
	ts := startServer(t, func(c *Config) {
		c.MaxConnections = limit
		c.HandshakeTimeout = time.Minute // the stalled sockets must hold their slots
	})
	var phase atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	workers := make([]*floodWorker, working)
	for i := range workers {
		workers[i] = newFloodWorker(t, ts, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers[i].run(&phase, stop)
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	waitRoundTrips(t, workers, floodBefore, 50)

	// Take every free slot.
	phase.Store(int32(floodDuring))
	refusedBefore := ts.RefusedConnections()
	var held []net.Conn
	for i := range limit - working {
		held = append(held, holdSlot(t, ts.addr, i%3))
	}
	waitFor(t, 5*time.Second, "every connection slot taken", func() bool { return ts.sockets.Load() == limit })

	// Flood: the dialers go on past their share until every worker has done
	// round trips during the flood, so the check below means something.
	var next, dialed, refused atomic.Int64
	floodErr := make(chan error, dialers)
	var fwg sync.WaitGroup
	floodStart := time.Now()
	for range dialers {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			for {
				i := next.Add(1) - 1
				if i >= dials && roundTripsAtLeast(workers, floodDuring, 20) || time.Since(floodStart) > 20*time.Second {
					return
				}
				r, err := floodDial(ts.addr, int(i))
				dialed.Add(1)
				if err != nil {
					floodErr <- err
					return
				}
				if r {
					refused.Add(1)
				}
			}
		}()
	}
	fwg.Wait()
	floodTook := time.Since(floodStart)
	close(floodErr)
	for err := range floodErr {
		t.Fatalf("flood dial: %v", err)
	}
	made := dialed.Load()
	if refused.Load() != made {
		t.Fatalf("%d of %d flood connections over the limit were served instead of refused", made-refused.Load(), made)
	}
	if got := ts.RefusedConnections() - refusedBefore; got != uint64(made) {
		t.Fatalf("broker counted %d refused connections, the flood made %d", got, made)
	}
	for i, w := range workers {
		if n, err := w.count(floodDuring); err != nil || n == 0 {
			t.Fatalf("worker %d: %d round trips during the flood, err %v", i, n, err)
		}
	}

	// The flood clears: the held sockets close and free their slots.
	phase.Store(int32(floodAfter))
	for _, nc := range held {
		nc.Close()
	}
	waitFor(t, 5*time.Second, "the socket count back to the working set", func() bool {
		return ts.sockets.Load() == working && len(ts.Connections()) == working
	})
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "after-flood", nil)
	publish(t, ch, "", "after-flood", "x")
	if _, ok, err := ch.Get("after-flood", true); err != nil || !ok {
		t.Fatalf("a new connection does not work after the flood: ok=%v err=%v", ok, err)
	}
	waitRoundTrips(t, workers, floodAfter, 50)

	t.Logf("flood: %d dials in %s, all refused (limit %d, %d working, %d held)", made, floodTook.Round(time.Millisecond), limit, working, len(held))
	for p := range floodPhases {
		var all []time.Duration
		for _, w := range workers {
			w.mu.Lock()
			all = append(all, w.samples[p]...)
			w.mu.Unlock()
		}
		slices.Sort(all)
		t.Logf("round trip %-6s n=%-6d p50=%-10s p99=%s", p, len(all), percentile(all, 0.50), percentile(all, 0.99))
	}
}

// percentile returns the q quantile of sorted samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// roundTripsAtLeast reports whether every worker did n round trips in phase p.
func roundTripsAtLeast(workers []*floodWorker, p floodPhase, n int) bool {
	for _, w := range workers {
		if c, _ := w.count(p); c < n {
			return false
		}
	}
	return true
}

// waitRoundTrips waits until every worker did n round trips in phase p,
// failing on a worker's error.
func waitRoundTrips(t *testing.T, workers []*floodWorker, p floodPhase, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%d round trips per worker %s the flood", n, p), func() bool {
		for i, w := range workers {
			if _, err := w.count(p); err != nil {
				t.Fatalf("worker %d: %v", i, err)
			}
		}
		return roundTripsAtLeast(workers, p, n)
	})
}
