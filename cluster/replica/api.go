package replica

import (
	"context"
	"errors"
	"net"
	"time"
)

// Kind says what a record is to this package. Only KindData records carry
// the owner's bytes; the others are the protocol's own.
type Kind uint8

const (
	// KindData is an owner record (the queue type's enqueue, settle, ...).
	KindData Kind = 1
	// KindEpochStart is the first record of every leadership (Raft's no-op):
	// committing it commits everything before it in the new leader's log.
	KindEpochStart Kind = 2
)

// Record is one entry of a queue's replicated log. Offsets are dense and
// start at 1; every replica holds the same record at the same offset once
// it is committed. Data is opaque to this package.
type Record struct {
	Offset uint64
	Epoch  uint64 // the leader epoch that appended it
	Kind   Kind
	Data   []byte
}

// EpochStart is one entry of a replica's epoch history: the first offset
// appended under an epoch.
type EpochStart struct {
	Epoch uint64
	Start uint64
}

// Log is one replica's local copy of a queue's log. It is used by one
// goroutine at a time (the replica's); implementations need no locking of
// their own beyond what Read concurrent with Append requires.
type Log interface {
	// Append writes records whose offsets continue LastOffset. They are
	// not durable until Sync returns. A log that holds no records accepts
	// any first offset above LastOffset (a mirror catching up from a leader
	// that reclaimed its prefix starts where that leader's log starts).
	Append(recs ...Record) error
	// Sync makes everything appended durable (fsync under the fsync flush
	// policy); DurableOffset is LastOffset afterwards.
	Sync() error
	// LastOffset is the offset of the last record (0 when none was ever
	// appended); FirstOffset the lowest one kept (LastOffset+1 when the log
	// holds none).
	LastOffset() uint64
	FirstOffset() uint64
	DurableOffset() uint64
	// Read calls fn for the records from offset from on, in order, up to
	// about maxBytes of data, until fn returns false.
	Read(from uint64, maxBytes int, fn func(Record) bool) error
	// TruncateAfter removes every record above off (a mirror's uncommitted
	// tail) and the epoch history after it.
	TruncateAfter(off uint64) error
	// DropBefore reclaims the records below off (settled, committed prefix).
	DropBefore(off uint64) error
	// Epochs is the epoch history, oldest first.
	Epochs() []EpochStart
	// StorageID names this copy; a wiped or re-created log has a new one.
	StorageID() string
	Close() error
}

// Placement is the controller's record of a queue's replicas. It changes
// only through the metadata Raft group; every node applies the same
// sequence of placements, and Version grows by one with each.
type Placement struct {
	Replicas []string // node names, at most one replica per node
	Leader   string
	Epoch    uint64   // grows with every leader change
	ISR      []string // in-sync replicas, the leader among them
	MinISR   int      // commits stop while |ISR| < MinISR
	Version  uint64
	// StorageIDs is, for in-sync members, the StorageID of the log copy
	// that earned the place (recorded by the controller from the leader's
	// proposals; a member absent or "" is not known yet). A member whose
	// log has another StorageID (a wiped and re-created directory) is not
	// counted in sync: it neither leads (ErrStorageMismatch) nor stays in
	// the set; it catches up and is added back under its new StorageID
	// (RabbitMQ #15725: an empty log must not vote itself into the set).
	StorageIDs map[string]string `json:",omitempty"`
}

// Controller is how a queue's leader asks the metadata group to change the
// in-sync set: a compare-and-set on (Epoch, Version) that the group accepts
// only if both still match and the leader stays in the set. It returns once
// the change is committed (the new Placement then reaches Replica.SetPlacement
// on every node) or refused (ErrStalePlacement).
type Controller interface {
	AlterISR(ctx context.Context, queue string, epoch, version uint64, isr []string) error
}

// StorageController is optionally implemented by a Controller that records
// Placement.StorageIDs: the manager then calls AlterISRStorage instead of
// AlterISR, with the StorageID of every proposed member it knows, and also
// proposes an unchanged in-sync set to record IDs the placement lacks. The
// controller checks the change as for AlterISR (CheckAlterISR) and commits
// ApplyAlterISR's placement.
type StorageController interface {
	AlterISRStorage(ctx context.Context, queue string, epoch, version uint64, isr []string, storageIDs map[string]string) error
}

// Handler is what the queue type above gives the replica of one queue.
// Its methods are called from the replica's goroutine, in order, and must
// not block on the replica.
type Handler interface {
	// Committed reports that every record up to hw is committed: on the
	// leader, durable on every member of the maximal in-sync set while its
	// lease was valid; on a mirror, as last heard from the leader (never
	// above the mirror's own durable offset).
	Committed(hw uint64)
}

