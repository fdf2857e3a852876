package replica

import (
	"fmt"
	"slices"
	"time"
)

// Timing is the protocol's part of Config, for the state machines.
type Timing struct {
	LagTimeout, Heartbeat, RejoinAfter time.Duration
	WindowRecords, WindowBytes         int
	// RecordStorageIDs: the controller records Placement.StorageIDs
	// (StorageController), so the leader also proposes an unchanged
	// in-sync set to fill in the IDs the placement lacks.
	RecordStorageIDs bool
}

func (c Config) timing() Timing {
	_, rec := c.Controller.(StorageController)
	return Timing{LagTimeout: c.LagTimeout, Heartbeat: c.Heartbeat, RejoinAfter: c.RejoinAfter,
		WindowRecords: c.WindowRecords, WindowBytes: c.WindowBytes, RecordStorageIDs: rec}
}

// Proposal is an in-sync set change a leader wants the Controller to make.
type Proposal struct {
	Epoch, Version uint64
	ISR            []string
	// StorageIDs of the members of ISR the leader knows (see
	// Placement.StorageIDs): its own log's, and each mirror's from FOLLOW.
	StorageIDs map[string]string
}

// Leader is the leader side of one queue's protocol as a deterministic
// state machine: no goroutines, no sockets, time passed in. It owns the
// log while it lives. Every method returns the messages to send; commits
// are read with HW, in-sync changes with Proposal.
type Leader struct {
	self string
	t    Timing
	p    Placement
	log  Log

	hw       uint64
	start    uint64 // offset of this epoch's KindEpochStart
	mirrors  map[string]*follower
	adding   map[string]bool // proposed additions, counted at once (maximal ISR)
	proposal *Proposal       // outstanding, nil when none
	fenced   bool            // a mirror knows a newer epoch: this leader is deposed
	compact  uint64          // the owner settled everything below it; passed on to mirrors
	selfLag  time.Duration   // age of this leader's own fsync or send backlog (SetSelfLag)
}

// follower is what the leader knows of one mirror.
type follower struct {
	following bool // sent FOLLOW this epoch and was answered with START
	storageID string
	next      uint64 // next offset to send
	written   uint64
	durable   uint64
	sent      []sentMark // batches sent and not yet durably acknowledged, oldest first
	inflight  int        // records in sent
	bytes     int
	caughtUp  time.Time // since when the mirror keeps up; zero when it does not
	since     time.Time // when it stopped following (or the leadership began)
	out       string    // why the leader wants it out of the in-sync set, "" when not
}

type sentMark struct {
	last  uint64
	at    time.Time
	n     int
	bytes int
}

// NewLeader starts leading p.Epoch over log, appending the epoch's
// KindEpochStart if the log does not end in this epoch already.
func NewLeader(self string, p Placement, log Log, t Timing, now time.Time) (*Leader, error) {
	if p.Leader != self {
		return nil, fmt.Errorf("replica: %s is not the leader of placement %+v", self, p)
	}
	l := &Leader{self: self, t: t, p: p, log: log, mirrors: map[string]*follower{}, adding: map[string]bool{}}
	h := log.Epochs()
	if len(h) > 0 && h[len(h)-1].Epoch > p.Epoch {
		return nil, fmt.Errorf("%w: log has epoch %d, placement %d", ErrFenced, h[len(h)-1].Epoch, p.Epoch)
	}
	if len(h) > 0 && h[len(h)-1].Epoch == p.Epoch && len(p.Replicas) > 1 {
		// This node led this epoch before it restarted and may have lost
		// records its mirrors hold; writing new ones at those offsets in the
		// same epoch would make two different records look identical.
		return nil, fmt.Errorf("%w: epoch %d", ErrRestartedLeader, p.Epoch)
	}
	if len(p.Replicas) > 1 && storageDiffers(p, self, log.StorageID()) {
		// A wiped copy may lack what was committed: leading would make the
		// mirrors truncate to it.
		return nil, fmt.Errorf("%w: log %s, placement %s", ErrStorageMismatch, log.StorageID(), p.StorageIDs[self])
	}
	if len(h) == 0 || h[len(h)-1].Epoch < p.Epoch {
		l.start = log.LastOffset() + 1
		if err := log.Append(Record{Offset: l.start, Epoch: p.Epoch, Kind: KindEpochStart}); err != nil {
			return nil, err
		}
		// Durable before anything of this epoch leaves the node: then a
		// restart that lost later records still finds the epoch in its log
		// and refuses to lead it again (ErrRestartedLeader).
		if err := log.Sync(); err != nil {
			return nil, err
		}
	} else {
		l.start = h[len(h)-1].Start
	}
	for _, n := range p.Replicas {
		if n != self {
			l.mirrors[n] = &follower{since: now}
		}
	}
	return l, nil
}

