package replica

import "fmt"

// MsgType is a replication protocol message (design §6.2).
type MsgType uint8

const (
	// MsgFollow (mirror → leader): Epoch is the mirror's known epoch,
	// LastEpoch the last epoch in its log, LEO its last offset.
	MsgFollow MsgType = iota + 1
	// MsgStart (leader → mirror): truncate after TruncateTo, then expect
	// APPENDs from StartAt (TruncateTo+1, or the leader's FirstOffset when it
	// reclaimed what follows TruncateTo); HW is the leader's high watermark.
	MsgStart
	// MsgAppend (leader → mirror): Records continue PrevOffset.
	MsgAppend
	// MsgAck (mirror → leader): cumulative Written and Durable offsets.
	MsgAck
	// MsgReject (mirror → leader): Reason; Written is the mirror's LEO
	// (for RejectGap).
	MsgReject
	// MsgHeartbeat (leader → mirror): HW when idle.
	MsgHeartbeat
)

// RejectReason says why a mirror refused a message.
type RejectReason uint8

const (
	RejectStaleEpoch RejectReason = iota + 1
	RejectGap
	RejectDiskFull
	RejectStorageMismatch
)

func (r RejectReason) String() string {
	switch r {
	case RejectStaleEpoch:
		return "staleEpoch"
	case RejectGap:
		return "gap"
	case RejectDiskFull:
		return "diskFull"
	case RejectStorageMismatch:
		return "storageMismatch"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Msg is one protocol message of one queue between two nodes. Which fields
// are set depends on Type (see the MsgType constants).
type Msg struct {
	Type     MsgType
	Queue    string
	From, To string
	Epoch    uint64

	LastEpoch uint64       // FOLLOW
	LEO       uint64       // FOLLOW
	StorageID string       // FOLLOW
	History   []EpochStart // FOLLOW: the mirror's whole epoch history (small)

	TruncateTo uint64 // START
	StartAt    uint64 // START: the first offset the leader will send
	HW         uint64 // START, APPEND, HEARTBEAT

	PrevOffset uint64   // APPEND
	Compact    uint64   // APPEND, HEARTBEAT: the owner settled everything below it
	Records    []Record // APPEND

	Written, Durable uint64 // ACK; Written also in REJECT

	Reason RejectReason // REJECT
}

func (m Msg) String() string {
	switch m.Type {
	case MsgFollow:
		return fmt.Sprintf("FOLLOW{%s→%s e%d last e%d leo %d}", m.From, m.To, m.Epoch, m.LastEpoch, m.LEO)
	case MsgStart:
		return fmt.Sprintf("START{%s→%s e%d trunc %d hw %d}", m.From, m.To, m.Epoch, m.TruncateTo, m.HW)
	case MsgAppend:
		return fmt.Sprintf("APPEND{%s→%s e%d prev %d n %d hw %d}", m.From, m.To, m.Epoch, m.PrevOffset, len(m.Records), m.HW)
	case MsgAck:
		return fmt.Sprintf("ACK{%s→%s e%d w %d d %d}", m.From, m.To, m.Epoch, m.Written, m.Durable)
	case MsgReject:
		return fmt.Sprintf("REJECT{%s→%s e%d %v w %d}", m.From, m.To, m.Epoch, m.Reason, m.Written)
	case MsgHeartbeat:
		return fmt.Sprintf("HEARTBEAT{%s→%s e%d hw %d}", m.From, m.To, m.Epoch, m.HW)
	}
	return fmt.Sprintf("msg(%d)", m.Type)
}

// agreeUpTo is the last offset at which two logs hold the same records,
// from their epoch histories and last offsets. One leader writes at most
// one record per offset in its epoch, so two logs agree up to an offset
// exactly when the epochs of every offset up to it agree. Comparing whole
// histories (not only the mirror's last epoch, as Kafka's first version
// did) also finds a divergence in an older epoch (the problem KIP-279 fixed
// with repeated OffsetForLeaderEpoch rounds).
func agreeUpTo(lh []EpochStart, lleo uint64, mh []EpochStart, mleo uint64) uint64 {
	k := 0
	for k < len(lh) && k < len(mh) && lh[k] == mh[k] {
		k++
	}
	var end uint64
	switch {
	case k < len(lh) && k < len(mh):
		end = min(lh[k].Start, mh[k].Start) - 1
	case k < len(lh):
		end = lh[k].Start - 1
	case k < len(mh):
		end = mh[k].Start - 1
	default:
		end = lleo
	}
	return min(end, lleo, mleo)
}