// Config is a Manager's configuration. See DefaultConfig.
type Config struct {
	// Node is this node's name.
	Node string
	// Dial opens a replication-class connection to a node (cluster.Node's
	// DialStream in production, loopback TCP in tests).
	Dial func(ctx context.Context, node string) (net.Conn, error)
	// Lease reports whether this node may still commit as a leader: it has
	// had metadata-quorum contact within the lease (5 s).
	Lease func() bool
	// Controller receives in-sync set changes.
	Controller Controller
	// LagTimeout: a mirror whose oldest unacknowledged record is older is
	// proposed out of the in-sync set (5 s).
	LagTimeout time.Duration
	// Heartbeat is the idle heartbeat per node pair (250 ms).
	Heartbeat time.Duration
	// RejoinAfter: a caught-up mirror is proposed back after staying caught
	// up this long (1 s).
	RejoinAfter time.Duration
	// WindowRecords and WindowBytes bound what is in flight to one mirror
	// (1,024 records, 8 MiB).
	WindowRecords int
	WindowBytes   int
}

// Manager owns every replica of this node, the connections to the other
// nodes (one per node pair, multiplexed by queue) and their goroutines.
type Manager interface {
	// Open starts this node's replica of queue with placement p over log:
	// the leader if p.Leader is this node, a mirror otherwise.
	Open(queue string, p Placement, log Log, h Handler) (Replica, error)
	// ServeConn serves an inbound replication connection from node until it
	// closes or the manager shuts down.
	ServeConn(conn net.Conn, node string)
	// Shutdown closes every replica and connection and waits for their
	// goroutines.
	Shutdown() error
}

// Replica is one node's replica of one queue.
type Replica interface {
	// Append adds records with the owner's data on the leader and returns
	// the offset of the last; a commit of it is reported by
	// Handler.Committed. ErrNotLeader elsewhere.
	Append(data ...[]byte) (last uint64, err error)
	// SetPlacement applies a committed placement change: a new epoch
	// makes this replica lead (appending KindEpochStart) or follow the new
	// leader (truncating to what that leader had of its epochs).
	SetPlacement(p Placement)
	// Compact lets the replicas reclaim records below off (the owner has
	// settled them); the leader passes it on to the mirrors.
	Compact(off uint64)
	// Status is the replica's view for operators.
	Status() Status
	// Close stops the replica, leaving its log to the caller.
	Close() error
}

// Status is a replica's state for the management API and metrics.
type Status struct {
	Leader        bool
	Epoch         uint64
	LastOffset    uint64
	DurableOffset uint64
	HW            uint64
	// Mirrors is, on the leader, each mirror's acknowledged offsets.
	Mirrors map[string]MirrorStatus
	// Blocked says why the replica neither leads nor follows, nil when it
	// does: ErrRestartedLeader or ErrStorageMismatch (the controller must
	// elect again), ErrFenced (deposed, waiting for its new placement) or
	// the log error that stopped it; or, on a leader that should resign,
	// ErrLeaderStalled or ErrDiskFull.
	Blocked error
}

// MirrorStatus is what the leader knows of one mirror.
type MirrorStatus struct {
	Written, Durable uint64
	InSync           bool
	Lag              time.Duration // age of its oldest unacknowledged record
}

// Errors.
var (
	ErrNotLeader      = errors.New("replica: not the leader")
	ErrStalePlacement = errors.New("replica: stale placement (epoch or version changed)")
	ErrFenced         = errors.New("replica: fenced by a newer epoch")
	ErrClosed         = errors.New("replica: closed")
	// ErrRestartedLeader: the placement names this node leader of an epoch
	// it already wrote records in before it restarted. It may have lost
	// some that its mirrors hold, so it must not write that epoch again:
	// the controller has to elect again (a new epoch, this node allowed),
	// as Kafka's controller does on a broker's new epoch (KIP-380). The
	// replica waits, refusing appends, until SetPlacement brings one.
	ErrRestartedLeader = errors.New("replica: leader restarted within its epoch; a new epoch is needed")
	// ErrStorageMismatch: the placement names this node leader, but its
	// log's StorageID is not the one the placement recorded for it (the
	// directory was wiped or replaced): it may lack committed records, so
	// it refuses to lead and the controller must elect another member.
	ErrStorageMismatch = errors.New("replica: log's storage id differs from the placement's")
	// ErrLeaderStalled: this leader's own Sync, or its sends to every
	// mirror, have been stuck longer than the lag timeout. It keeps its
	// mirrors in sync (their lag is its fault) and should resign: Status
	// reports it as Blocked and ResignHandler.ShouldResign is called, so the
	// controller moves leadership to a healthy in-sync member.
	ErrLeaderStalled = errors.New("replica: leader stalled on its own fsync or sends; it should resign")
	// ErrDiskFull: the leader's log ran out of space (ENOSPC). It takes no
	// more appends in this leadership; what its log holds is still shipped
	// to the mirrors, so a new leader commits it. Reported like
	// ErrLeaderStalled (Status.Blocked, ResignHandler).
	ErrDiskFull = errors.New("replica: leader's disk is full; it takes no more appends and should resign")
	// ErrOffsetGap: an Append whose records do not continue the log.
	ErrOffsetGap = errors.New("replica: records do not continue the log")
	// ErrCompacted: a Read below the log's FirstOffset.
	ErrCompacted = errors.New("replica: offset below the log's first offset")
)
