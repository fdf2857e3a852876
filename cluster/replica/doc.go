// Package replica is the per-queue replication protocol of a Warren
// cluster: a queue's log shipped from its leader to its mirrors, with
// leader epochs, an in-sync set changed only through the metadata Raft
// group (the Controller), a commit rule, truncation of uncommitted tails
// and catch-up. It knows records and offsets, not AMQP: the queue types in
// package server encode their operations as the records' data.
//
// api.go is the contract the queue types build on (Log, Placement,
// Controller, Handler, Manager, Replica). The design it follows is
// ../shared/reference/cluster-design.md §6.2; the invariants the
// implementation keeps are listed here as they are built and tested.
package replica
