package amqp

import (
	"encoding/binary"
	"fmt"
)

// Property flag bits of the basic class, in the order the spec lists them.
const (
	FlagContentType     uint16 = 0x8000
	FlagContentEncoding uint16 = 0x4000
	FlagHeaders         uint16 = 0x2000
	FlagDeliveryMode    uint16 = 0x1000
	FlagPriority        uint16 = 0x0800
	FlagCorrelationID   uint16 = 0x0400
	FlagReplyTo         uint16 = 0x0200
	FlagExpiration      uint16 = 0x0100
	FlagMessageID       uint16 = 0x0080
	FlagTimestamp       uint16 = 0x0040
	FlagType            uint16 = 0x0020
	FlagUserID          uint16 = 0x0010
	FlagAppID           uint16 = 0x0008
	FlagClusterID       uint16 = 0x0004
)

// Properties are the 14 basic content properties. Flags records which are present;
// a zero value of a present property is still written.
type Properties struct {
	Flags           uint16
	ContentType     string
	ContentEncoding string
	Headers         Table
	DeliveryMode    uint8
	Priority        uint8
	CorrelationID   string
	ReplyTo         string
	Expiration      string
	MessageID       string
	Timestamp       uint64
	Type            string
	UserID          string
	AppID           string
	ClusterID       string
}

// ContentHeader is a decoded content header frame payload. Props aliases the
// frame: it is the raw property flags and list, which the broker forwards as
// it came and decodes only when a feature needs a property.
type ContentHeader struct {
	ClassID  uint16
	BodySize uint64
	Props    []byte
}

// ParseContentHeader splits a content header frame's payload.
func ParseContentHeader(p []byte) (ContentHeader, error) {
	if len(p) < 14 {
		return ContentHeader{}, fmt.Errorf("content header: %w", ErrTruncated)
	}
	return ContentHeader{
		ClassID:  binary.BigEndian.Uint16(p),
		BodySize: binary.BigEndian.Uint64(p[4:]),
		Props:    p[12:],
	}, nil
}

// AppendContentHeader appends a content header payload (no frame envelope) for
// class basic with raw property bytes as produced by Properties.AppendTo or
// taken from ParseContentHeader.
func AppendContentHeader(b []byte, bodySize uint64, rawProps []byte) []byte {
	b = append(b, 0, ClassBasic, 0, 0)
	b = appendLonglong(b, bodySize)
	return append(b, rawProps...)
}

// Decode reads property flags and values from raw (as found in ContentHeader.Props).
// Continuation flag words, which basic never uses, are read and their bits ignored.
// Properties absent from raw are cleared; string properties equal to p's current
// values are kept, so a reused struct does not allocate for repeated strings.
func (p *Properties) Decode(raw []byte) error {
	old := *p
	*p = Properties{}
	flags, off, err := readShort(raw, 0)
	if err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	for cont := flags; cont&1 != 0; {
		if cont, off, err = readShort(raw, off); err != nil {
			return fmt.Errorf("properties: %w", err)
		}
	}
	p.Flags = flags &^ 1 &^ 2
	str := func(flag uint16, dst *string, cur string) {
		if err == nil && flags&flag != 0 {
			*dst, off, err = readShortstrInto(raw, off, cur)
		}
	}
	str(FlagContentType, &p.ContentType, old.ContentType)
	str(FlagContentEncoding, &p.ContentEncoding, old.ContentEncoding)
	if err == nil && flags&FlagHeaders != 0 {
		p.Headers, off, err = readTableField(raw, off)
	}
	if err == nil && flags&FlagDeliveryMode != 0 {
		p.DeliveryMode, off, err = readOctet(raw, off)
	}
	if err == nil && flags&FlagPriority != 0 {
		p.Priority, off, err = readOctet(raw, off)
	}
	str(FlagCorrelationID, &p.CorrelationID, old.CorrelationID)
	str(FlagReplyTo, &p.ReplyTo, old.ReplyTo)
	str(FlagExpiration, &p.Expiration, old.Expiration)
	str(FlagMessageID, &p.MessageID, old.MessageID)
	if err == nil && flags&FlagTimestamp != 0 {
		p.Timestamp, off, err = readLonglong(raw, off)
	}
	str(FlagType, &p.Type, old.Type)
	str(FlagUserID, &p.UserID, old.UserID)
	str(FlagAppID, &p.AppID, old.AppID)
	str(FlagClusterID, &p.ClusterID, old.ClusterID)
	if err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	if err := checkEnd(raw, off); err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	return nil
}

