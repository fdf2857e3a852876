package amqp

import (
	"encoding/binary"
	"fmt"
)

// Frame types.
const (
	TypeMethod    = FrameMethod
	TypeHeader    = FrameHeader
	TypeBody      = FrameBody
	TypeHeartbeat = FrameHeartbeat
)

// ProtocolHeader is the 8 bytes a client sends first, and the server answers
// with when it refuses another protocol version.
var ProtocolHeader = []byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}

// FrameOverhead is the bytes a frame adds around its payload: type, channel,
// size and frame-end.
const FrameOverhead = 8

// Frame is one parsed frame. Payload aliases the buffer it was parsed from.
type Frame struct {
	Type    uint8
	Channel uint16
	Payload []byte
}

// ParseFrame parses the first frame in b. It returns n == 0 and a nil error when
// b does not hold a whole frame yet. frameMax bounds the whole frame including
// its overhead; 0 means no bound beyond the 32-bit size field.
func ParseFrame(b []byte, frameMax uint32) (f Frame, n int, err error) {
	if len(b) < 7 {
		return Frame{}, 0, nil
	}
	size := binary.BigEndian.Uint32(b[3:])
	if frameMax > 0 && uint64(size)+FrameOverhead > uint64(frameMax) {
		return Frame{}, 0, fmt.Errorf("%w: %d bytes, frame-max %d", ErrFrameTooLarge, uint64(size)+FrameOverhead, frameMax)
	}
	switch b[0] {
	case TypeMethod, TypeHeader, TypeBody, TypeHeartbeat:
	default:
		return Frame{}, 0, fmt.Errorf("%w: %d", ErrFrameType, b[0])
	}
	total := uint64(size) + FrameOverhead
	if uint64(len(b)) < total {
		return Frame{}, 0, nil
	}
	if b[total-1] != FrameEnd {
		return Frame{}, 0, fmt.Errorf("%w: 0x%02x", ErrFrameEnd, b[total-1])
	}
	return Frame{Type: b[0], Channel: binary.BigEndian.Uint16(b[1:]), Payload: b[7 : 7+size : 7+size]}, int(total), nil
}

// FrameSize returns the total size of the frame starting at b, or 0 when fewer
// than 7 bytes are available. It lets a reader grow its buffer before the whole
// frame has arrived.
func FrameSize(b []byte) int {
	if len(b) < 7 {
		return 0
	}
	return int(binary.BigEndian.Uint32(b[3:])) + FrameOverhead
}

// BeginFrame appends a frame header with a placeholder size and returns the
// buffer and the offset at which the payload starts. Call EndFrame after
// appending the payload.
func BeginFrame(b []byte, typ uint8, channel uint16) ([]byte, int) {
	b = append(b, typ, byte(channel>>8), byte(channel), 0, 0, 0, 0)
	return b, len(b)
}

// EndFrame fills in the size of the frame whose payload starts at start and
// appends the frame-end octet.
func EndFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start-4:], uint32(len(b)-start))
	return append(b, FrameEnd)
}

// AppendMethodFrame appends m as a method frame on channel.
func AppendMethodFrame(b []byte, channel uint16, m Method) []byte {
	b, start := BeginFrame(b, TypeMethod, channel)
	b = m.AppendTo(b)
	return EndFrame(b, start)
}

// AppendHeartbeat appends a heartbeat frame.
func AppendHeartbeat(b []byte) []byte {
	return append(b, TypeHeartbeat, 0, 0, 0, 0, 0, 0, FrameEnd)
}

// AppendContent appends the content header frame and as many body frames as
// frameMax requires for body, on channel.
func AppendContent(b []byte, channel uint16, frameMax uint32, rawProps, body []byte) []byte {
	b, start := BeginFrame(b, TypeHeader, channel)
	b = AppendContentHeader(b, uint64(len(body)), rawProps)
	b = EndFrame(b, start)
	chunk := len(body)
	if frameMax > FrameOverhead {
		chunk = int(frameMax - FrameOverhead)
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		b, start = BeginFrame(b, TypeBody, channel)
		b = append(b, body[:n]...)
		b = EndFrame(b, start)
		body = body[n:]
	}
	return b
}
