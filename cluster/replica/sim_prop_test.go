package replica

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// heal ends a schedule: every node up with its lease, every placement
// delivered, messages in order; then the queue must make progress: the
// leader commits everything it holds (liveness after faults end), unless
// no in-sync member survived (the queue is down by design).
func (s *sim) heal() {
	s.chaos = false
	for _, nd := range s.nodes {
		if !nd.up {
			nd.up = true
			nd.log.Reopen()
			s.start(nd)
		}
		nd.lease = true
	}
	for round := 0; round < 400 && s.err == nil; round++ {
		for len(s.props) > 0 {
			s.controllerStep()
		}
		for _, nd := range s.nodes {
			s.placementTo(nd)
			s.syncAt(nd)
		}
		for len(s.net) > 0 && s.err == nil {
			i := s.pickMsg()
			m := s.net[i]
			s.net = append(s.net[:i], s.net[i+1:]...)
			s.deliver(m)
			s.check()
		}
		s.tick(300 * time.Millisecond)
		ld := s.node(s.ctl.Leader)
		if ld.leader != nil && ld.leader.HW() == ld.log.LastOffset() && len(s.ctl.ISR) == len(s.ctl.Replicas) && s.storageCurrent() {
			s.check()
			s.checkISRLogs()
			return
		}
		if ld.leader == nil && round > 20 {
			s.elect()
		}
	}
	ld := s.node(s.ctl.Leader)
	if s.err == nil && ld.leader != nil {
		s.fail("no progress after healing: leader %s hw %d last %d, isr %v of %v, ids %v, mirrors %+v", ld.name, ld.leader.HW(), ld.log.LastOffset(), s.ctl.ISR, s.ctl.Replicas, s.ctl.StorageIDs, ld.leader.MirrorStatus(s.now))
	}
	s.check()
	s.checkISRLogs()
}

// storageCurrent reports whether the placement records every in-sync
// member's current StorageID (a wiped member was shrunk out and added back
// under its new one).
func (s *sim) storageCurrent() bool {
	if s.noStorage {
		return true
	}
	for _, n := range s.ctl.ISR {
		if s.ctl.StorageIDs[n] != s.node(n).log.StorageID() {
			return false
		}
	}
	return true
}

func runSim(seed uint64, chaos bool, steps int) *sim {
	return runSimWith(seed, chaos, false, steps)
}

func runSimWith(seed uint64, chaos, noStorage bool, steps int) *sim {
	s := newSim(seed, 3+int(seed%3), chaos, noStorage)
	for i := 0; i < steps && s.err == nil; i++ {
		s.step()
		if i%25 == 0 {
			s.checkISRLogs()
		}
	}
	if s.err == nil {
		s.checkISRLogs()
	}
	if s.err == nil {
		s.heal()
	}
	return s
}

// TestReplicaProtocolProperties runs thousands of seeded random schedules of
// the protocol state machines against the invariants in doc.go.
// REPLICA_SIM_SEEDS overrides the number of schedules, REPLICA_SIM_SEED runs one.
func TestReplicaProtocolProperties(t *testing.T) {
	seeds := 2500
	if v, err := strconv.Atoi(os.Getenv("REPLICA_SIM_SEEDS")); err == nil {
		seeds = v
	}
	first := uint64(1)
	if v, err := strconv.ParseUint(os.Getenv("REPLICA_SIM_SEED"), 10, 64); err == nil {
		first, seeds = v, 1
	}
	var commits, elections, shrinks, expands, wipes int
	for seed := first; seed < first+uint64(seeds); seed++ {
		for _, chaos := range []bool{false, true} {
			s := runSim(seed, chaos, 400)
			if s.err != nil {
				t.Fatalf("seed %d (chaos %v, %d nodes): %v", seed, chaos, len(s.nodes), s.err)
			}
			commits += int(s.maxCommit)
			elections += s.elections
			shrinks += s.shrinks
			expands += s.expands
			wipes += s.wipes
		}
	}
	// The schedules must exercise what they claim to; a generator that never
	// elects or shrinks would pass vacuously.
	t.Logf("%d schedules: %d offsets committed, %d elections, %d shrinks, %d expansions, %d wipes", 2*seeds, commits, elections, shrinks, expands, wipes)
	if seeds >= 100 && (elections < seeds/10 || shrinks < seeds/10 || expands < seeds/10 || commits < seeds*10 || wipes < seeds/10) {
		t.Fatalf("schedules too tame: %d commits, %d elections, %d shrinks, %d expansions, %d wipes", commits, elections, shrinks, expands, wipes)
	}
}

// TestReplicaProtocolWipeNeedsStorageIDs breaks the storage-ID rule on
// purpose (the controller records no StorageIDs) and requires the
// simulator to find what the rule prevents: a wiped in-sync member elected
// and losing committed records (invariant 1). It shows that the schedules
// with wipes can catch the bug the rule fixes.
func TestReplicaProtocolWipeNeedsStorageIDs(t *testing.T) {
	failed := 0
	for seed := uint64(1); seed <= 600 && failed == 0; seed++ {
		for _, chaos := range []bool{false, true} {
			s := runSimWith(seed, chaos, true, 400)
			if s.err != nil && strings.Contains(s.err.Error(), "invariant 1") {
				t.Logf("seed %d (chaos %v): %.200s", seed, chaos, s.err)
				failed++
				break
			}
		}
	}
	if failed == 0 {
		t.Fatal("without StorageIDs in placements no schedule lost a committed record to a wiped leader")
	}
}
