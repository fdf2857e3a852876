package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcluster runs one Manager per node in this process over loopback TCP,
// with a fault-injecting dialer that can cut a node pair, a controller
// that applies in-sync changes by CAS, and per-node leases.
type tcluster struct {
	t     testing.TB
	names []string
	lns   map[string]net.Listener
	wg    sync.WaitGroup

	mu     sync.Mutex
	mgrs   map[string]Manager
	cuts   map[[2]string]bool
	conns  map[[2]string][]net.Conn
	leases map[string]*atomic.Bool
	ctl    *tcontroller
	tune   func(*Config) // applied to each manager's Config, when set
	frames *frameCounter // counts the frames written on every connection, when set
}

func pairKey(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

func newTCluster(t testing.TB, n int) *tcluster { return newTClusterWith(t, n, nil, nil) }

func newTClusterWith(t testing.TB, n int, tune func(*Config), frames *frameCounter) *tcluster {
	c := &tcluster{t: t, lns: map[string]net.Listener{}, mgrs: map[string]Manager{}, cuts: map[[2]string]bool{},
		conns: map[[2]string][]net.Conn{}, leases: map[string]*atomic.Bool{}, tune: tune, frames: frames}
	c.ctl = &tcontroller{c: c, placements: map[string]Placement{}, replicas: map[string]map[string]Replica{}}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		c.names = append(c.names, name)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.lns[name] = ln
		c.leases[name] = &atomic.Bool{}
		c.leases[name].Store(true)
		c.wg.Add(1)
		go c.accept(name, ln)
		c.start(name)
	}
	t.Cleanup(c.close)
	return c
}

// start (re)creates node name's manager.
func (c *tcluster) start(name string) Manager {
	cfg := DefaultConfig()
	cfg.Node = name
	cfg.Heartbeat = 20 * time.Millisecond
	cfg.LagTimeout = 400 * time.Millisecond
	cfg.RejoinAfter = 100 * time.Millisecond
	cfg.Lease = c.leases[name].Load
	cfg.Controller = c.ctl
	cfg.Dial = func(ctx context.Context, node string) (net.Conn, error) { return c.dial(ctx, name, node) }
	if c.tune != nil {
		c.tune(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.mgrs[name] = m
	c.mu.Unlock()
	return m
}

func (c *tcluster) mgr(name string) Manager {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mgrs[name]
}

// accept serves node name's listener: a hello names the dialing node.
func (c *tcluster) accept(name string, ln net.Listener) {
	defer c.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		var hdr [1]byte
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			conn.Close()
			continue
		}
		from := make([]byte, hdr[0])
		if _, err := io.ReadFull(conn, from); err != nil {
			conn.Close()
			continue
		}
		k := pairKey(name, string(from))
		c.mu.Lock()
		m, cut := c.mgrs[name], c.cuts[k]
		if !cut {
			c.conns[k] = append(c.conns[k], conn)
		}
		c.mu.Unlock()
		if cut || m == nil {
			conn.Close()
			continue
		}
		if c.frames != nil {
			conn = &countConn{Conn: conn, fc: c.frames}
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			m.ServeConn(conn, string(from))
		}()
	}
}

func (c *tcluster) dial(ctx context.Context, from, to string) (net.Conn, error) {
	k := pairKey(from, to)
	c.mu.Lock()
	cut := c.cuts[k]
	c.mu.Unlock()
	if cut {
		return nil, errors.New("test: pair cut")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.lns[to].Addr().String())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(append([]byte{byte(len(from))}, from...)); err != nil {
		conn.Close()
		return nil, err
	}
	c.mu.Lock()
	c.conns[k] = append(c.conns[k], conn)
	c.mu.Unlock()
	if c.frames != nil {
		return &countConn{Conn: conn, fc: c.frames}, nil
	}
	return conn, nil
}

// frameCounter counts the frames the managers write, by frame type.
type frameCounter struct {
	mu     sync.Mutex
	byType map[byte]int
	writes int
}

func (fc *frameCounter) reset() (byType map[byte]int, writes int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	byType, writes = fc.byType, fc.writes
	fc.byType, fc.writes = map[byte]int{}, 0
	return byType, writes
}

// countConn counts the frames of each Write: the writer writes whole
// frames, so every Write starts at a frame boundary.
type countConn struct {
	net.Conn
	fc *frameCounter
}

func (cc *countConn) Write(b []byte) (int, error) {
	cc.fc.mu.Lock()
	if cc.fc.byType == nil {
		cc.fc.byType = map[byte]int{}
	}
	cc.fc.writes++
	for p := b; len(p) >= 5; {
		n := int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3])
		cc.fc.byType[p[4]]++
		if 4+n > len(p) {
			break
		}
		p = p[4+n:]
	}
	cc.fc.mu.Unlock()
	return cc.Conn.Write(b)
}

