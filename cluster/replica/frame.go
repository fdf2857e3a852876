package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frames on a replication connection (one per node pair, both directions):
//
//	length  uint32   bytes after it
//	type    uint8    0: ping (no payload); 0xff: the pair's heartbeat;
//	                 else a MsgType
//	payload          the message's fields as uvarints and length-prefixed bytes
//
// The pair's heartbeat, written every Config.Heartbeat, lists every queue
// this node leads with a mirror on the other: count, then per queue its
// name, epoch, HW and compaction point. It is the liveness signal too.
// From and To are the connection's ends and are not sent.
const (
	framePing       = 0
	frameHeartbeats = 0xff
	maxFrameBytes   = 1 << 30
)

// hbEntry is one queue's line in the pair's heartbeat frame.
type hbEntry struct{ epoch, hw, compact uint64 }

// appendHeartbeats appends the heartbeat frame listing hb to dst.
func appendHeartbeats(dst []byte, hb map[string]hbEntry) []byte {
	start := len(dst)
	e := encoder{b: append(dst, 0, 0, 0, 0, frameHeartbeats)}
	e.u(uint64(len(hb)))
	for q, h := range hb {
		e.s([]byte(q))
		e.u(h.epoch)
		e.u(h.hw)
		e.u(h.compact)
	}
	binary.BigEndian.PutUint32(e.b[start:], uint32(len(e.b)-start-4))
	return e.b
}

// decodeHeartbeats calls fn for each line of a heartbeat frame's payload.
func decodeHeartbeats(p []byte, fn func(queue []byte, h hbEntry)) error {
	d := decoder{b: p}
	n := d.u()
	if n > uint64(len(p)) {
		return errFrame
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		q := d.s()
		h := hbEntry{epoch: d.u(), hw: d.u(), compact: d.u()}
		if d.err == nil {
			fn(q, h)
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return fmt.Errorf("%w: heartbeat frame", errFrame)
	}
	return nil
}

var errFrame = errors.New("replica: malformed frame")

type encoder struct{ b []byte }

func (e *encoder) u(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) s(v []byte) { e.u(uint64(len(v))); e.b = append(e.b, v...) }

// appendFrame appends m's frame to dst.
func appendFrame(dst []byte, m *Msg) []byte {
	start := len(dst)
	e := encoder{b: append(dst, 0, 0, 0, 0, byte(m.Type))}
	e.s([]byte(m.Queue))
	for _, v := range []uint64{m.Epoch, m.LastEpoch, m.LEO, m.TruncateTo, m.StartAt, m.HW, m.PrevOffset, m.Compact, m.Written, m.Durable, uint64(m.Reason)} {
		e.u(v)
	}
	e.s([]byte(m.StorageID))
	e.u(uint64(len(m.History)))
	for _, h := range m.History {
		e.u(h.Epoch)
		e.u(h.Start)
	}
	e.u(uint64(len(m.Records)))
	for _, r := range m.Records {
		e.u(r.Offset)
		e.u(r.Epoch)
		e.u(uint64(r.Kind))
		e.s(r.Data)
	}
	binary.BigEndian.PutUint32(e.b[start:], uint32(len(e.b)-start-4))
	return e.b
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) u() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err, d.b = errFrame, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) s() []byte {
	n := d.u()
	if n > uint64(len(d.b)) {
		d.err, d.b = errFrame, nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// decodeMsg decodes a frame's type and payload. Records' data alias p.
func decodeMsg(typ byte, p []byte) (Msg, error) {
	d := decoder{b: p}
	m := Msg{Type: MsgType(typ)}
	m.Queue = string(d.s())
	for _, v := range []*uint64{&m.Epoch, &m.LastEpoch, &m.LEO, &m.TruncateTo, &m.StartAt, &m.HW, &m.PrevOffset, &m.Compact, &m.Written, &m.Durable} {
		*v = d.u()
	}
	m.Reason = RejectReason(d.u())
	m.StorageID = string(d.s())
	nh := d.u()
	for i := uint64(0); i < nh && d.err == nil; i++ {
		m.History = append(m.History, EpochStart{Epoch: d.u(), Start: d.u()})
	}
	nr := d.u()
	if nr > uint64(len(p)) {
		return m, errFrame
	}
	for i := uint64(0); i < nr && d.err == nil; i++ {
		m.Records = append(m.Records, Record{Offset: d.u(), Epoch: d.u(), Kind: Kind(d.u()), Data: d.s()})
	}
	if d.err != nil || len(d.b) != 0 || m.Type < MsgFollow || m.Type > MsgHeartbeat {
		return m, fmt.Errorf("%w: type %d", errFrame, typ)
	}
	return m, nil
}

// readFrame reads one frame; ping frames return ok=false with no error,
// heartbeat frames too, after calling hb for each line (the queue name
// aliases buf).
func readFrame(r *bufio.Reader, buf []byte, hb func(queue []byte, h hbEntry)) (Msg, bool, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return Msg{}, false, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 1 || n > maxFrameBytes {
		return Msg{}, false, buf, fmt.Errorf("%w: length %d", errFrame, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return Msg{}, false, buf, err
	}
	switch buf[0] {
	case framePing:
		return Msg{}, false, buf, nil
	case frameHeartbeats:
		return Msg{}, false, buf, decodeHeartbeats(buf[1:], hb)
	}
	// Records keep their data beyond the next read: copy the payload out.
	m, err := decodeMsg(buf[0], append([]byte(nil), buf[1:]...))
	return m, true, buf, err
}
