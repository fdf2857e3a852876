package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/warrenmq/warren/cluster/replica"
)

// A quorum queue's durable state is its replicated log (package
// cluster/replica); these are the data of its records. Each starts with
// the encoding version, then the operation:
//
//	ENQ       ts (varint, unix ms), ttl (varint, ms or -1), exchange,
//	          routing key, properties, body (each uvarint length + bytes)
//	SETTLE    ids: the ENQ offsets of messages gone for good (acked,
//	          rejected, expired, dropped at the length limit, purged,
//	          delivered to a no-ack consumer)
//	RETURN    ids returned to the queue (nack/reject with requeue, a
//	          consumer's channel closing): each adds one to the delivery count
//	DELIVERED ids delivered to a consumer or basic.get with acks: they
//	          come back redelivered after a failover or restart
//	DISCARD   ids dead-lettered at least once (quorum_dlx.go), each with
//	          its reason: they wait in the log, out of the queue, until
//	          their SETTLE once the dead-letter targets confirmed them
//
// An id list is a count and the ascending ids, delta-encoded. A message is
// named by its ENQ record's offset (its seq in the queue), the same on
// every replica, so a new leader names it as the old one did. (A delivery
// id handed to a channel is the leader's own, with its epoch in the high
// bits: restoreQuorum.) The state the records describe
// is a set (live messages, their counts and flags) and each record is
// idempotent given the ENQ before it, so records of different goroutines
// may reach the log in any order. A purge is written as SETTLE of the ids
// it dropped: the unacknowledged messages survive a purge, so no single
// "up to" offset describes it.

const quorumRecordVersion = 1

// Quorum record operations.
const (
	qrEnq       = 1
	qrSettle    = 2
	qrReturn    = 3
	qrDelivered = 4
	qrDiscard   = 5
)

// Dead-letter reasons as DISCARD records store them, by code.
var quorumReasons = []string{1: reasonRejected, 2: reasonExpired, 3: reasonMaxLen, 4: reasonDeliveryLimit}

func quorumReasonCode(reason string) byte {
	for i, r := range quorumReasons {
		if r == reason && i > 0 {
			return byte(i)
		}
	}
	return 0
}

