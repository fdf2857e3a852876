package replica

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// step runs one random action, then the invariant checks.
func (s *sim) step() {
	nd := s.nodes[s.rng.IntN(len(s.nodes))]
	switch r := s.rng.IntN(100); {
	case r < 14:
		s.appendAt(nd)
	case r < 24:
		s.syncAt(nd)
	case r < 32:
		s.tick(time.Duration(s.rng.IntN(700)) * time.Millisecond)
	case r < 62:
		if i := s.pickMsg(); i >= 0 {
			m := s.net[i]
			s.net = slices.Delete(s.net, i, i+1)
			s.deliver(m)
		}
	case r < 65:
		if s.chaos && len(s.net) > 0 {
			i := s.rng.IntN(len(s.net))
			if s.rng.IntN(2) == 0 {
				s.logf("drop %v", s.net[i])
				s.net = slices.Delete(s.net, i, i+1)
			} else {
				s.logf("duplicate %v", s.net[i])
				s.net = append(s.net, s.net[i])
			}
		} else {
			other := s.nodes[s.rng.IntN(len(s.nodes))]
			if other != nd {
				s.cut(nd.name, other.name)
			}
		}
	case r < 67:
		s.crash(nd, s.rng.IntN(2) == 0)
	case r < 71:
		if !nd.up {
			nd.up, nd.lease = true, nd.known.Version == s.ctl.Version
			nd.log.Reopen()
			s.logf("restart %s", nd.name)
			s.start(nd)
		}
	case r < 77:
		s.controllerStep()
	case r < 87:
		s.placementTo(nd)
	case r < 89:
		s.elect()
	default:
		if nd.up && nd.leader != nil {
			s.send(nd.leader.Pump(s.now))
		}
	}
	s.check()
}

func (s *sim) appendAt(nd *simNode) {
	if !nd.up || nd.leader == nil {
		return
	}
	var data [][]byte
	for range 1 + s.rng.IntN(3) {
		s.seq++
		data = append(data, []byte(fmt.Sprintf("%s-%d", nd.name, s.seq)))
	}
	last, err := nd.leader.Append(data...)
	s.logf("append %d at %s → %d (%v)", len(data), nd.name, last, err)
	s.send(nd.leader.Pump(s.now))
}

func (s *sim) syncAt(nd *simNode) {
	if !nd.up {
		return
	}
	if err := nd.log.Sync(); err != nil {
		return
	}
	if nd.mirror != nil {
		s.send(nd.mirror.Synced())
	}
	if nd.leader != nil {
		nd.leader.Advance(nd.lease)
	}
}

func (s *sim) tick(d time.Duration) {
	s.now = s.now.Add(d)
	for _, nd := range s.nodes {
		if !nd.up {
			continue
		}
		if nd.mirror != nil {
			s.send(nd.mirror.Tick(s.now))
		}
		if nd.leader != nil {
			if p := nd.leader.Tick(s.now); p != nil {
				s.logf("%s proposes isr %v at e%d v%d", nd.name, p.ISR, p.Epoch, p.Version)
				s.props = append(s.props, simProp{from: nd.leader, node: nd.name, p: *p})
			}
			nd.leader.Advance(nd.lease)
			s.send(nd.leader.Pump(s.now))
			s.send(s.heartbeats(nd))
		}
	}
}

// heartbeats is this leader's line in its node pairs' heartbeat frames,
// as the mirrors' managers deliver it: only when it changed since the last
// one delivered on the connection (peer.readLoop).
func (s *sim) heartbeats(nd *simNode) []Msg {
	e, ok := nd.leader.Heartbeat()
	if !ok {
		return nil
	}
	if nd.told == nil {
		nd.told = map[string]hbEntry{}
	}
	var out []Msg
	for _, n := range nd.leader.Placement().Replicas {
		if last, seen := nd.told[n]; n != nd.name && (!seen || last != e) {
			nd.told[n] = e
			out = append(out, Msg{Type: MsgHeartbeat, From: nd.name, To: n, Epoch: e.epoch, HW: e.hw, Compact: e.compact})
		}
	}
	return out
}

