package replica

import (
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
	cfg Config

	mu       sync.Mutex
	replicas map[string]*replica
	closed   bool
	wg       sync.WaitGroup // every replica goroutine
}

// NewManager returns a Manager for cfg.
func NewManager(cfg Config) (Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &manager{cfg: cfg, replicas: make(map[string]*replica)}, nil
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
	if len(p.Replicas) > 1 {
		return nil, fmt.Errorf("replica: queue %s: replication to other nodes is not built yet (replicas %v)", queue, p.Replicas)
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

// ServeConn serves an inbound replication connection. This manager does not
// replicate to other nodes yet, so it closes the connection at once.
func (m *manager) ServeConn(conn net.Conn, node string) {
	conn.Close()
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
	m.wg.Wait()
	return errors.Join(errs...)
}
