package replica

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// The simulator drives Leader and Mirror state machines of one queue on
// 3–5 nodes through a random schedule: appends, syncs, ticks, message
// delivery (FIFO per node pair, or in chaos mode any order, with drops and
// duplicates), connection cuts, crashes with or without a power cut,
// restarts, controller CAS on in-sync changes, elections and lease loss.
// After every step it checks the invariants listed in doc.go.

type simNode struct {
	name   string
	log    *MemLog
	up     bool
	lease  bool
	known  Placement
	leader *Leader
	mirror *Mirror
	hw     uint64             // the leader's HW last checked
	mc     uint64             // the mirror's Committed last checked
	wiped  bool               // its log was wiped at least once
	told   map[string]hbEntry // heartbeat line last delivered to each node on this connection
}

type simProp struct {
	from *Leader
	node string
	p    Proposal
}

type sim struct {
	rng       *rand.Rand
	t         Timing
	nodes     []*simNode
	ctl       Placement
	now       time.Time
	net       []Msg
	chaos     bool
	props     []simProp
	committed map[uint64]Record
	commitEp  map[uint64]uint64 // the epoch of the leader that first committed each offset
	maxCommit uint64
	seq       int
	trace     []string
	err       error
	elections int
	shrinks   int
	expands   int
	wipes     int
	// noStorage breaks the storage-ID rule on purpose: the controller
	// records no StorageIDs, as before Placement had them.
	noStorage bool
}

func newSim(seed uint64, n int, chaos, noStorage bool) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), chaos: chaos, noStorage: noStorage,
		t: Timing{LagTimeout: 5 * time.Second, Heartbeat: 250 * time.Millisecond, RejoinAfter: time.Second, WindowRecords: 8, WindowBytes: 1 << 10,
			RecordStorageIDs: !noStorage},
		now: time.Unix(1_700_000_000, 0), committed: map[uint64]Record{}, commitEp: map[uint64]uint64{}}
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("n%d", i+1))
	}
	s.ctl = Placement{Replicas: names, Leader: names[0], Epoch: 1, ISR: slices.Clone(names), MinISR: 1 + s.rng.IntN(2), Version: 1}
	for _, name := range names {
		nd := &simNode{name: name, log: NewMemLog(), up: true, lease: true}
		s.nodes = append(s.nodes, nd)
		if !noStorage {
			if s.ctl.StorageIDs == nil {
				s.ctl.StorageIDs = map[string]string{}
			}
			s.ctl.StorageIDs[name] = nd.log.StorageID()
		}
	}
	for _, nd := range s.nodes {
		nd.known = s.ctl
	}
	for _, nd := range s.nodes {
		s.start(nd)
	}
	return s
}

func (s *sim) node(name string) *simNode {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func (s *sim) logf(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%6.2fs ", float64(s.now.Unix()-1_700_000_000)+float64(s.now.Nanosecond())/1e9)+fmt.Sprintf(format, args...))
	if len(s.trace) > 60 {
		s.trace = s.trace[1:]
	}
}

func (s *sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf(format+"\nlast steps:\n%s", append(args, strings.Join(s.trace, "\n"))...)
	}
}

// start gives an up node its role under the placement it knows. A new
// leader must hold every committed record (invariant 1).
func (s *sim) start(nd *simNode) {
	nd.leader, nd.mirror, nd.hw, nd.mc = nil, nil, 0, 0
	if !nd.up {
		return
	}
	p := nd.known
	if p.Leader != nd.name {
		nd.mirror = NewMirror(nd.name, p, nd.log, s.t)
		return
	}
	l, err := NewLeader(nd.name, p, nd.log, s.t, s.now)
	if err != nil {
		s.logf("%s cannot lead e%d: %v", nd.name, p.Epoch, err)
		return
	}
	nd.leader, nd.hw = l, l.HW()
	s.logf("%s leads e%d isr %v (log last %d)", nd.name, p.Epoch, p.ISR, nd.log.LastOffset())
	for o := uint64(1); o <= s.maxCommit; o++ {
		// "Later" leaders: a zombie with a stale placement of an older
		// epoch may lack newer commits (it can commit nothing itself).
		if s.commitEp[o] < p.Epoch && !s.holds(nd.log, o) {
			s.fail("invariant 1: new leader %s of epoch %d lacks committed offset %d", nd.name, p.Epoch, o)
			return
		}
	}
}

// holds reports whether log has the committed record at o.
func (s *sim) holds(log *MemLog, o uint64) bool {
	want, ok := s.committed[o]
	if !ok {
		return true
	}
	found := false
	log.Read(o, 0, func(r Record) bool {
		found = r.Offset == o && r.Epoch == want.Epoch && r.Kind == want.Kind && bytes.Equal(r.Data, want.Data)
		return false
	})
	return found
}

func (s *sim) send(msgs []Msg) {
	for _, m := range msgs {
		if from, to := s.node(m.From), s.node(m.To); from != nil && to != nil && from.up && to.up {
			s.net = append(s.net, m)
		}
	}
}

// deliver hands m to its destination's state machine.
func (s *sim) deliver(m Msg) {
	nd := s.node(m.To)
	if nd == nil || !nd.up {
		return
	}
	s.logf("deliver %v", m)
	switch {
	case nd.leader != nil && m.Type == MsgFollow:
		s.send(nd.leader.OnFollow(m))
	case nd.leader != nil && m.Type == MsgAck:
		nd.leader.OnAck(m, s.now)
	case nd.leader != nil && m.Type == MsgReject:
		nd.leader.OnReject(m)
	case nd.mirror != nil && m.Type == MsgStart:
		s.send(nd.mirror.OnStart(m))
	case nd.mirror != nil && m.Type == MsgAppend:
		s.send(nd.mirror.OnAppend(m))
	case nd.mirror != nil && m.Type == MsgHeartbeat:
		s.send(nd.mirror.OnHeartbeat(m))
	}
}

// pickMsg picks the next message: any one in chaos mode, else the oldest
// of a random node pair (TCP keeps order per connection).
func (s *sim) pickMsg() int {
	if len(s.net) == 0 {
		return -1
	}
	i := s.rng.IntN(len(s.net))
	if s.chaos {
		return i
	}
	m := s.net[i]
	for j, x := range s.net {
		if x.From == m.From && x.To == m.To {
			return j
		}
	}
	return i
}

// cut drops every message between a and b, as a connection reset does, and
// tells both ends.
func (s *sim) cut(a, b string) {
	s.net = slices.DeleteFunc(s.net, func(m Msg) bool {
		return (m.From == a && m.To == b) || (m.From == b && m.To == a)
	})
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		if nd := s.node(pair[0]); nd != nil {
			delete(nd.told, pair[1]) // a new connection: the receiver's dedupe starts over
		}
		nd := s.node(pair[0])
		if nd == nil || !nd.up {
			continue
		}
		if nd.leader != nil {
			nd.leader.OnDisconnect(pair[1], s.now)
		}
		if nd.mirror != nil && nd.mirror.Placement().Leader == pair[1] {
			nd.mirror.OnDisconnect()
		}
	}
	s.logf("cut %s-%s", a, b)
}
