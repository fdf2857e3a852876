package cluster

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// MemberState is what gossip says of a node.
type MemberState int

const (
	StateAlive MemberState = iota
	StateDead              // failed: probes and suspicion timed out
	StateLeft              // left gracefully
)

func (s MemberState) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return "unknown"
}

// Alarms are resource alarm bits a node gossips, so that an alarm on one
// node blocks publishers on every node, as in RabbitMQ.
type Alarms uint8

const (
	AlarmMemory Alarms = 1 << iota
	AlarmDisk
)

// Member is one node as gossip reports it.
type Member struct {
	Name    string
	ID      string // storage identity
	Addr    string // cluster address
	State   MemberState
	BootID  string // changes at every process start
	Alarms  Alarms
	Voter   bool // a Raft voter, as the node itself last knew
	InRaft  bool // the node has Raft state (bootstrapped or joined)
	Version string
}

// EventKind is the kind of a membership Event.
type EventKind int

const (
	EventJoin EventKind = iota
	EventLeave
	EventUpdate
)

// Event is a membership change.
type Event struct {
	Kind   EventKind
	Member Member
}

const (
	metaVersion   = 1
	metaFlagVoter = 1 << 0
	metaFlagRaft  = 1 << 1
	// metaFlagLeaving is gossiped before a graceful leave: memberlist's
	// leave notification does not say whether a node left or died.
	metaFlagLeaving = 1 << 2
	eventsBuffer    = 256
)

// localMeta is this node's gossiped record.
type localMeta struct {
	id, bootID, addr, version string
	alarms                    Alarms
	voter, inRaft, leaving    bool
}

// encode is the node meta: version, flags, alarms, then length-prefixed id,
// boot id, cluster address and version; well under memberlist's 512 bytes
// since every field is at most 255 bytes and the four are short.
func (m localMeta) encode() []byte {
	var flags byte
	if m.voter {
		flags |= metaFlagVoter
	}
	if m.inRaft {
		flags |= metaFlagRaft
	}
	if m.leaving {
		flags |= metaFlagLeaving
	}
	b := []byte{metaVersion, flags, byte(m.alarms)}
	for _, f := range []string{m.id, m.bootID, m.addr, m.version} {
		b = appendField(b, f)
	}
	return b
}

// decodeMeta decodes a node meta and reports its leaving flag.
func decodeMeta(b []byte) (Member, bool, error) {
	if len(b) < 3 || b[0] != metaVersion {
		return Member{}, false, errors.New("cluster: unknown node meta version")
	}
	m := Member{Voter: b[1]&metaFlagVoter != 0, InRaft: b[1]&metaFlagRaft != 0, Alarms: Alarms(b[2])}
	rest := b[3:]
	fields := make([]string, 4)
	for i := range fields {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return Member{}, false, errors.New("cluster: truncated node meta")
		}
		fields[i] = string(rest[1 : 1+int(rest[0])])
		rest = rest[1+int(rest[0]):]
	}
	m.ID, m.BootID, m.Addr, m.Version = fields[0], fields[1], fields[2], fields[3]
	return m, b[1]&metaFlagLeaving != 0, nil
}

// membership wraps memberlist: it is the delegate that publishes this
// node's meta and the event delegate that keeps every member's latest
// record, including dead and left ones until they are forgotten.
type membership struct {
	ml *memberlist.Memberlist

	mu      sync.Mutex
	self    localMeta
	members map[string]Member

	events  chan Event
	dropped atomic.Uint64
	changed chan struct{} // 1-buffered wake-up for the node's loops
}

func newMembership(self localMeta) *membership {
	return &membership{
		self:    self,
		members: make(map[string]Member),
		events:  make(chan Event, eventsBuffer),
		changed: make(chan struct{}, 1),
	}
}

// NodeMeta implements memberlist.Delegate.
func (m *membership) NodeMeta(limit int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.self.encode()
	if len(b) > limit {
		panic(fmt.Sprintf("cluster: node meta of %d bytes exceeds memberlist's %d", len(b), limit))
	}
	return b
}

func (m *membership) NotifyMsg([]byte)                           {}
func (m *membership) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (m *membership) LocalState(join bool) []byte                { return nil }
func (m *membership) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin, NotifyLeave and NotifyUpdate implement
// memberlist.EventDelegate; they run on memberlist's goroutines and must
// not block.
func (m *membership) NotifyJoin(n *memberlist.Node)   { m.record(EventJoin, n) }
func (m *membership) NotifyLeave(n *memberlist.Node)  { m.record(EventLeave, n) }
func (m *membership) NotifyUpdate(n *memberlist.Node) { m.record(EventUpdate, n) }

func (m *membership) record(kind EventKind, n *memberlist.Node) {
	// memberlist hands out the Node without its state (nodeState
	// shadows Node.State), so the state comes from the kind of event and
	// the leaving flag.
	mem, leaving, err := decodeMeta(n.Meta)
	if err != nil {
		mem = Member{} // a node of another version: keep its name and state
	}
	mem.Name = n.Name
	switch {
	case kind != EventLeave:
		mem.State = StateAlive
	case leaving:
		mem.State = StateLeft
	default:
		mem.State = StateDead
	}
	m.mu.Lock()
	m.members[mem.Name] = mem
	m.mu.Unlock()
	select {
	case m.events <- Event{Kind: kind, Member: mem}:
	default:
		m.dropped.Add(1)
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// list returns every known member, sorted by name.
func (m *membership) list() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, mem)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m *membership) get(name string) (Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.members[name]
	return mem, ok
}

// forget drops a member's record (after Forget removed it from Raft).
func (m *membership) forget(name string) {
	m.mu.Lock()
	if mem, ok := m.members[name]; ok && mem.State != StateAlive {
		delete(m.members, name)
	}
	m.mu.Unlock()
}

// update changes this node's meta and gossips it.
func (m *membership) update(fn func(*localMeta), timeout time.Duration) error {
	m.mu.Lock()
	before := m.self
	fn(&m.self)
	same := before == m.self
	m.mu.Unlock()
	if same || m.ml == nil {
		return nil
	}
	return m.ml.UpdateNode(timeout)
}
