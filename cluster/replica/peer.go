package replica

import (
	"bufio"
	"context"
	"net"
	"sync"
	"time"
)

// peer is this node's side of the one replication connection to another
// node, multiplexed by queue. The node whose name sorts first dials (with
// back-off); the other serves what arrives through ServeConn, so a pair has
// one connection, and each direction keeps its order.
type peer struct {
	m    *manager
	node string

	// connMu orders connection changes with the disconnect notices they
	// cause (serve); held across manager.disconnected, so it comes before
	// manager.mu and replica.mu.
	connMu sync.Mutex
	mu     sync.Mutex
	cur    *pconn // nil while disconnected
	wakes  chan struct{}

	hbMu sync.Mutex         // guards hb; a leaf
	hb   map[string]hbEntry // the queues this node leads with a mirror there
}

// setHeartbeat records what the pair's heartbeat frame says of queue; nil
// takes the queue off the list.
func (p *peer) setHeartbeat(queue string, e *hbEntry) {
	p.hbMu.Lock()
	defer p.hbMu.Unlock()
	if e == nil {
		delete(p.hb, queue)
		return
	}
	if p.hb == nil {
		p.hb = make(map[string]hbEntry)
	}
	p.hb[queue] = *e
}

// appendHeartbeatFrame encodes the pair's heartbeat frame: the table is
// read under hbMu, which no I/O happens under.
func (p *peer) appendHeartbeatFrame(buf []byte) []byte {
	p.hbMu.Lock()
	defer p.hbMu.Unlock()
	return appendHeartbeats(buf, p.hb)
}

// pconn is one connection's life: a writer goroutine owns the write side,
// the reader runs on ServeConn's goroutine or one the dial loop starts.
type pconn struct {
	c    net.Conn
	mu   sync.Mutex
	outq []Msg
	// The send backlog's age (manager.sendBacklog): when outq last became
	// non-empty, and when the writer took the batch it is writing now.
	queuedAt, writingAt time.Time
	kick                chan struct{}
	done                chan struct{}
	once                sync.Once
}

func (pc *pconn) close() {
	pc.once.Do(func() {
		close(pc.done)
		pc.c.Close()
	})
}

func newPeer(m *manager, node string) *peer {
	return &peer{m: m, node: node, wakes: make(chan struct{}, 1)}
}

// send queues msgs for the connection; with none they are dropped, which
// the protocol treats like a connection reset (replicas were told).
func (p *peer) send(msgs ...Msg) {
	p.mu.Lock()
	pc := p.cur
	p.mu.Unlock()
	if pc == nil {
		return
	}
	pc.mu.Lock()
	if len(pc.outq) == 0 {
		pc.queuedAt = time.Now()
	}
	pc.outq = append(pc.outq, msgs...)
	pc.mu.Unlock()
	select {
	case pc.kick <- struct{}{}:
	default:
	}
}

