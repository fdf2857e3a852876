package replica

import (
	"fmt"
	"maps"
	"slices"
)

// ElectLeader is the controller's choice of a new leader for p when its
// leader is gone (dead, partitioned away, resigned): a live member of the
// in-sync set other than the current leader, the one with the highest
// durable offset (ties: the order of p.Replicas, so the preferred replica
// wins); the current leader itself, in a new epoch, only when it is live
// and the only candidate (a leader that restarted: ErrRestartedLeader). Never an unclean election: with no live in-sync member it returns
// p and false, and the queue is down. The result has Epoch+1, Version+1,
// and the old leader out of the in-sync set when it is not live (it rejoins
// through an expansion once caught up).
func ElectLeader(p Placement, live func(node string) bool, durable map[string]uint64) (Placement, bool) {
	return ElectLeaderStorage(p, live, durable, nil)
}

// ElectLeaderStorage is ElectLeader that also skips every member whose
// current StorageID (storage, as the nodes last reported them; absent:
// unknown) differs from the one p recorded: a wiped copy refuses to lead
// anyway (ErrStorageMismatch), so electing it would only take the queue
// down for another round.
func ElectLeaderStorage(p Placement, live func(node string) bool, durable map[string]uint64, storage map[string]string) (Placement, bool) {
	best := ""
	for _, n := range p.Replicas {
		if n == p.Leader || !slices.Contains(p.ISR, n) || !live(n) || storageDiffers(p, n, storage[n]) {
			continue
		}
		if best == "" || durable[n] > durable[best] {
			best = n
		}
	}
	if best == "" && slices.Contains(p.ISR, p.Leader) && live(p.Leader) && !storageDiffers(p, p.Leader, storage[p.Leader]) {
		best = p.Leader // a restarted or resigning leader that is the only one left
	}
	if best == "" {
		return p, false
	}
	np := p
	np.Replicas = slices.Clone(p.Replicas)
	np.ISR = slices.Clone(p.ISR)
	if !live(p.Leader) {
		np.ISR = slices.DeleteFunc(np.ISR, func(n string) bool { return n == p.Leader })
	}
	np.StorageIDs = maps.Clone(p.StorageIDs)
	np.Leader, np.Epoch, np.Version = best, p.Epoch+1, p.Version+1
	return np, true
}

// storageDiffers reports whether id (a log's StorageID; "" unknown) is
// known to differ from what p recorded for node.
func storageDiffers(p Placement, node, id string) bool {
	want := p.StorageIDs[node]
	return want != "" && id != "" && id != want
}

// ApplyAlterISR is the placement a controller commits for an accepted
// in-sync change (CheckAlterISR passed): isr, Version+1, and the storage
// IDs of the members of isr, ids overriding what cur recorded; members
// that left the set lose their entry (they earn a new one on the way back).
func ApplyAlterISR(cur Placement, isr []string, ids map[string]string) Placement {
	np := cur
	np.Replicas = slices.Clone(cur.Replicas)
	np.ISR = slices.Clone(isr)
	np.Version = cur.Version + 1
	np.StorageIDs = nil
	for _, n := range isr {
		id := ids[n]
		if id == "" {
			id = cur.StorageIDs[n]
		}
		if id != "" {
			if np.StorageIDs == nil {
				np.StorageIDs = make(map[string]string, len(isr))
			}
			np.StorageIDs[n] = id
		}
	}
	return np
}

// CheckAlterISR is the controller's compare-and-set check of a leader's
// in-sync set change: epoch and version must be the current ones, the
// leader must stay in the set, and every member must be a replica, once.
// ErrStalePlacement when epoch or version moved on. The caller commits
// cur with ISR = isr and Version+1.
func CheckAlterISR(cur Placement, epoch, version uint64, isr []string) error {
	if epoch != cur.Epoch || version != cur.Version {
		return fmt.Errorf("%w: asked for epoch %d version %d, placement is at epoch %d version %d",
			ErrStalePlacement, epoch, version, cur.Epoch, cur.Version)
	}
	if !slices.Contains(isr, cur.Leader) {
		return fmt.Errorf("replica: in-sync set %v leaves out the leader %s", isr, cur.Leader)
	}
	for i, n := range isr {
		if !slices.Contains(cur.Replicas, n) {
			return fmt.Errorf("replica: in-sync member %s is not a replica", n)
		}
		if slices.Contains(isr[:i], n) {
			return fmt.Errorf("replica: in-sync member %s named twice", n)
		}
	}
	return nil
}