// cut closes the pair's connections and refuses new ones until heal.
func (c *tcluster) cut(a, b string) {
	k := pairKey(a, b)
	c.mu.Lock()
	c.cuts[k] = true
	conns := c.conns[k]
	c.conns[k] = nil
	c.mu.Unlock()
	for _, conn := range conns {
		conn.Close()
	}
}

func (c *tcluster) heal(a, b string) {
	c.mu.Lock()
	delete(c.cuts, pairKey(a, b))
	c.mu.Unlock()
}

func (c *tcluster) close() {
	for _, name := range c.names {
		if m := c.mgr(name); m != nil {
			m.Shutdown()
		}
	}
	for _, ln := range c.lns {
		ln.Close()
	}
	c.mu.Lock()
	for _, cs := range c.conns {
		for _, conn := range cs {
			conn.Close()
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// tcontroller is the metadata group as the replicas see it: placements
// per queue, changed by CAS (AlterISR) or election, then given to every
// open replica of the queue.
type tcontroller struct {
	c          *tcluster
	mu         sync.Mutex
	placements map[string]Placement
	replicas   map[string]map[string]Replica // queue → node → replica
	alters     atomic.Int64
}

func (tc *tcontroller) AlterISR(ctx context.Context, queue string, epoch, version uint64, isr []string) error {
	return tc.AlterISRStorage(ctx, queue, epoch, version, isr, nil)
}

// AlterISRStorage makes tcontroller a StorageController: placements record
// the members' StorageIDs.
func (tc *tcontroller) AlterISRStorage(ctx context.Context, queue string, epoch, version uint64, isr []string, ids map[string]string) error {
	tc.mu.Lock()
	cur := tc.placements[queue]
	if err := CheckAlterISR(cur, epoch, version, isr); err != nil {
		tc.mu.Unlock()
		return err
	}
	tc.placements[queue] = ApplyAlterISR(cur, isr, ids)
	tc.mu.Unlock()
	tc.alters.Add(1)
	tc.publish(queue)
	return nil
}

func (tc *tcontroller) publish(queue string) {
	tc.mu.Lock()
	p := tc.placements[queue]
	rs := make([]Replica, 0, len(tc.replicas[queue]))
	for _, r := range tc.replicas[queue] {
		rs = append(rs, r)
	}
	tc.mu.Unlock()
	for _, r := range rs {
		r.SetPlacement(p)
	}
}

func (tc *tcontroller) placement(queue string) Placement {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.placements[queue]
}

// open opens node's replica of queue under the controller's placement.
func (tc *tcontroller) open(node, queue string, log Log, h Handler) Replica {
	tc.c.t.Helper()
	r, err := tc.c.mgr(node).Open(queue, tc.placement(queue), log, h)
	if err != nil {
		tc.c.t.Fatal(err)
	}
	tc.mu.Lock()
	if tc.replicas[queue] == nil {
		tc.replicas[queue] = map[string]Replica{}
	}
	tc.replicas[queue][node] = r
	tc.mu.Unlock()
	return r
}

func (tc *tcontroller) forget(node, queue string) {
	tc.mu.Lock()
	delete(tc.replicas[queue], node)
	tc.mu.Unlock()
}

// elect runs ElectLeader with live nodes and the logs' durable offsets.
func (tc *tcontroller) elect(queue string, live func(string) bool, logs map[string]Log) Placement {
	tc.c.t.Helper()
	durable := map[string]uint64{}
	for n, l := range logs {
		durable[n] = l.DurableOffset()
	}
	tc.mu.Lock()
	np, ok := ElectLeader(tc.placements[queue], live, durable)
	if ok {
		tc.placements[queue] = np
	}
	tc.mu.Unlock()
	if !ok {
		tc.c.t.Fatalf("no leader electable for %s", queue)
	}
	tc.publish(queue)
	return np
}

// sameLog reports the first offset ≤ upTo where a and b differ, or 0.
func sameLog(t testing.TB, a, b Log, upTo uint64) uint64 {
	t.Helper()
	var ra []Record
	for from := uint64(1); from <= upTo; {
		n := 0
		if err := a.Read(from, 4<<20, func(r Record) bool { ra = append(ra, r); from = r.Offset + 1; n++; return r.Offset < upTo }); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return from
		}
	}
	i := 0
	for from := uint64(1); from <= upTo; {
		n := 0
		var bad uint64
		if err := b.Read(from, 4<<20, func(r Record) bool {
			x := ra[i]
			if x.Offset != r.Offset || x.Epoch != r.Epoch || x.Kind != r.Kind || !bytes.Equal(x.Data, r.Data) {
				bad = r.Offset
				return false
			}
			i++
			from, n = r.Offset+1, n+1
			return r.Offset < upTo
		}); err != nil {
			t.Fatal(err)
		}
		if bad != 0 {
			return bad
		}
		if n == 0 {
			return from
		}
	}
	return 0
}