// Placement is the placement the leader works under.
func (l *Leader) Placement() Placement { return l.p }

// HW is the highest committed offset.
func (l *Leader) HW() uint64 { return l.hw }

// Compact is the compaction point the owner gave (SetCompact).
func (l *Leader) Compact() uint64 { return l.compact }

// Heartbeat is what the node pair's heartbeat frame tells this queue's
// mirrors, or false while the leader is fenced.
func (l *Leader) Heartbeat() (hbEntry, bool) {
	return hbEntry{epoch: l.p.Epoch, hw: l.hw, compact: l.compact}, !l.fenced
}

// Fenced reports whether a mirror told this leader of a newer epoch.
func (l *Leader) Fenced() bool { return l.fenced }

// SetCompact records that the owner settled everything below off; APPENDs
// and HEARTBEATs pass it on so mirrors reclaim the same prefix.
func (l *Leader) SetCompact(off uint64) { l.compact = max(l.compact, off) }

// SetSelfLag tells the leader how old its own backlog is: a Sync still
// running, or data queued for every mirror's connection and not yet
// written. Above the lag timeout the mirrors' lag is this node's fault, so
// it shrinks none of them for lag or a lost connection (KIP-537: a slow
// leader must not throw out its followers and carry on alone); the
// replica reports that it should resign instead.
func (l *Leader) SetSelfLag(d time.Duration) { l.selfLag = d }

func (l *Leader) selfStalled() bool { return l.selfLag > l.t.LagTimeout }

// Append adds owner records and returns the last offset.
func (l *Leader) Append(data ...[]byte) (uint64, error) {
	if l.fenced {
		return 0, ErrFenced
	}
	off := l.log.LastOffset()
	recs := make([]Record, len(data))
	for i, d := range data {
		off++
		recs[i] = Record{Offset: off, Epoch: l.p.Epoch, Kind: KindData, Data: d}
	}
	if err := l.log.Append(recs...); err != nil {
		return 0, err
	}
	return off, nil
}

// maximalISR is the committed in-sync set plus the proposed additions.
func (l *Leader) maximalISR() []string {
	isr := slices.Clone(l.p.ISR)
	for n := range l.adding {
		if !slices.Contains(isr, n) {
			isr = append(isr, n)
		}
	}
	return isr
}

// Advance recomputes the high watermark (commit rule: every member of the
// maximal ISR durable ≥ o, |ISR| ≥ MinISR, lease valid) and reports
// whether it moved.
func (l *Leader) Advance(lease bool) bool {
	if l.fenced || !lease || len(l.p.ISR) < l.p.MinISR {
		return false
	}
	o := l.log.DurableOffset()
	for _, n := range l.maximalISR() {
		if n == l.self {
			continue
		}
		f := l.mirrors[n]
		if f == nil || !f.following {
			return false
		}
		o = min(o, f.durable)
	}
	if o <= l.hw {
		return false
	}
	l.hw = o
	return true
}