func (s *sim) crash(nd *simNode, powerCut bool) {
	if !nd.up {
		return
	}
	nd.up, nd.leader, nd.mirror = false, nil, nil
	nd.log.Close()
	if powerCut {
		nd.log.PowerCut()
	}
	if powerCut && s.rng.IntN(3) == 0 {
		// The disk is replaced or the directory deleted: the node comes
		// back with an empty log under a new StorageID.
		nd.log.Wipe()
		nd.wiped = true
		s.wipes++
		s.logf("wipe %s", nd.name)
	}
	s.logf("crash %s (power cut %v, durable %d)", nd.name, powerCut, nd.log.DurableOffset())
	for _, o := range s.nodes {
		if o != nd {
			s.cut(nd.name, o.name)
		}
	}
}

// controllerStep decides the oldest proposal by CAS.
func (s *sim) controllerStep() {
	if len(s.props) == 0 {
		return
	}
	pr := s.props[0]
	s.props = s.props[1:]
	err := CheckAlterISR(s.ctl, pr.p.Epoch, pr.p.Version, pr.p.ISR)
	if err == nil {
		for _, n := range s.ctl.ISR {
			if !slices.Contains(pr.p.ISR, n) {
				s.shrinks++
			}
		}
		if len(pr.p.ISR) > len(s.ctl.ISR) {
			s.expands++
		}
		ids := pr.p.StorageIDs
		if s.noStorage {
			ids = nil
		}
		s.ctl = ApplyAlterISR(s.ctl, pr.p.ISR, ids)
		s.logf("controller: isr %v v%d ids %v", s.ctl.ISR, s.ctl.Version, s.ctl.StorageIDs)
		return
	}
	s.logf("controller refuses %s: %v", pr.node, err)
	if nd := s.node(pr.node); nd.up && nd.leader == pr.from {
		nd.leader.ProposalDone(err)
	}
}

// placementTo delivers the controller's current placement to nd.
func (s *sim) placementTo(nd *simNode) {
	if nd.known.Version >= s.ctl.Version {
		return
	}
	p := s.ctl
	p.ISR, p.Replicas, p.StorageIDs = slices.Clone(p.ISR), slices.Clone(p.Replicas), maps.Clone(p.StorageIDs)
	nd.known = p
	if !nd.up {
		return
	}
	nd.lease = true // it hears from the metadata group again
	s.logf("placement v%d e%d leader %s isr %v to %s", p.Version, p.Epoch, p.Leader, p.ISR, nd.name)
	switch {
	case nd.leader != nil && nd.leader.SetPlacement(p, s.now):
	case nd.mirror != nil && nd.mirror.SetPlacement(p):
	default:
		s.start(nd)
	}
}

// elect moves leadership the way the controller does: the old leader's
// lease is gone first (its session expired, or it is cut from the
// metadata majority), then an in-sync member is chosen.
func (s *sim) elect() {
	old := s.node(s.ctl.Leader)
	old.lease = false
	live := func(n string) bool { return s.node(n).up }
	durable := map[string]uint64{}
	var storage map[string]string
	if s.rng.IntN(2) == 0 {
		// The controller knows the nodes' current StorageIDs half of the
		// time; otherwise a wiped leader's own refusal must keep it out.
		storage = map[string]string{}
	}
	for _, nd := range s.nodes {
		durable[nd.name] = nd.log.DurableOffset()
		if storage != nil {
			storage[nd.name] = nd.log.StorageID()
		}
	}
	np, ok := ElectLeaderStorage(s.ctl, live, durable, storage)
	if !ok {
		s.logf("election: no live in-sync member (isr %v)", s.ctl.ISR)
		return
	}
	if !slices.Contains(s.ctl.ISR, np.Leader) {
		s.fail("unclean election of %s, isr %v", np.Leader, s.ctl.ISR)
	}
	for _, n := range s.ctl.ISR {
		if !slices.Contains(np.ISR, n) && n != s.ctl.Leader {
			s.fail("election removed %s from the in-sync set", n)
		}
	}
	s.elections++
	s.ctl = np
	s.props = nil // proposals of the old epoch would be refused anyway
	s.logf("controller: elect %s e%d isr %v", np.Leader, np.Epoch, np.ISR)
}

