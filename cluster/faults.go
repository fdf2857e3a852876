package cluster

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Faults injects network faults between nodes of one process, for tests:
// per ordered pair of node addresses (from → to) a one-direction cut, a
// delay, or a drop probability for gossip packets. Give the same *Faults to
// every node's Config. A cut or drop silently discards what from writes to
// to, on connections of every class in either dialing direction and on
// gossip packets, as a partition does; what to sends to from still flows.
type Faults struct {
	mu    sync.RWMutex
	rules map[faultPair]faultRule
}

type faultPair struct{ from, to string }

type faultRule struct {
	cut   bool
	delay time.Duration
	drop  float64 // probability a gossip packet is dropped
}

// NewFaults returns a Faults with no rules: everything flows.
func NewFaults() *Faults {
	return &Faults{rules: make(map[faultPair]faultRule)}
}

// Cut discards everything from sends to to.
func (f *Faults) Cut(from, to string) { f.update(from, to, func(r *faultRule) { r.cut = true }) }

// Delay holds every write and packet from sends to to for d.
func (f *Faults) Delay(from, to string, d time.Duration) {
	f.update(from, to, func(r *faultRule) { r.delay = d })
}

// Drop discards each gossip packet from sends to to with probability p;
// streams cannot lose bytes without breaking framing, so they are not
// affected (use Cut).
func (f *Faults) Drop(from, to string, p float64) {
	f.update(from, to, func(r *faultRule) { r.drop = p })
}

// Partition cuts both directions between every node of a and every node of b.
func (f *Faults) Partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			f.Cut(x, y)
			f.Cut(y, x)
		}
	}
}

// Heal removes every rule.
func (f *Faults) Heal() {
	f.mu.Lock()
	clear(f.rules)
	f.mu.Unlock()
}

func (f *Faults) update(from, to string, fn func(*faultRule)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := faultPair{from, to}
	r := f.rules[p]
	fn(&r)
	f.rules[p] = r
}

func (f *Faults) rule(from, to string) faultRule {
	if f == nil {
		return faultRule{}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.rules[faultPair{from, to}]
}

// passPacket reports whether a gossip packet from → to is delivered, after
// sleeping any delay.
func (f *Faults) passPacket(from, to string) bool {
	r := f.rule(from, to)
	if r.cut || (r.drop > 0 && rand.Float64() < r.drop) {
		return false
	}
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	return true
}

// faultConn applies the rules for writes from → to. Rules are read at every
// write, so a cut takes effect on open connections and a heal resumes them
// (bytes written during the cut are lost, which breaks the stream's framing
// and makes its reader drop the connection, as a real partition does).
type faultConn struct {
	net.Conn
	f        *Faults
	from, to string
}

func (c *faultConn) Write(b []byte) (int, error) {
	r := c.f.rule(c.from, c.to)
	if r.cut {
		return len(b), nil
	}
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	return c.Conn.Write(b)
}

func (f *Faults) wrap(conn net.Conn, from, to string) net.Conn {
	if f == nil {
		return conn
	}
	return &faultConn{Conn: conn, f: f, from: from, to: to}
}
