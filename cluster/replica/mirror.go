package replica

import (
	"time"
)

// Mirror is the mirror side of one queue's protocol as a deterministic
// state machine. It follows p.Leader in p.Epoch: FOLLOW until START, then
// APPENDs; it acknowledges after each Sync the caller makes (group commit)
// and reports Committed no higher than its own durable offset.
type Mirror struct {
	self string
	t    Timing
	p    Placement
	log  Log

	following  bool
	startAt    uint64 // the first offset the leader sends after START
	hw         uint64 // the leader's HW as last heard
	lastFollow time.Time
	acked      Msg // last ACK sent (Written, Durable)
	failed     RejectReason
	compact    uint64 // the leader's owner settled everything below it
}

// CompactTo is the offset below which the leader said records are settled.
func (m *Mirror) CompactTo() uint64 { return m.compact }

// NewMirror starts following p.Leader; the first Tick sends FOLLOW.
func NewMirror(self string, p Placement, log Log, t Timing) *Mirror {
	return &Mirror{self: self, t: t, p: p, log: log}
}

// Placement is the placement the mirror follows under.
func (m *Mirror) Placement() Placement { return m.p }

// Following reports whether the leader answered FOLLOW.
func (m *Mirror) Following() bool { return m.following }

// Committed is what the owner may treat as committed: the leader's HW, but
// never above this copy's durable offset.
func (m *Mirror) Committed() uint64 { return min(m.hw, m.log.DurableOffset()) }

// SetPlacement applies a committed placement. A new epoch (or leader)
// starts over with FOLLOW; it reports false when this node leads p, so the
// caller replaces the Mirror with a Leader.
func (m *Mirror) SetPlacement(p Placement) bool {
	if p.Version <= m.p.Version && p.Epoch <= m.p.Epoch {
		return true
	}
	if p.Leader == m.self {
		return false
	}
	if p.Epoch != m.p.Epoch || p.Leader != m.p.Leader {
		m.following, m.lastFollow = false, time.Time{}
	}
	m.p = p
	return true
}

// follow is the FOLLOW for the current placement.
func (m *Mirror) follow() Msg {
	var lastEpoch uint64
	h := m.log.Epochs()
	if len(h) > 0 {
		lastEpoch = h[len(h)-1].Epoch
	}
	return Msg{Type: MsgFollow, From: m.self, To: m.p.Leader, Epoch: m.p.Epoch, LastEpoch: lastEpoch,
		LEO: m.log.LastOffset(), StorageID: m.log.StorageID(), History: h}
}

// Tick re-sends FOLLOW every Heartbeat until the leader answers (the
// first, lost or unanswered FOLLOW).
func (m *Mirror) Tick(now time.Time) []Msg {
	if m.following || (!m.lastFollow.IsZero() && now.Sub(m.lastFollow) < m.t.Heartbeat) {
		return nil
	}
	m.lastFollow = now
	return []Msg{m.follow()}
}

// OnDisconnect forgets the leader's answer: the next Tick follows again
// (the leader dropped its state for this mirror too).
func (m *Mirror) OnDisconnect() { m.following, m.lastFollow = false, time.Time{} }

func (m *Mirror) reject(to string, why RejectReason) []Msg {
	return []Msg{{Type: MsgReject, From: m.self, To: to, Epoch: m.p.Epoch, Reason: why, Written: m.log.LastOffset()}}
}

// fromLeader checks a leader message's epoch: an older one is fenced, a
// newer one waits for its placement (this node cannot know the leader yet).
func (m *Mirror) fromLeader(msg Msg) (ok bool, out []Msg) {
	switch {
	case msg.Epoch < m.p.Epoch:
		return false, m.reject(msg.From, RejectStaleEpoch)
	case msg.Epoch > m.p.Epoch || msg.From != m.p.Leader:
		return false, nil
	}
	return true, nil
}

// OnStart truncates the log as the leader says and starts accepting APPENDs.
func (m *Mirror) OnStart(msg Msg) []Msg {
	if ok, out := m.fromLeader(msg); !ok {
		return out
	}
	if m.following {
		// An answer to a repeated FOLLOW: the leader reset what it knows of
		// this mirror, so tell it again. The log is already a prefix of the
		// leader's (same epoch), so there is nothing to truncate.
		return []Msg{m.ack()}
	}
	if msg.TruncateTo > m.log.LastOffset() {
		// The answer to an older FOLLOW, sent before this log lost records
		// (a power cut): it would leave a hole. Follow again.
		m.lastFollow = time.Time{}
		return nil
	}
	if err := m.log.TruncateAfter(msg.TruncateTo); err != nil {
		return m.reject(msg.From, RejectDiskFull)
	}
	m.following, m.startAt = true, msg.TruncateTo+1
	if msg.TruncateTo == 0 {
		m.startAt = max(msg.StartAt, 1) // the leader reclaimed its prefix: start where its log starts
	}
	m.hw = max(m.hw, msg.HW)
	return []Msg{m.ack()}
}

// OnAppend appends records continuing the log; duplicates are skipped.
func (m *Mirror) OnAppend(msg Msg) []Msg {
	if ok, out := m.fromLeader(msg); !ok {
		return out
	}
	if !m.following {
		return nil
	}
	last := m.log.LastOffset()
	empty := last+1 == m.log.FirstOffset()
	recs := msg.Records
	for len(recs) > 0 && recs[0].Offset <= last {
		recs = recs[1:] // already held (a duplicate or resent batch)
	}
	m.compact = max(m.compact, msg.Compact)
	if len(recs) == 0 {
		m.hw = max(m.hw, msg.HW)
		return []Msg{m.ack()} // the leader resent: it may have lost the ACK
	}
	// An empty log starts where the leader said in START, nowhere else: a
	// late APPEND of an older session must not start it at a random offset.
	if recs[0].Offset != last+1 && !(empty && recs[0].Offset == m.startAt) {
		return m.reject(msg.From, RejectGap)
	}
	if err := m.log.Append(recs...); err != nil {
		m.failed = RejectDiskFull
		return m.reject(msg.From, RejectDiskFull)
	}
	m.hw = max(m.hw, msg.HW)
	return nil
}

// OnHeartbeat learns the leader's HW.
func (m *Mirror) OnHeartbeat(msg Msg) []Msg {
	if ok, out := m.fromLeader(msg); !ok {
		return out
	}
	if m.following {
		m.hw = max(m.hw, msg.HW)
		m.compact = max(m.compact, msg.Compact)
	}
	return nil
}

func (m *Mirror) ack() Msg {
	a := Msg{Type: MsgAck, From: m.self, To: m.p.Leader, Epoch: m.p.Epoch, Written: m.log.LastOffset(), Durable: m.log.DurableOffset()}
	m.acked = a
	return a
}

// Synced is called after the caller synced the log; it returns the ACK
// when written or durable moved since the last one.
func (m *Mirror) Synced() []Msg {
	if !m.following {
		return nil
	}
	if m.log.LastOffset() == m.acked.Written && m.log.DurableOffset() == m.acked.Durable && m.acked.Epoch == m.p.Epoch {
		return nil
	}
	return []Msg{m.ack()}
}
