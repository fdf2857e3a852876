package cluster

import (
	"errors"
	"syscall"
	"time"
)

// Refused connections: a dial to a peer's cluster port that the peer's
// host answers with a reset (ECONNREFUSED) means no process listens there,
// so the peer's broker has crashed or stopped and can write nothing more
// (design §6.2, the fast path to a replicated queue's election). The
// transport remembers, per address, the latest such refusal until a dial to
// it or a connection from it succeeds again. Raft's leader dials every
// server several times a second, so on the metadata leader the record is
// fresh; a cut link (Faults, a partition) times out or fails the handshake
// and is never a refusal.

// refusedFresh is how recent a refusal must be to count: older ones may
// predate a restart nobody has dialed since.
const refusedFresh = 2 * time.Second

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// noteDial records the outcome of a dial to addr: a refusal, or contact.
func (t *Transport) noteDial(addr string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err == nil:
		delete(t.refused, addr)
	case isRefused(err):
		t.refused[addr] = time.Now()
	}
}

// noteContact forgets a refusal of addr: its node connected to us.
func (t *Transport) noteContact(addr string) {
	t.mu.Lock()
	delete(t.refused, addr)
	t.mu.Unlock()
}

// refusedSince reports whether the latest dial to addr was refused within
// d, with no contact from it since.
func (t *Transport) refusedSince(addr string, d time.Duration) bool {
	t.mu.Lock()
	at, ok := t.refused[addr]
	t.mu.Unlock()
	return ok && time.Since(at) < d
}

// Refused reports whether the member name is known to have no process on
// its cluster port: this node's latest dial to it, within the last 2 s, was
// refused, and nothing from it has connected since. False for an unknown
// name or a member never dialed.
func (n *Node) Refused(name string) bool {
	m, ok := n.mem.get(name)
	if !ok || m.Addr == "" {
		return false
	}
	return n.trans.refusedSince(m.Addr, refusedFresh)
}
