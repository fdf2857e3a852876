package replica

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// 1,000 queues on 3 nodes, leaders spread over them: after one append each
// the final HW reaches every mirror through the node pairs' heartbeat
// frames (no per-queue HEARTBEAT exists), and while idle each connection
// carries one heartbeat frame per Heartbeat and nothing else; no goroutine
// exists per queue beyond the replica's own.
func TestReplicaClusterPairHeartbeats(t *testing.T) {
	if testing.Short() {
		t.Skip("3,000 replicas")
	}
	const queues, hb = 1000, 250 * time.Millisecond
	fc := &frameCounter{}
	c := newTClusterWith(t, 3, func(cfg *Config) {
		cfg.Heartbeat, cfg.LagTimeout, cfg.RejoinAfter = hb, 5*time.Second, 500*time.Millisecond
	}, fc)
	before := runtime.NumGoroutine()
	hs := map[string]*recHandler{}
	for i := range queues {
		q := fmt.Sprintf("q-%d", i)
		c.ctl.mu.Lock() // replicas opened before propose to the controller meanwhile
		c.ctl.placements[q] = Placement{Replicas: c.names, Leader: c.names[i%3], Epoch: 1,
			ISR: c.names, MinISR: 2, Version: 1}
		c.ctl.mu.Unlock()
		for _, n := range c.names {
			hs[n+"/"+q] = &recHandler{}
			c.ctl.open(n, q, NewMemLog(), hs[n+"/"+q])
		}
	}
	for i := range queues {
		q := fmt.Sprintf("q-%d", i)
		c.ctl.mu.Lock()
		r := c.ctl.replicas[q][c.names[i%3]]
		c.ctl.mu.Unlock()
		if _, err := r.Append([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// Offset 1 is the epoch start, 2 the record.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var behind []string
		for k, h := range hs {
			if h.hw() < 2 {
				behind = append(behind, fmt.Sprintf("%s:%d", k, h.hw()))
			}
		}
		if len(behind) == 0 {
			break
		}
		if time.Now().After(deadline) {
			k := behind[0][:strings.Index(behind[0], ":")]
			node, q, _ := strings.Cut(k, "/")
			c.ctl.mu.Lock()
			st := c.ctl.replicas[q][node].Status()
			lst := c.ctl.replicas[q][c.ctl.placements[q].Leader].Status()
			c.ctl.mu.Unlock()
			t.Logf("leader: %+v", lst)
			t.Fatalf("%d replicas have not committed 2: %v; %s: %+v, placement %+v", len(behind), behind[:min(10, len(behind))], k, st, c.ctl.placement(q))
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * hb)
	fc.reset()
	const window = 3 * time.Second
	time.Sleep(window) // an idle observation window
	byType, writes := fc.reset()
	perConn := int(window / hb)
	const conns = 6 // 3 pairs, both directions
	t.Logf("idle %v: %d writes, frames by type %v, goroutines %d (before opening %d)", window, writes, byType, runtime.NumGoroutine(), before)
	for typ, n := range byType {
		if typ != frameHeartbeats && n > 0 {
			t.Errorf("idle cluster wrote %d frames of type %d", n, typ)
		}
	}
	if n := byType[frameHeartbeats]; n < conns*perConn/4 || n > conns*perConn*3/2 {
		t.Errorf("%d heartbeat frames in %v, want about %d (one per connection per heartbeat)", n, window, conns*perConn)
	}
	if g := runtime.NumGoroutine() - before; g > 3*queues+50 {
		t.Errorf("%d goroutines for %d replicas: more than one per replica", g, 3*queues)
	}
}
