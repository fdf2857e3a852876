package mgmt

import (
	"bufio"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/server"
)

// stalledRequest opens a connection and sends a PUT whose headers announce a
// 100-byte body that never follows; with auth it carries guest's credentials.
func stalledRequest(t *testing.T, addr string, auth bool) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	req := "PUT /api/vhosts/stalled HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
	if auth {
		req += "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("guest:guest")) + "\r\n"
	}
	if _, err := io.WriteString(nc, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestUnauthenticatedBodyNeverSentGets401AtOnce: requests without
// credentials that announce a body and never send it get their 401 at once,
// as from RabbitMQ 3.10, instead of after the read timeout (2 min by default).
func TestUnauthenticatedBodyNeverSentGets401AtOnce(t *testing.T) {
	e := newEnv(t)
	addr := e.api.Addr().String()
	var conns []net.Conn
	for range 20 {
		conns = append(conns, stalledRequest(t, addr, false))
	}
	for i, nc := range conns {
		if err := nc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatalf("request %d: no response: %v", i, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d: status %d, want 401", i, res.StatusCode)
		}
	}
	e.must(e.get("/api/overview"), http.StatusOK, "overview after the stalled requests")
}

// TestStalledBodiesTimedOutAndCapped: with a read timeout of 300 ms and at
// most 4 connections, 12 authenticated requests whose body never comes are
// cut off by the broker, at most 4 of them are accepted at a time (the rest
// wait in the listen queue), and a normal request succeeds afterwards.
func TestStalledBodiesTimedOutAndCapped(t *testing.T) {
	const limit, stalled = 4, 12
	e := newEnv(t, func(_ *server.Config, c *Config) {
		c.ReadTimeout, c.MaxConnections = 300*time.Millisecond, limit
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mostUsed int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			mostUsed = max(mostUsed, e.srv.Descriptors().SocketsUsed)
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var conns []net.Conn
	for range stalled {
		conns = append(conns, stalledRequest(t, e.api.Addr().String(), true))
	}
	for i, nc := range conns {
		if err := nc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, nc); err != nil && !isConnReset(err) {
			t.Fatalf("stalled request %d: not closed by the broker: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	if mostUsed > limit || mostUsed == 0 {
		t.Fatalf("%d HTTP sockets counted at once, want 1..%d", mostUsed, limit)
	}
	e.must(e.get("/api/overview"), http.StatusOK, "overview after the stalled requests")
}

func isConnReset(err error) bool {
	return errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset")
}

// TestNodeDescriptorBudget: /api/nodes reports the descriptor limit and the
// socket share the broker enforces, and counts open sockets, AMQP and HTTP.
func TestNodeDescriptorBudget(t *testing.T) {
	e := newEnv(t)
	want := e.srv.Descriptors()
	if want.Limit == 0 || want.SocketsLimit == 0 {
		t.Fatalf("no descriptor budget on this machine: %+v", want)
	}
	e.dial("")
	n := e.must(e.get("/api/nodes/"+testNode), http.StatusOK, "node").object(t)
	if got := num(t, n["fd_total"]); got != float64(want.Limit) {
		t.Errorf("fd_total %v, want %d", got, want.Limit)
	}
	if got := num(t, n["sockets_total"]); got != float64(want.SocketsLimit) {
		t.Errorf("sockets_total %v, want %d", got, want.SocketsLimit)
	}
	// The AMQP connection and this request's own socket at least.
	if got := num(t, n["sockets_used"]); got < 2 {
		t.Errorf("sockets_used %v, want at least 2", got)
	}
}
