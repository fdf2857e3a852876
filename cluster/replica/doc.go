// Package replica is the per-queue replication protocol of a Warren
// cluster: a queue's log shipped from its leader to its mirrors, with
// leader epochs, an in-sync set changed only through the metadata Raft
// group (the Controller), a commit rule, truncation of uncommitted tails
// and catch-up. It knows records and offsets, not AMQP: the queue types in
// package server encode their operations as the records' data.
//
// api.go is the contract the queue types build on (Log, Placement,
// Controller, Handler, Manager, Replica). The design it follows is
// ../shared/reference/cluster-design.md §6.2.
//
// # What is built
//
//   - Logs: MemLog (memory; PowerCut drops what was not synced, Wipe gives a
//     new StorageID) and FileLog (msgstore's segment log; Kind in Flags,
//     epoch in Properties; the epoch history in its own fsynced file,
//     written before a new epoch's first record; storage.id per directory).
//   - The protocol as two deterministic state machines, Leader and Mirror
//     (no goroutines, no sockets, time passed in), and the controller's pure
//     helpers ElectLeader and CheckAlterISR.
//   - The Manager: one connection per node pair (the node whose name sorts
//     first dials, with back-off; the other serves it via ServeConn),
//     multiplexed by queue, length-prefixed binary frames (frame.go), one
//     writer goroutine per connection; one goroutine per replica running its
//     state machine, with one Sync per step while the writers send (group
//     commit) and Handler.Committed in order. A single-replica placement
//     needs no connection: commit = local durable (+ lease, MinISR).
//
// # Messages
//
// FOLLOW{epoch, lastEpoch, LEO, storageID, history} → START{epoch,
// truncateTo, startAt, HW}; APPEND{epoch, prevOffset, HW, compact, records};
// ACK{epoch, written, durable} (cumulative, after each group commit);
// REJECT{staleEpoch|gap|diskFull|storageMismatch, LEO}; and, per node
// pair every Heartbeat, one heartbeat frame listing (queue, epoch, HW,
// compact) for every queue this node leads with a mirror on the other
// (Ra's lesson: no per-queue timers or frames). The receiving manager
// hands a queue's line to its replica as a HEARTBEAT only when it differs
// from the last one it delivered on that connection, so an idle pair
// wakes no replica.
//
// # Invariants (checked by the property tests, sim_*_test.go)
//
//  1. Every committed offset (any leader's HW at any time) is in the log of
//     every leader of a later epoch, with the same record.
//  2. The in-sync set only shrinks through a committed controller change:
//     whenever a leader's HW reaches h, its epoch is the controller's and
//     every member of the controller's committed in-sync set has h durable.
//     A leader keeps requiring a mirror it wants out until the placement
//     without it arrives, and counts a proposed addition at once (maximal
//     ISR) until a placement decides it.
//  3. A mirror never reports Committed above its own durable offset.
//  4. Every member of the committed in-sync set holds every committed
//     offset, with the committed record; so all of them agree on every
//     offset up to the highest committed one.
//
// What makes them hold:
//
//   - Commit rule: every member of the maximal ISR durable ≥ o (acknowledged
//     in this epoch, after START), |ISR| ≥ MinISR, lease valid at that time.
//   - Fencing: a mirror refuses messages of an epoch below its own
//     (REJECT staleEpoch, which fences the sender) and ignores newer ones
//     until their placement arrives.
//   - Truncation: FOLLOW carries the mirror's whole epoch history; the
//     leader answers with the last offset where both histories agree (one
//     round, and divergence in an older epoch is found too, the KIP-279
//     problem). A START answering an older FOLLOW (the mirror lost records
//     since) is ignored. An empty mirror starts only where START said.
//   - Epochs: a leader syncs its KindEpochStart before anything of the
//     epoch leaves the node, and refuses an epoch its log already has after
//     a restart (ErrRestartedLeader): with a power cut it could otherwise
//     write different records at offsets its mirrors hold, in the same
//     epoch. The controller must then elect again (ElectLeader re-elects the
//     same node in a new epoch when it is the only candidate), as Kafka's
//     controller does on a broker's new epoch (KIP-380).
//   - Elections only among live in-sync members (never unclean).
//   - Storage IDs: an in-sync member whose log's StorageID is not the one
//     the placement recorded (Placement.StorageIDs; a wiped directory) is
//     not counted in sync: it refuses to lead (ErrStorageMismatch),
//     ElectLeaderStorage skips it, a leader hearing its FOLLOW proposes it
//     out, and it is added back under its new ID once caught up. Without
//     this a wiped node could be elected with an empty log (RabbitMQ
//     #15725). Invariant 4 is checked for the counted members.
//
// The simulator drives 3–5 replicas through thousands of seeded schedules:
// appends, syncs, ticks, delivery in order per pair or (chaos mode) in any
// order with drops and duplicates, connection cuts, crashes with and
// without power cut, restarts, controller CAS, elections and lease loss,
// then heals and requires progress. Breaking a rule on purpose makes it
// fail: counting a mirror's written instead of durable, electing outside
// the in-sync set, reporting a mirror's HW uncapped, dropping a proposed
// addition before its placement, truncating by the last epoch only,
// committing without a lease, leading an epoch again after a restart,
// letting a wiped log lead or keeping it in sync under its new StorageID.
// TestReplicaProtocolWipeNeedsStorageIDs runs the schedules (which wipe
// logs) with a controller that records no StorageIDs and requires them to
// find a lost commit.
//
// # Caveats
//
//   - Catch-up runs on the live path: a far-behind mirror is fed from the
//     leader's log by the replica goroutine within the window (1,024 records,
//     8 MiB, a quarter per APPEND). There is no separate catch-up connection,
//     state transfer (settled ranges) or per-node catch-up budget yet.
//   - A mirror learns an HW no APPEND carried up to one Heartbeat late
//     (the pair's frame). The frame lists every led queue each time (about
//     15 bytes a queue); each replica still has its own goroutine, woken
//     every half heartbeat for its lag checks and FOLLOW retries.
//   - Storage IDs are recorded in Placement.StorageIDs only by a
//     controller that implements StorageController (the leader proposes
//     them, filling in a first placement's missing ones once each member
//     acknowledged the epoch's start). Until then a wiped member is caught
//     only by a leader that heard its old ID, or by its empty log.
//   - FileLog.DropBefore reclaims whole segments only.
//
// # Durability and the flush policy
//
// FileLog.Sync follows the msgstore flush policy of the log's directory
// (msgstore.Config.Flush). Under fsync (the default, and what the
// invariants above assume) "durable" — what a mirror acknowledges and the
// commit rule counts — means on stable storage. Under interval, messages
// and os it means written to the operating system: Sync makes no fsync
// (msgstore fsyncs every FlushInterval, every FlushMessages records, or
// only when a segment is sealed), except after a record that starts a new
// epoch, which is always fsynced so a restarted leader still finds its
// epoch (ErrRestartedLeader).
//
// What that loses: a process crash, or a power cut of fewer nodes than the
// in-sync set, loses nothing committed as long as the controller elects a
// node that kept power (a node that lost power comes back with a shorter
// log under the same StorageID and cannot tell). A coordinated power cut
// (every in-sync node at once: one rack, one power feed) loses every
// commit not yet fsynced on any of them: up to FlushInterval of commits
// under interval, up to FlushMessages records under messages, and under os
// whatever the kernel had not written back (by default up to about 30 s,
// vm.dirty_expire_centisecs), and publishers were confirmed for all of it.
//   - A sick leader does not shrink its mirrors (KIP-537): while its own
//     Sync has been running, or its sends to every mirror have been queued
//     or writing, for longer than LagTimeout, it proposes no shrink for lag
//     or a lost connection, reports ErrLeaderStalled in Status.Blocked and
//     calls ResignHandler.ShouldResign once (from the manager's watchdog,
//     one goroutine per node, since a stuck Sync blocks the replica's own
//     goroutine). A leader whose Append or Sync fails with ENOSPC takes no
//     more appends (ErrDiskFull), keeps shipping what its log holds and
//     reports the same way, instead of failing; other log errors still
//     fail the replica (FailureHandler). Moving leadership is the owner's
//     and controller's job. A send stall that is total (no byte moves) is
//     ended sooner by the mirrors' idle timeout (4 heartbeats), and the
//     disconnect then shrinks them as before: only a slow, still-moving
//     link reaches the backlog rule.
package replica