// OnFollow answers a mirror's FOLLOW with START: truncate after the last
// offset where the two logs agree (agreeUpTo), or to nothing when this
// leader no longer holds the records after that point.
func (l *Leader) OnFollow(m Msg) []Msg {
	f := l.mirrors[m.From]
	if f == nil {
		return nil
	}
	if m.Epoch > l.p.Epoch {
		l.fenced = true
		return nil
	}
	if f.storageID != "" && f.storageID != m.StorageID {
		l.wantOut(m.From, f, "storage id changed")
	}
	if storageDiffers(l.p, m.From, m.StorageID) {
		l.wantOut(m.From, f, "storage id differs from the placement's")
	}
	f.storageID = m.StorageID
	trunc := agreeUpTo(l.log.Epochs(), l.log.LastOffset(), m.History, m.LEO)
	start := trunc + 1
	if start < l.log.FirstOffset() {
		// This leader no longer holds what follows: the mirror starts over
		// where this log starts.
		trunc, start = 0, l.log.FirstOffset()
	}
	// Durable is learned from the mirror's next ACK: a restarted mirror may
	// hold records it never fsynced.
	f.following, f.next, f.written, f.durable = true, start, trunc, 0
	f.sent, f.inflight, f.bytes = nil, 0, 0
	return []Msg{{Type: MsgStart, From: l.self, To: m.From, Epoch: l.p.Epoch, TruncateTo: trunc, StartAt: start, HW: l.hw}}
}

// OnAck records a mirror's cumulative progress.
func (l *Leader) OnAck(m Msg, now time.Time) {
	f := l.mirrors[m.From]
	if f == nil || m.Epoch != l.p.Epoch || !f.following {
		return
	}
	f.written, f.durable = max(f.written, m.Written), max(f.durable, m.Durable)
	i := 0
	for i < len(f.sent) && f.sent[i].last <= f.durable {
		f.inflight -= f.sent[i].n
		f.bytes -= f.sent[i].bytes
		i++
	}
	f.sent = f.sent[i:]
	if f.next <= f.written {
		f.next = f.written + 1
	}
}

// OnReject handles a mirror's refusal.
func (l *Leader) OnReject(m Msg) {
	f := l.mirrors[m.From]
	if f == nil {
		return
	}
	switch m.Reason {
	case RejectStaleEpoch:
		if m.Epoch > l.p.Epoch {
			l.fenced = true
		}
	case RejectGap:
		if m.Epoch == l.p.Epoch && f.following {
			// Resend from what the mirror holds; what was in flight is void.
			f.next, f.sent, f.inflight, f.bytes = m.Written+1, nil, 0, 0
		}
	case RejectDiskFull, RejectStorageMismatch:
		l.wantOut(m.From, f, m.Reason.String())
	}
}

// OnDisconnect is called when the connection to a mirror's node is lost. A
// mirror with data outstanding is proposed out at once (LavinMQ's rule):
// waiting for the lag timeout would stall confirms for nothing.
func (l *Leader) OnDisconnect(node string, now time.Time) {
	f := l.mirrors[node]
	if f == nil {
		return
	}
	outstanding := f.durable < l.log.LastOffset()
	f.following, f.sent, f.inflight, f.bytes, f.caughtUp, f.since = false, nil, 0, 0, time.Time{}, now
	if outstanding && !l.selfStalled() {
		l.wantOut(node, f, "connection lost with data outstanding")
	}
}

func (l *Leader) wantOut(node string, f *follower, why string) {
	if slices.Contains(l.maximalISR(), node) {
		f.out = why
	}
	// A proposed addition stays counted until the controller decided it:
	// it may already be in the committed set. The shrink follows then.
	f.caughtUp = time.Time{}
}

// Pump returns the APPENDs the windows allow.
func (l *Leader) Pump(now time.Time) []Msg {
	if l.fenced {
		return nil
	}
	var out []Msg
	last := l.log.LastOffset()
	for _, n := range l.p.Replicas {
		f := l.mirrors[n]
		if f == nil || !f.following {
			continue
		}
		for f.next <= last && f.inflight < l.t.WindowRecords && f.bytes < l.t.WindowBytes {
			m, ok := l.appendFor(n, f, now)
			if !ok {
				break
			}
			out = append(out, m)
		}
	}
	// No per-queue HEARTBEAT: APPENDs carry the HW while data flows, and
	// the node pair's heartbeat frame lists every queue's epoch, HW and
	// compaction point (Heartbeat) for the rest.
	return out
}

