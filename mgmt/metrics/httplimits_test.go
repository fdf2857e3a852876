package metrics

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/server"
)

// TestExporterIdleConnectionsTimedOutAndCapped: with a 200 ms header timeout
// and at most 2 connections, 6 sockets that send nothing are closed by the
// exporter, never more than 2 accepted at once (each counted in the
// broker's socket share), and a scrape then succeeds.
func TestExporterIdleConnectionsTimedOutAndCapped(t *testing.T) {
	const limit, idle = 2, 6
	e := startEnv(t, func(_ *server.Config, c *Config) {
		c.ReadHeaderTimeout, c.MaxConnections = 200*time.Millisecond, limit
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
	for range idle {
		nc, err := net.Dial("tcp", e.exp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns = append(conns, nc)
	}
	for i, nc := range conns {
		if err := nc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, nc); err != nil {
			t.Fatalf("idle socket %d not closed by the exporter: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	if mostUsed > limit || mostUsed == 0 {
		t.Fatalf("%d sockets counted at once, want 1..%d", mostUsed, limit)
	}
	res, err := e.client.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("scrape after the idle sockets: status %d, %v", res.StatusCode, err)
	}
}