// check runs the invariants of doc.go after a step.
func (s *sim) check() {
	for _, nd := range s.nodes {
		if nd.up && nd.leader != nil && nd.leader.HW() > nd.hw {
			s.checkCommit(nd)
		}
	}
	for _, nd := range s.nodes {
		if nd.up && nd.mirror != nil {
			c := nd.mirror.Committed()
			if c > nd.log.DurableOffset() {
				s.fail("invariant 3: mirror %s reports committed %d above its durable %d", nd.name, c, nd.log.DurableOffset())
			}
			for o := nd.mc + 1; o <= c; o++ {
				if !s.holds(nd.log, o) || o > s.maxCommit {
					s.fail("mirror %s reports %d committed, but it is not the committed record (max committed %d)", nd.name, o, s.maxCommit)
					break
				}
			}
			nd.mc = max(nd.mc, c)
		}
	}
}

// checkISRLogs is invariant 4: every member of the committed in-sync set
// holds every committed offset with the committed record. It reads whole
// logs, so the simulator runs it every few steps, not after each one.
//
// A member whose log is not the copy the placement recorded (wiped) is not
// counted in sync (Placement.StorageIDs); without recorded IDs (noStorage,
// the rule broken on purpose) wiped members are skipped here too, so that
// the damage shows where it matters: a wiped leader losing commits
// (invariant 1).
func (s *sim) checkISRLogs() {
	for _, n := range s.ctl.ISR {
		nd := s.node(n)
		if storageDiffers(s.ctl, n, nd.log.StorageID()) || (s.noStorage && nd.wiped) {
			continue
		}
		for o := nd.log.FirstOffset(); o <= s.maxCommit; o++ {
			if o > nd.log.LastOffset() || !s.holds(nd.log, o) {
				s.fail("invariant 4: in-sync %s lacks committed offset %d (last %d, max committed %d)",
					n, o, nd.log.LastOffset(), s.maxCommit)
				return
			}
		}
	}
}

// checkCommit records what a leader newly committed and checks the commit
// rule against the controller's view (invariant 2): a leader of an old
// epoch commits nothing, and every member of the committed in-sync set
// holds the commit durably.
func (s *sim) checkCommit(nd *simNode) {
	l := nd.leader
	hw := l.HW()
	if l.Placement().Epoch != s.ctl.Epoch {
		s.fail("invariant 2: %s of epoch %d committed %d while the controller is at epoch %d", nd.name, l.Placement().Epoch, hw, s.ctl.Epoch)
	}
	for _, n := range s.ctl.ISR {
		if d := s.node(n).log.DurableOffset(); d < hw {
			s.fail("invariant 2: %s (placement %+v, previous hw %d) committed %d but in-sync %s is durable only to %d; mirrors %+v",
				nd.name, l.Placement(), nd.hw, hw, n, d, l.MirrorStatus(s.now))
		}
	}
	nd.log.Read(nd.hw+1, 1<<30, func(r Record) bool {
		if r.Offset > hw {
			return false
		}
		if old, ok := s.committed[r.Offset]; ok && (old.Epoch != r.Epoch || string(old.Data) != string(r.Data)) {
			s.fail("invariant 1: offset %d committed twice with different records (e%d %q, e%d %q)",
				r.Offset, old.Epoch, old.Data, r.Epoch, r.Data)
		}
		if _, ok := s.committed[r.Offset]; !ok {
			s.commitEp[r.Offset] = l.Placement().Epoch
		}
		s.committed[r.Offset] = r
		return true
	})
	s.logf("%s commits %d", nd.name, hw)
	nd.hw = hw
	s.maxCommit = max(s.maxCommit, hw)
}
