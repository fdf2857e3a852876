package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// DefaultConfig returns the documented defaults (design §6.6) for node.
// Dial, Lease and Controller are left for the caller.
func DefaultConfig() Config {
	return Config{
		LagTimeout:    5 * time.Second,
		Heartbeat:     250 * time.Millisecond,
		RejoinAfter:   time.Second,
		WindowRecords: 1024,
		WindowBytes:   8 << 20,
	}
}

// Validate reports the first setting NewManager cannot work with. Dial,
// Lease and Controller may be nil on a node that only opens single-replica
// placements (a standalone broker): a nil Lease counts as always valid
// there, since no metadata quorum exists to lose contact with.
func (c Config) Validate() error {
	switch {
	case c.Node == "":
		return errors.New("replica: Config.Node is empty")
	case c.LagTimeout <= 0, c.Heartbeat <= 0, c.RejoinAfter <= 0:
		return fmt.Errorf("replica: LagTimeout %v, Heartbeat %v and RejoinAfter %v must be positive",
			c.LagTimeout, c.Heartbeat, c.RejoinAfter)
	case c.Heartbeat >= c.LagTimeout:
		return fmt.Errorf("replica: Heartbeat %v must be below LagTimeout %v", c.Heartbeat, c.LagTimeout)
	case c.WindowRecords <= 0, c.WindowBytes <= 0:
		return fmt.Errorf("replica: WindowRecords %d and WindowBytes %d must be positive", c.WindowRecords, c.WindowBytes)
	}
	return nil
}

// ErrNeedsNetwork is returned by Open for a placement with more than one
// replica on a manager without Dial, Lease or Controller.
var ErrNeedsNetwork = errors.New("replica: placement has other replicas but the manager has no Dial, Lease or Controller")

// manager implements Manager.
type manager struct {
	cfg    Config
	ctx    context.Context // cancelled by Shutdown: dials and controller calls
	cancel context.CancelFunc
	stop   chan struct{}

	mu       sync.Mutex
	replicas map[string]*replica
	peers    map[string]*peer
	closed   bool
	wg       sync.WaitGroup // replica goroutines, connection readers and writers, dial loops, controller calls
}

// NewManager returns a Manager for cfg.
func NewManager(cfg Config) (Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &manager{cfg: cfg, ctx: ctx, cancel: cancel, stop: make(chan struct{}),
		replicas: make(map[string]*replica), peers: make(map[string]*peer)}
	m.wg.Add(1)
	go m.watch()
	return m, nil
}

// peerLocked returns the peer for node, starting its dial loop when this
// node dials the pair. Caller holds m.mu.
func (m *manager) peerLocked(node string) *peer {
	p := m.peers[node]
	if p == nil {
		p = newPeer(m, node)
		m.peers[node] = p
		if m.cfg.Node < node && m.cfg.Dial != nil {
			m.wg.Add(1)
			go p.dialLoop()
		}
	}
	return p
}

// send routes msgs to their nodes' connections.
func (m *manager) send(msgs []Msg) {
	for len(msgs) > 0 {
		to := msgs[0].To
		n := 1
		for n < len(msgs) && msgs[n].To == to {
			n++
		}
		m.mu.Lock()
		var p *peer
		if !m.closed {
			p = m.peerLocked(to)
		}
		m.mu.Unlock()
		if p != nil {
			p.send(msgs[:n]...)
		}
		msgs = msgs[n:]
	}
}

// deliver hands an inbound message to its queue's replica and reports
// whether one is open here; a message for another queue is dropped (the
// sender retries or times out).
func (m *manager) deliver(msg Msg) bool {
	m.mu.Lock()
	r := m.replicas[msg.Queue]
	m.mu.Unlock()
	if r != nil {
		r.post(event{msg: &msg})
	}
	return r != nil
}

// setHeartbeat puts queue's line in the heartbeat frames to nodes and takes
// it out of those to drop (nil e: out of all of them).
func (m *manager) setHeartbeat(queue string, e *hbEntry, nodes, drop []string) {
	set := func(n string, e *hbEntry) {
		if n == m.cfg.Node {
			return
		}
		m.mu.Lock()
		p := m.peers[n]
		if p == nil && e != nil && !m.closed {
			p = m.peerLocked(n)
		}
		m.mu.Unlock()
		if p != nil {
			p.setHeartbeat(queue, e)
		}
	}
	for _, n := range drop {
		set(n, nil)
	}
	for _, n := range nodes {
		set(n, e)
	}
}