// appendFor reads the next batch for f from the log.
func (l *Leader) appendFor(node string, f *follower, now time.Time) (Msg, bool) {
	// A quarter of the window per APPEND keeps several in flight, so the
	// mirror's ACK of one overlaps the sending of the next (pipelining).
	maxBytes := min(l.t.WindowBytes-f.bytes, max(l.t.WindowBytes/4, 1))
	maxRecs := min(l.t.WindowRecords-f.inflight, max(l.t.WindowRecords/4, 1))
	var recs []Record
	size := 0
	from := f.next
	err := l.log.Read(from, maxBytes, func(r Record) bool {
		recs = append(recs, r)
		size += len(r.Data)
		return len(recs) < maxRecs
	})
	if err != nil || len(recs) == 0 {
		return Msg{}, false
	}
	lastRec := recs[len(recs)-1].Offset
	f.sent = append(f.sent, sentMark{last: lastRec, at: now, n: len(recs), bytes: size})
	f.inflight += len(recs)
	f.bytes += size
	f.next = lastRec + 1
	return Msg{Type: MsgAppend, From: l.self, To: node, Epoch: l.p.Epoch, PrevOffset: from - 1, HW: l.hw, Compact: l.compact, Records: recs}, true
}

// Tick checks lags and catch-ups and returns an in-sync set change to
// propose, or nil (also while one is outstanding).
func (l *Leader) Tick(now time.Time) *Proposal {
	if l.fenced {
		return nil
	}
	isr := l.maximalISR()
	last := l.log.LastOffset()
	for _, n := range l.p.Replicas {
		f := l.mirrors[n]
		if f == nil {
			continue
		}
		lag := time.Duration(0)
		if len(f.sent) > 0 {
			lag = now.Sub(f.sent[0].at)
		}
		in := slices.Contains(isr, n)
		stalled := l.selfStalled()
		if f.following && lag > l.t.LagTimeout && !stalled {
			// Nothing durable acknowledged for that long: send again from
			// what it acknowledged (a lost batch or ACK must not stall the
			// window forever; duplicates are skipped and re-acknowledged).
			f.next, f.sent, f.inflight, f.bytes = f.written+1, nil, 0, 0
		}
		switch {
		case in && stalled:
			// Its lag is this leader's own backlog: no shrink (SetSelfLag).
		case in && f.out == "" && lag > l.t.LagTimeout:
			f.out = fmt.Sprintf("lag %v over %v", lag, l.t.LagTimeout)
		case in && f.out == "" && !f.following && f.durable < last && now.Sub(f.since) > l.t.LagTimeout:
			f.out = "not following"
		case !in && f.following && f.out == "" && lag < l.t.Heartbeat && f.next > last:
			// Everything sent and nothing unacknowledged for a heartbeat: at
			// most a round trip behind. (Requiring durable ≥ HW would flap
			// under load: the HW moves on before each ACK arrives.)
			if f.caughtUp.IsZero() {
				f.caughtUp = now
			}
		case !in:
			f.caughtUp = time.Time{}
		}
	}
	return l.propose(now)
}