// quorumEnq is an ENQ record's content.
type quorumEnq struct {
	ts, ttl       int64
	exchange, key string
	props, body   []byte
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// encodeQuorumEnq encodes m's ENQ record.
func encodeQuorumEnq(m *Message, ts, ttl int64) []byte {
	b := make([]byte, 0, 24+len(m.Exchange)+len(m.RoutingKey)+len(m.RawProps)+len(m.Body))
	b = append(b, quorumRecordVersion, qrEnq)
	b = binary.AppendVarint(b, ts)
	b = binary.AppendVarint(b, ttl)
	b = appendBytes(b, []byte(m.Exchange))
	b = appendBytes(b, []byte(m.RoutingKey))
	b = appendBytes(b, m.RawProps)
	return appendBytes(b, m.Body)
}

// encodeQuorumIDs encodes a SETTLE, RETURN or DELIVERED record of ids
// (sorted in place).
func encodeQuorumIDs(op byte, ids []uint64) []byte {
	slices.Sort(ids)
	b := make([]byte, 0, 4+2*len(ids))
	b = append(b, quorumRecordVersion, op)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	prev := uint64(0)
	for _, id := range ids {
		b = binary.AppendUvarint(b, id-prev)
		prev = id
	}
	return b
}

// quorumDiscard is one entry of a DISCARD record.
type quorumDiscard struct {
	id     uint64
	reason string
}

// encodeQuorumDiscard encodes a DISCARD record of ds (sorted in place).
func encodeQuorumDiscard(ds []quorumDiscard) []byte {
	slices.SortFunc(ds, func(a, b quorumDiscard) int { return cmpUint64(a.id, b.id) })
	b := make([]byte, 0, 4+3*len(ds))
	b = append(b, quorumRecordVersion, qrDiscard)
	b = binary.AppendUvarint(b, uint64(len(ds)))
	prev := uint64(0)
	for _, d := range ds {
		b = binary.AppendUvarint(b, d.id-prev)
		b = append(b, quorumReasonCode(d.reason))
		prev = d.id
	}
	return b
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var errQuorumRecord = errors.New("malformed quorum queue record")

// quorumReader decodes one record.
type quorumReader struct {
	b   []byte
	err error
}

func (r *quorumReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errQuorumRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *quorumReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errQuorumRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *quorumReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errQuorumRecord
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *quorumReader) reason() string {
	if len(r.b) == 0 || int(r.b[0]) >= len(quorumReasons) || r.b[0] == 0 {
		r.err = errQuorumRecord
		return ""
	}
	s := quorumReasons[r.b[0]]
	r.b = r.b[1:]
	return s
}

// decodeQuorumRecord splits a record into its operation and either its
// ENQ content or its ids (a DISCARD's reasons in reasons, by index). The
// ENQ's slices alias data.
func decodeQuorumRecord(data []byte) (op byte, enq quorumEnq, ids []uint64, err error) {
	op, enq, ids, _, err = decodeQuorumRecordReasons(data)
	return op, enq, ids, err
}

func decodeQuorumRecordReasons(data []byte) (op byte, enq quorumEnq, ids []uint64, reasons []string, err error) {
	if len(data) < 2 || data[0] != quorumRecordVersion {
		return 0, enq, nil, nil, fmt.Errorf("%w: version %v", errQuorumRecord, data[:min(len(data), 1)])
	}
	op = data[1]
	r := quorumReader{b: data[2:]}
	switch op {
	case qrEnq:
		enq.ts, enq.ttl = r.varint(), r.varint()
		enq.exchange, enq.key = string(r.bytes()), string(r.bytes())
		enq.props, enq.body = r.bytes(), r.bytes()
	case qrSettle, qrReturn, qrDelivered, qrDiscard:
		n := r.uvarint()
		if n > uint64(len(r.b)) {
			return op, enq, nil, nil, errQuorumRecord
		}
		ids = make([]uint64, 0, n)
		prev := uint64(0)
		for range n {
			prev += r.uvarint()
			ids = append(ids, prev)
			if op == qrDiscard {
				reasons = append(reasons, r.reason())
			}
		}
	default:
		return op, enq, nil, nil, fmt.Errorf("%w: operation %d", errQuorumRecord, op)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errQuorumRecord
	}
	return op, enq, ids, reasons, r.err
}

// replayed is one live message rebuilt from the log.
type replayed struct {
	off     uint64
	enq     quorumEnq
	returns uint32
	// seen: it was ever delivered; out: delivered and not returned since
	// (its consumer was lost with the node that served it).
	seen, out bool
	// discarded is the reason of its DISCARD: it waits for its dead-letter
	// targets' confirms, out of the queue ("" when it is in the queue).
	discarded string
}

// replayQuorumLog rebuilds the live messages of a quorum queue from its
// log: ENQ minus SETTLE, RETURN counting deliveries, DELIVERED marking
// those a consumer may have seen. They come back in offset order.
func replayQuorum(l replica.Log) ([]*replayed, error) {
	live := make(map[uint64]*replayed)
	var bad error
	err := l.Read(l.FirstOffset(), 1<<62, func(rec replica.Record) bool {
		if rec.Kind != replica.KindData {
			return true
		}
		op, enq, ids, reasons, derr := decodeQuorumRecordReasons(rec.Data)
		if derr != nil {
			// A record the log kept intact that this code cannot read:
			// refuse to serve a guess of the queue.
			bad = fmt.Errorf("quorum queue log record %d: %w", rec.Offset, derr)
			return false
		}
		switch op {
		case qrEnq:
			live[rec.Offset] = &replayed{off: rec.Offset, enq: enq}
		case qrSettle:
			for _, id := range ids {
				delete(live, id)
			}
		case qrReturn:
			for _, id := range ids {
				if m := live[id]; m != nil {
					m.returns++
					m.out = false
				}
			}
		case qrDelivered:
			for _, id := range ids {
				if m := live[id]; m != nil {
					m.seen, m.out = true, true
				}
			}
		case qrDiscard:
			// A DISCARD after its id's SETTLE (two flushes that reached
			// the log out of order) finds nothing: the targets confirmed.
			for i, id := range ids {
				if m := live[id]; m != nil {
					m.discarded, m.out = reasons[i], false
				}
			}
		}
		return true
	})
	if err = errors.Join(err, bad); err != nil {
		return nil, err
	}
	out := make([]*replayed, 0, len(live))
	for _, m := range live {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *replayed) int { return cmpUint64(a.off, b.off) })
	return out, nil
}