// disconnected tells every replica that the connection to node is gone.
func (m *manager) disconnected(node string) {
	m.mu.Lock()
	rs := make([]*replica, 0, len(m.replicas))
	for _, r := range m.replicas {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	for _, r := range rs {
		r.post(event{disconnect: node})
	}
}

// sendBacklog is how long this node has been unable to send to any of
// nodes (other than itself): the age of the youngest of their oldest
// unwritten messages, zero when one of them has nothing waiting. One slow
// peer is that peer's problem (its mirror lags and is shrunk); all of
// them at once is this node's.
func (m *manager) sendBacklog(nodes []string, now time.Time) time.Duration {
	var youngest time.Time
	for _, n := range nodes {
		if n == m.cfg.Node {
			continue
		}
		m.mu.Lock()
		p := m.peers[n]
		m.mu.Unlock()
		if p == nil {
			return 0
		}
		since := p.backlogSince()
		if since.IsZero() {
			return 0
		}
		if since.After(youngest) {
			youngest = since
		}
	}
	if youngest.IsZero() {
		return 0
	}
	return now.Sub(youngest)
}

// watch (owner: the manager; stop: manager.stop; waited by manager.wg)
// looks at every leader each heartbeat for a stuck fsync or send backlog,
// which the leader's own goroutine cannot report while a Sync blocks it.
// One goroutine per node, not a timer per queue.
func (m *manager) watch() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Heartbeat)
	defer t.Stop()
	var rs []*replica
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			rs = rs[:0]
			for _, r := range m.replicas {
				rs = append(rs, r)
			}
			m.mu.Unlock()
			for _, r := range rs {
				r.checkStalled(now)
			}
			clear(rs)
		}
	}
}

func (m *manager) lease() bool { return m.cfg.Lease == nil || m.cfg.Lease() }

// Open starts the replica of queue. The log's uncommitted tail (records
// above what was last reported committed) is kept on a leader: it becomes
// committed with the epoch's KindEpochStart record.
func (m *manager) Open(queue string, p Placement, log Log, h Handler) (Replica, error) {
	if err := checkPlacement(p); err != nil {
		return nil, err
	}
	if !slices.Contains(p.Replicas, m.cfg.Node) {
		return nil, fmt.Errorf("replica: node %s holds no replica of %s (replicas %v)", m.cfg.Node, queue, p.Replicas)
	}
	if len(p.Replicas) > 1 && (m.cfg.Dial == nil || m.cfg.Lease == nil || m.cfg.Controller == nil) {
		return nil, fmt.Errorf("%w: queue %s, replicas %v", ErrNeedsNetwork, queue, p.Replicas)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if _, dup := m.replicas[queue]; dup {
		return nil, fmt.Errorf("replica: queue %s is already open", queue)
	}
	r := newReplica(m, queue, p, log, h)
	m.replicas[queue] = r
	for _, n := range p.Replicas {
		if n != m.cfg.Node {
			m.peerLocked(n)
		}
	}
	m.wg.Add(1)
	go r.run()
	return r, nil
}

// checkPlacement rejects placements no controller may produce.
func checkPlacement(p Placement) error {
	seen := make(map[string]bool, len(p.Replicas))
	for _, n := range p.Replicas {
		if seen[n] {
			return fmt.Errorf("replica: placement names node %s twice", n)
		}
		seen[n] = true
	}
	for _, n := range p.ISR {
		if !seen[n] {
			return fmt.Errorf("replica: in-sync node %s is not a replica", n)
		}
	}
	switch {
	case len(p.Replicas) == 0:
		return errors.New("replica: placement has no replicas")
	case !seen[p.Leader]:
		return fmt.Errorf("replica: leader %q is not a replica", p.Leader)
	case !slices.Contains(p.ISR, p.Leader):
		return fmt.Errorf("replica: leader %s is not in the in-sync set %v", p.Leader, p.ISR)
	case p.MinISR < 1:
		return fmt.Errorf("replica: MinISR %d below 1", p.MinISR)
	}
	return nil
}

// ServeConn serves an inbound replication connection from node until it
// closes or the manager shuts down; it replaces the pair's older one.
func (m *manager) ServeConn(conn net.Conn, node string) {
	m.mu.Lock()
	if m.closed || node == m.cfg.Node {
		m.mu.Unlock()
		conn.Close()
		return
	}
	p := m.peerLocked(node)
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()
	p.serve(conn)
}

func (m *manager) remove(queue string, r *replica) {
	m.mu.Lock()
	if m.replicas[queue] == r {
		delete(m.replicas, queue)
	}
	m.mu.Unlock()
}

// Shutdown closes every replica and waits for their goroutines; logs stay
// open for their owners.
func (m *manager) Shutdown() error {
	m.mu.Lock()
	m.closed = true
	rs := make([]*replica, 0, len(m.replicas))
	for _, r := range m.replicas {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Close())
	}
	m.mu.Lock()
	if m.stop != nil {
		select {
		case <-m.stop:
		default:
			close(m.stop)
		}
	}
	ps := make([]*peer, 0, len(m.peers))
	for _, p := range m.peers {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	m.cancel()
	for _, p := range ps {
		p.mu.Lock()
		if p.cur != nil {
			p.cur.close()
		}
		p.mu.Unlock()
	}
	m.wg.Wait()
	return errors.Join(errs...)
}

func contextWithTimeout(m *manager, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(m.ctx, d)
}