// propose builds the next proposal: shrinks first (they unblock commits),
// then one expansion of a mirror caught up for RejoinAfter.
func (l *Leader) propose(now time.Time) *Proposal {
	if l.proposal != nil {
		return nil
	}
	isr := slices.Clone(l.p.ISR)
	changed := false
	for _, n := range l.p.Replicas {
		if f := l.mirrors[n]; f != nil && f.out != "" && slices.Contains(isr, n) {
			isr = slices.DeleteFunc(isr, func(x string) bool { return x == n })
			changed = true
		}
	}
	if !changed {
		for _, n := range l.p.Replicas {
			f := l.mirrors[n]
			if f != nil && f.out == "" && !slices.Contains(isr, n) && !f.caughtUp.IsZero() &&
				now.Sub(f.caughtUp) >= l.t.RejoinAfter {
				l.adding[n] = true // counted from now on, before the controller agrees
				isr = append(isr, n)
				changed = true
				break
			}
		}
	}
	ids, fill := l.storageIDs(isr)
	if !changed && !(fill && l.t.RecordStorageIDs) {
		return nil
	}
	l.proposal = &Proposal{Epoch: l.p.Epoch, Version: l.p.Version, ISR: isr, StorageIDs: ids}
	return l.proposal
}

// storageIDs is what the leader knows of isr's storage IDs: its own log's;
// for a member the placement does not name yet (an addition) the ID it
// followed with; for a member the placement has no ID for, the ID it
// followed with once it acknowledged durably the HW and this epoch's
// KindEpochStart, above every earlier commit (its log then holds
// everything committed). fill reports a member whose ID
// the placement lacks and this leader now knows.
func (l *Leader) storageIDs(isr []string) (ids map[string]string, fill bool) {
	ids = make(map[string]string, len(isr))
	for _, n := range isr {
		known := l.p.StorageIDs[n]
		id := known
		switch f := l.mirrors[n]; {
		case n == l.self:
			id = l.log.StorageID()
		case f == nil || !f.following || f.storageID == "":
		case !slices.Contains(l.p.ISR, n), known == "" && f.durable >= max(l.hw, l.start):
			id = f.storageID
		}
		if id != "" {
			ids[n] = id
			fill = fill || (known == "" && slices.Contains(l.p.ISR, n))
		}
	}
	return ids, fill
}

// ProposalDone is called when the controller refused the outstanding
// proposal (or the call failed); a later Tick may propose again. A
// successful one arrives as a placement through SetPlacement.
func (l *Leader) ProposalDone(err error) {
	if l.proposal == nil || err == nil {
		return
	}
	for _, n := range l.proposal.ISR {
		if !slices.Contains(l.p.ISR, n) {
			delete(l.adding, n)
			if f := l.mirrors[n]; f != nil {
				f.caughtUp = time.Time{}
			}
		}
	}
	l.proposal = nil
}

// SetPlacement applies a committed placement of the same epoch (an in-sync
// change). It reports false for one of another epoch: the caller replaces
// this Leader.
func (l *Leader) SetPlacement(p Placement, now time.Time) bool {
	if p.Epoch != l.p.Epoch || p.Leader != l.self {
		return false
	}
	if p.Version <= l.p.Version {
		return true
	}
	// Any outstanding proposal is decided now: it was made against an older
	// version, so it is either in p or will be refused. What p does not
	// hold the controller does not count, and neither need we.
	l.p = p
	l.proposal = nil
	clear(l.adding)
	for n := range l.mirrors {
		if !slices.Contains(p.Replicas, n) {
			// Removed from the placement (a mirrored queue's policy
			// changed): forgotten, so a later re-addition starts afresh
			// and the status lists only the placement's mirrors.
			delete(l.mirrors, n)
		}
	}
	for _, n := range p.Replicas {
		f := l.mirrors[n]
		if n == l.self {
			continue
		}
		if f == nil {
			l.mirrors[n] = &follower{since: now}
			continue
		}
		if !slices.Contains(p.ISR, n) {
			f.out = "" // out now; it may earn its way back
		}
	}
	return true
}

// MirrorStatus is what the leader knows of each mirror at now.
func (l *Leader) MirrorStatus(now time.Time) map[string]MirrorStatus {
	out := make(map[string]MirrorStatus, len(l.mirrors))
	for n, f := range l.mirrors {
		ms := MirrorStatus{Written: f.written, Durable: f.durable, InSync: slices.Contains(l.p.ISR, n)}
		if len(f.sent) > 0 {
			ms.Lag = now.Sub(f.sent[0].at)
		}
		out[n] = ms
	}
	return out
}