// AppendTo appends the property flags and the present values.
func (p *Properties) AppendTo(b []byte) []byte {
	f := p.Flags &^ 3
	b = appendShort(b, f)
	if f&FlagContentType != 0 {
		b = appendShortstr(b, p.ContentType)
	}
	if f&FlagContentEncoding != 0 {
		b = appendShortstr(b, p.ContentEncoding)
	}
	if f&FlagHeaders != 0 {
		b = AppendTable(b, p.Headers)
	}
	if f&FlagDeliveryMode != 0 {
		b = append(b, p.DeliveryMode)
	}
	if f&FlagPriority != 0 {
		b = append(b, p.Priority)
	}
	if f&FlagCorrelationID != 0 {
		b = appendShortstr(b, p.CorrelationID)
	}
	if f&FlagReplyTo != 0 {
		b = appendShortstr(b, p.ReplyTo)
	}
	if f&FlagExpiration != 0 {
		b = appendShortstr(b, p.Expiration)
	}
	if f&FlagMessageID != 0 {
		b = appendShortstr(b, p.MessageID)
	}
	if f&FlagTimestamp != 0 {
		b = appendLonglong(b, p.Timestamp)
	}
	if f&FlagType != 0 {
		b = appendShortstr(b, p.Type)
	}
	if f&FlagUserID != 0 {
		b = appendShortstr(b, p.UserID)
	}
	if f&FlagAppID != 0 {
		b = appendShortstr(b, p.AppID)
	}
	if f&FlagClusterID != 0 {
		b = appendShortstr(b, p.ClusterID)
	}
	return b
}

// PeekFlags returns the property flags of raw property bytes (0 when raw is
// too short), without the continuation bits.
func PeekFlags(raw []byte) uint16 {
	if len(raw) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(raw) &^ 3
}

// PeekDeliveryMode returns the delivery-mode property from raw property bytes
// without decoding the rest, skipping the fields before it. It returns 0 when
// the property is absent or the bytes are malformed.
func PeekDeliveryMode(raw []byte) uint8 {
	off, ok := skipTo(raw, FlagDeliveryMode)
	if !ok || off >= len(raw) {
		return 0
	}
	return raw[off]
}

// PeekPriority returns the priority property from raw property bytes, and
// whether it is present.
func PeekPriority(raw []byte) (uint8, bool) {
	off, ok := skipTo(raw, FlagPriority)
	if !ok || off >= len(raw) {
		return 0, false
	}
	return raw[off], true
}

// skipTo returns the offset of the value of flag within raw (flag must be one of
// content-type … priority) and whether that property is present.
func skipTo(raw []byte, flag uint16) (int, bool) {
	if len(raw) < 2 {
		return 0, false
	}
	flags := binary.BigEndian.Uint16(raw)
	if flags&flag == 0 {
		return 0, false
	}
	// Skip continuation flag words as Decode does, so both agree on lists
	// that carry them.
	off := 2
	for cont := flags; cont&1 != 0; {
		var err error
		if cont, off, err = readShort(raw, off); err != nil {
			return 0, false
		}
	}
	if flags&FlagContentType != 0 && flag != FlagContentType {
		if _, off2, err := readShortstrBytes(raw, off); err == nil {
			off = off2
		} else {
			return 0, false
		}
	}
	if flag == FlagContentType {
		return off, true
	}
	if flags&FlagContentEncoding != 0 && flag != FlagContentEncoding {
		if _, off2, err := readShortstrBytes(raw, off); err == nil {
			off = off2
		} else {
			return 0, false
		}
	}
	if flag == FlagContentEncoding {
		return off, true
	}
	if flags&FlagHeaders != 0 && flag != FlagHeaders {
		n, off2, err := readLong(raw, off)
		if err != nil || uint64(off2)+uint64(n) > uint64(len(raw)) {
			return 0, false
		}
		off = off2 + int(n)
	}
	if flag == FlagHeaders {
		return off, true
	}
	if flags&FlagDeliveryMode != 0 && flag != FlagDeliveryMode {
		off++
	}
	return off, true
}

// CheckProperties validates raw property bytes the way Decode does, without
// allocating, and returns the property flags. The headers table is checked
// for its length only; callers that need the headers decode them anyway.
// The broker uses it on the publish path to skip decoding properties no
// feature reads.
func CheckProperties(raw []byte) (uint16, error) {
	flags, off, err := readShort(raw, 0)
	if err != nil {
		return 0, fmt.Errorf("properties: %w", err)
	}
	for cont := flags; cont&1 != 0; {
		if cont, off, err = readShort(raw, off); err != nil {
			return 0, fmt.Errorf("properties: %w", err)
		}
	}
	flags &^= 3
	for bit := uint16(0x8000); bit > 3 && err == nil; bit >>= 1 {
		if flags&bit == 0 {
			continue
		}
		switch bit {
		case FlagHeaders:
			var n uint32
			if n, off, err = readLong(raw, off); err == nil && uint64(off)+uint64(n) > uint64(len(raw)) {
				err = ErrTruncated
			}
			off += int(n)
		case FlagDeliveryMode, FlagPriority:
			_, off, err = readOctet(raw, off)
		case FlagTimestamp:
			_, off, err = readLonglong(raw, off)
		default: // every other property is a short string
			_, off, err = readShortstrBytes(raw, off)
		}
	}
	if err == nil {
		err = checkEnd(raw, off)
	}
	if err != nil {
		return 0, fmt.Errorf("properties: %w", err)
	}
	return flags, nil
}
