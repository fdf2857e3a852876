package queueindex

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Geometry of a segment file. A segment holds SlotsPerSegment slots of SlotSize
// bytes and has no header, so the slot of sequence id n lives in file
// n/SlotsPerSegment at byte (n%SlotsPerSegment)*SlotSize.
const (
	// SlotSize is the size of one slot in bytes.
	SlotSize = 32
	// SlotsPerSegment is the number of slots in one segment file.
	SlotsPerSegment = 4096
	// SegmentSize is the largest size of a segment file in bytes (128 KiB).
	SegmentSize = SlotSize * SlotsPerSegment
)

// Slot status byte values.
const (
	statusEmpty   = 0 // never written: the whole slot is zero
	statusReady   = 1 // appended and not yet settled
	statusSettled = 2 // acked, rejected or purged: a tombstone
)

// Slot flag bits. Bit 2 is reserved for bodies embedded in the queue's own
// store; this version never writes it and, like any unknown bit, treats a slot
// carrying it as corrupt, so an older reader never misreads a newer format.
const (
	flagPersistent = 1 << 0
	flagDelivered  = 1 << 1

	knownFlags = flagPersistent | flagDelivered
)

// Slot field offsets (big endian).
const (
	offStatus   = 0
	offFlags    = 1
	offPriority = 2
	offReserved = 3
	offSize     = 4
	offOffset   = 8
	offPos      = 16
	offExpiry   = 20
	offCRC      = 28
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Entry is what the index stores for one message: where the message store keeps
// its body and the few attributes the queue needs without reading the body.
type Entry struct {
	// Offset is the message store's location of the record (opaque here).
	Offset uint64
	// Pos is the message store's position hint, e.g. a byte position in its
	// segment file (opaque here).
	Pos uint32
	// Size is the body size in bytes; the index sums it for byte counts.
	Size uint32
	// Expiry is the expiry time in Unix milliseconds, or 0 for none.
	Expiry int64
	// Priority is the message priority (0-255).
	Priority uint8
	// Persistent is set for delivery-mode 2 messages.
	Persistent bool
	// Delivered is set once the message has been handed to a consumer, so a
	// redelivery after a restart carries redelivered=true.
	Delivered bool
}

// encodeSlot writes a ready slot for e into b[:SlotSize].
func encodeSlot(b []byte, e Entry) {
	_ = b[SlotSize-1]
	var flags byte
	if e.Persistent {
		flags |= flagPersistent
	}
	if e.Delivered {
		flags |= flagDelivered
	}
	b[offStatus] = statusReady
	b[offFlags] = flags
	b[offPriority] = e.Priority
	b[offReserved] = 0
	binary.BigEndian.PutUint32(b[offSize:], e.Size)
	binary.BigEndian.PutUint64(b[offOffset:], e.Offset)
	binary.BigEndian.PutUint32(b[offPos:], e.Pos)
	binary.BigEndian.PutUint64(b[offExpiry:], uint64(e.Expiry))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[:offCRC], castagnoli))
}

// encodeTombstone writes a settled slot into b[:SlotSize]. A tombstone keeps the
// slot distinguishable from a never-written one, so the highest sequence id
// handed out can be recovered from the files alone.
func encodeTombstone(b []byte) {
	_ = b[SlotSize-1]
	clear(b[:SlotSize])
	b[offStatus] = statusSettled
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[:offCRC], castagnoli))
}

// isZeroSlot reports whether b[:SlotSize] is all zero (a never-written slot).
func isZeroSlot(b []byte) bool {
	_ = b[SlotSize-1]
	return binary.LittleEndian.Uint64(b[0:]) == 0 && binary.LittleEndian.Uint64(b[8:]) == 0 &&
		binary.LittleEndian.Uint64(b[16:]) == 0 && binary.LittleEndian.Uint64(b[24:]) == 0
}

// decodeSlot decodes one slot. It returns the status (statusEmpty, statusReady
// or statusSettled) and, for a ready slot, the entry. A slot that is neither all
// zero nor a well-formed slot with a matching CRC yields an error wrapping
// ErrCorrupt; so does an input shorter than SlotSize.
func decodeSlot(b []byte) (status byte, e Entry, err error) {
	if len(b) < SlotSize {
		return 0, Entry{}, fmt.Errorf("queueindex: slot of %d bytes: %w", len(b), ErrCorrupt)
	}
	if isZeroSlot(b) {
		return statusEmpty, Entry{}, nil
	}
	if got, want := binary.BigEndian.Uint32(b[offCRC:]), crc32.Checksum(b[:offCRC], castagnoli); got != want {
		return 0, Entry{}, fmt.Errorf("queueindex: slot crc %08x, want %08x: %w", got, want, ErrCorrupt)
	}
	switch b[offStatus] {
	case statusSettled:
		return statusSettled, Entry{}, nil
	case statusReady:
	default:
		return 0, Entry{}, fmt.Errorf("queueindex: slot status %d: %w", b[offStatus], ErrCorrupt)
	}
	flags := b[offFlags]
	if flags&^knownFlags != 0 || b[offReserved] != 0 {
		return 0, Entry{}, fmt.Errorf("queueindex: slot flags %#02x reserved %#02x: %w", flags, b[offReserved], ErrCorrupt)
	}
	e = Entry{
		Offset:     binary.BigEndian.Uint64(b[offOffset:]),
		Pos:        binary.BigEndian.Uint32(b[offPos:]),
		Size:       binary.BigEndian.Uint32(b[offSize:]),
		Expiry:     int64(binary.BigEndian.Uint64(b[offExpiry:])),
		Priority:   b[offPriority],
		Persistent: flags&flagPersistent != 0,
		Delivered:  flags&flagDelivered != 0,
	}
	return statusReady, e, nil
}