// backlogSince is when the oldest message not yet written to the pair's
// connection was queued; zero when none waits or there is no connection.
func (p *peer) backlogSince() time.Time {
	p.mu.Lock()
	pc := p.cur
	p.mu.Unlock()
	if pc == nil {
		return time.Time{}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.writingAt.IsZero() {
		return pc.writingAt
	}
	return pc.queuedAt
}

// serve runs conn until it fails or the manager stops: it becomes the
// pair's connection (closing an older one), its writer starts, and the
// reader loop runs here.
func (p *peer) serve(conn net.Conn) {
	pc := &pconn{c: conn, kick: make(chan struct{}, 1), done: make(chan struct{})}
	// The replicas hear of a replaced or lost connection before anything of
	// the next one reaches them: a late notice would make a leader forget a
	// mirror that already followed again on the new connection, and wait
	// for a FOLLOW that never comes.
	p.connMu.Lock()
	p.mu.Lock()
	old := p.cur
	p.cur = pc
	p.mu.Unlock()
	if old != nil {
		old.close()
		p.m.disconnected(p.node)
	}
	p.connMu.Unlock()
	p.m.wg.Add(1)
	go p.writeLoop(pc)
	p.readLoop(pc)
	pc.close()
	p.connMu.Lock()
	p.mu.Lock()
	current := p.cur == pc
	if current {
		p.cur = nil
	}
	p.mu.Unlock()
	if current { // else the newer connection's serve told the replicas
		p.m.disconnected(p.node)
	}
	p.connMu.Unlock()
}

// readLoop hands every message to its queue's replica, and each heartbeat
// line that differs from the last one delivered on this connection as a
// MsgHeartbeat (an idle pair wakes no replica). A silent peer (no frame
// for 4 heartbeats) counts as gone.
func (p *peer) readLoop(pc *pconn) {
	r := bufio.NewReaderSize(pc.c, 256<<10)
	var buf []byte
	idle := max(4*p.m.cfg.Heartbeat, 100*time.Millisecond)
	told := map[string]hbEntry{}
	hb := func(q []byte, h hbEntry) {
		if last, ok := told[string(q)]; ok && last == h {
			return
		}
		m := Msg{Type: MsgHeartbeat, Queue: string(q), From: p.node, To: p.m.cfg.Node, Epoch: h.epoch, HW: h.hw, Compact: h.compact}
		if p.m.deliver(m) {
			told[m.Queue] = h
		}
	}
	for {
		pc.c.SetReadDeadline(time.Now().Add(idle))
		m, ok, b, err := readFrame(r, buf, hb)
		buf = b
		if err != nil {
			return
		}
		if ok {
			m.From, m.To = p.node, p.m.cfg.Node
			p.m.deliver(m)
		}
	}
}

// writeLoop (owner: the connection; stop: pc.done; waited by manager.wg)
// writes queued messages in batches, one write per batch, and the pair's
// heartbeat frame every heartbeat (one frame for all queues of the pair:
// no per-queue timers or frames).
func (p *peer) writeLoop(pc *pconn) {
	defer p.m.wg.Done()
	defer pc.close()
	t := time.NewTicker(p.m.cfg.Heartbeat)
	defer t.Stop()
	var buf []byte
	var lastHB time.Time
	for {
		select {
		case <-pc.done:
			return
		case <-p.m.stop:
			return
		case <-pc.kick:
		case <-t.C:
		}
		pc.mu.Lock()
		q := pc.outq
		pc.outq = nil
		if len(q) > 0 {
			pc.writingAt, pc.queuedAt = pc.queuedAt, time.Time{}
		}
		pc.mu.Unlock()
		buf = buf[:0]
		for i := range q {
			buf = appendFrame(buf, &q[i])
		}
		// 9/10: the ticker's period, give or take its jitter.
		if now := time.Now(); now.Sub(lastHB) >= p.m.cfg.Heartbeat*9/10 {
			buf = p.appendHeartbeatFrame(buf)
			lastHB = now
		}
		if len(buf) == 0 {
			continue
		}
		pc.c.SetWriteDeadline(time.Now().Add(p.m.cfg.LagTimeout))
		_, err := pc.c.Write(buf)
		pc.mu.Lock()
		pc.writingAt = time.Time{}
		pc.mu.Unlock()
		if err != nil {
			return
		}
		if cap(buf) > 16<<20 {
			buf = nil // do not keep a catch-up burst's buffer
		}
	}
}

// dialLoop (owner: the manager; stop: manager.stop; waited by manager.wg)
// keeps the pair connected when this node is the dialing side, with
// back-off from 20 ms to 1 s between failed attempts.
func (p *peer) dialLoop() {
	defer p.m.wg.Done()
	backoff := 20 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(p.m.ctx, p.m.cfg.LagTimeout)
		conn, err := p.m.cfg.Dial(ctx, p.node)
		cancel()
		if err == nil {
			backoff = 20 * time.Millisecond
			p.serve(conn)
		}
		select {
		case <-p.m.stop:
			return
		case <-time.After(backoff):
		}
		if err != nil {
			backoff = min(2*backoff, time.Second)
		}
	}
}
