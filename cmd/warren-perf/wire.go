package main

// The wire format of the fast client: AMQP 0-9-1 frames, the few methods
// warren-perf sends and receives, and the publish encoding. Everything here
// appends to or slices caller-owned buffers, so the hot paths (encoding a
// publish, parsing a delivery or a confirm) allocate nothing.

import (
	"encoding/binary"
	"fmt"
)

// Frame types and the frame-end octet (AMQP 0-9-1 section 4.2.3).
const (
	frameMethod    = 1
	frameHeader    = 2
	frameBody      = 3
	frameHeartbeat = 8
	frameEnd       = 0xCE
	// frameHeaderLen is type (1) + channel (2) + payload size (4).
	frameHeaderLen = 7
	// frameOverhead is a frame's bytes around its payload.
	frameOverhead = frameHeaderLen + 1
)

// Frame sizes the fast client negotiates.
const (
	// minFrameMax is the protocol's smallest frame_max.
	minFrameMax = 4096
	// clientFrameMax is the largest frame_max the client accepts; the
	// server's proposal is lowered to it (0, "no limit", included). The
	// consumer's read buffer holds at least one frame of this size.
	clientFrameMax = 128 << 10
)

// amqpProtocolHeader opens every AMQP 0-9-1 connection.
var amqpProtocolHeader = []byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}

// methodKey is a method's class id and method id in one comparable value.
type methodKey uint32

func mkey(class, method uint16) methodKey { return methodKey(class)<<16 | methodKey(method) }

// The methods the fast client sends or handles.
var (
	mConnectionStart     = mkey(10, 10)
	mConnectionStartOk   = mkey(10, 11)
	mConnectionTune      = mkey(10, 30)
	mConnectionTuneOk    = mkey(10, 31)
	mConnectionOpen      = mkey(10, 40)
	mConnectionOpenOk    = mkey(10, 41)
	mConnectionClose     = mkey(10, 50)
	mConnectionCloseOk   = mkey(10, 51)
	mConnectionBlocked   = mkey(10, 60)
	mConnectionUnblocked = mkey(10, 61)
	mChannelOpen         = mkey(20, 10)
	mChannelOpenOk       = mkey(20, 11)
	mChannelClose        = mkey(20, 40)
	mChannelCloseOk      = mkey(20, 41)
	mBasicQos            = mkey(60, 10)
	mBasicQosOk          = mkey(60, 11)
	mBasicConsume        = mkey(60, 20)
	mBasicConsumeOk      = mkey(60, 21)
	mBasicCancel         = mkey(60, 30)
	mBasicPublish        = mkey(60, 40)
	mBasicDeliver        = mkey(60, 60)
	mBasicAck            = mkey(60, 80)
	mBasicNack           = mkey(60, 120)
	mConfirmSelect       = mkey(85, 10)
	mConfirmSelectOk     = mkey(85, 11)
)

// classBasic is the basic class id, which content headers carry.
const classBasic = 60

// Reply codes the client sends or tests look for.
const (
	replySuccess  = 200
	replyNotFound = 404
)

// Property flags of the basic class used by the client (the first flag
// word; bit 15 is the first property).
const (
	propHeaders      = 1 << 13
	propDeliveryMode = 1 << 12
	// propContentType and propContentEncoding precede headers on the
	// wire; a parser must skip them to reach the headers.
	propContentType     = 1 << 15
	propContentEncoding = 1 << 14
)

// frame is one parsed frame. payload aliases the read buffer and is valid
// only until the buffer is refilled.
type frame struct {
	typ     byte
	channel uint16
	payload []byte
}

// parseFrame parses the frame at the start of b. It returns the number of
// bytes the frame takes, or 0 and no error when b does not yet hold a
// complete frame. A payload larger than maxPayload, or a missing frame-end
// octet, is an error: the stream cannot be resynchronised after either.
func parseFrame(b []byte, maxPayload int) (frame, int, error) {
	if len(b) < frameHeaderLen {
		return frame{}, 0, nil
	}
	size := binary.BigEndian.Uint32(b[3:7])
	if uint64(size) > uint64(maxPayload) {
		return frame{}, 0, fmt.Errorf("%w: payload of %d bytes exceeds frame_max %d", errMalformed, size, maxPayload+frameOverhead)
	}
	n := frameOverhead + int(size)
	if len(b) < n {
		return frame{}, 0, nil
	}
	if b[n-1] != frameEnd {
		return frame{}, 0, fmt.Errorf("%w: frame end 0x%02x, want 0xce", errMalformed, b[n-1])
	}
	f := frame{typ: b[0], channel: binary.BigEndian.Uint16(b[1:3]), payload: b[frameHeaderLen : n-1]}
	return f, n, nil
}

// method returns the method a method frame carries and a reader of its
// arguments.
func (f frame) method() (methodKey, argReader, error) {
	if f.typ != frameMethod || len(f.payload) < 4 {
		return 0, argReader{}, fmt.Errorf("%w: method frame of %d bytes", errMalformed, len(f.payload))
	}
	k := methodKey(binary.BigEndian.Uint32(f.payload))
	return k, argReader{b: f.payload[4:]}, nil
}

// argReader reads method arguments and other fields from a payload. A read
// past the end sets short and returns zero values, so that a parser can
// read every field and check once, with ok, at the end.
type argReader struct {
	b     []byte
	short bool
}

func (r *argReader) take(n int) []byte {
	if r.short || n < 0 || len(r.b) < n {
		r.short = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *argReader) u8() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *argReader) u16() uint16 {
	if v := r.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (r *argReader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *argReader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// shortStr returns a shortstr's bytes, aliasing the payload.
func (r *argReader) shortStr() []byte { return r.take(int(r.u8())) }

// longStr returns a longstr's (or a field table's) bytes, aliasing the
// payload.
func (r *argReader) longStr() []byte {
	n := r.u32()
	if uint64(n) > uint64(len(r.b)) {
		r.short = true
		return nil
	}
	return r.take(int(n))
}

// ok reports whether every read so far found its bytes.
func (r *argReader) ok() bool { return !r.short }

// closeArgs is a connection.close or channel.close.
type closeArgs struct {
	code     uint16
	text     string
	classID  uint16
	methodID uint16
}

// parseClose reads the arguments of connection.close or channel.close.
func parseClose(r argReader) (closeArgs, error) {
	c := closeArgs{code: r.u16(), text: string(r.shortStr()), classID: r.u16(), methodID: r.u16()}
	if !r.ok() {
		return closeArgs{}, fmt.Errorf("%w: short close method", errMalformed)
	}
	return c, nil
}

// parseConfirm reads a basic.ack or basic.nack: the delivery tag and the
// multiple flag (bit 0 of the flag octet in both).
func parseConfirm(r argReader) (tag uint64, multiple bool, err error) {
	tag = r.u64()
	bits := r.u8()
	if !r.ok() {
		return 0, false, fmt.Errorf("%w: short basic.ack/nack", errMalformed)
	}
	return tag, bits&1 != 0, nil
}

// parseDeliver reads the delivery tag of a basic.deliver; the other
// arguments (consumer tag, redelivered, exchange, routing key) are checked
// for length only.
func parseDeliver(r argReader) (uint64, error) {
	r.shortStr() // consumer tag
	tag := r.u64()
	r.u8() // redelivered
	r.shortStr()
	r.shortStr()
	if !r.ok() {
		return 0, fmt.Errorf("%w: short basic.deliver", errMalformed)
	}
	return tag, nil
}

// contentHeader is the part of a content header the consumer needs.
type contentHeader struct {
	bodySize uint64
	// headers is the raw field table, aliasing the payload; nil when the
	// message has none.
	headers []byte
}

// parseContentHeader reads a basic-class content header. Properties after
// headers are not parsed: the client needs nothing from them.
func parseContentHeader(payload []byte) (contentHeader, error) {
	r := argReader{b: payload}
	class := r.u16()
	r.u16() // weight
	h := contentHeader{bodySize: r.u64()}
	flags := r.u16()
	if !r.ok() {
		return contentHeader{}, fmt.Errorf("%w: content header of %d bytes", errMalformed, len(payload))
	}
	if class != classBasic {
		return contentHeader{}, fmt.Errorf("%w: content header of class %d", errMalformed, class)
	}
	if flags&propContentType != 0 {
		r.shortStr()
	}
	if flags&propContentEncoding != 0 {
		r.shortStr()
	}
	if flags&propHeaders != 0 {
		h.headers = r.longStr()
	}
	if !r.ok() {
		return contentHeader{}, fmt.Errorf("%w: short content header properties", errMalformed)
	}
	return h, nil
}

// tableTimestamp finds the tsHeader entry in a raw field table and returns
// its value, as decodeTimestamp does for amqp091-go's decoded tables: a
// long-long ('l') or long ('I') integer, positive. ok is false when it is
// absent, of another type, not positive, or the table is malformed.
func tableTimestamp(table []byte) (ts int64, ok bool) {
	r := argReader{b: table}
	for len(r.b) > 0 {
		key := r.shortStr()
		typ := r.u8()
		match := string(key) == tsHeader // no allocation: compared, not converted
		switch typ {
		case 'l':
			v := int64(r.u64())
			if match && r.ok() {
				return v, v > 0
			}
		case 'I':
			v := int64(int32(r.u32()))
			if match && r.ok() {
				return v, v > 0
			}
		default:
			if !skipFieldValue(&r, typ) {
				return 0, false
			}
		}
		if !r.ok() {
			return 0, false
		}
	}
	return 0, false
}

// skipFieldValue skips one field value of type typ. It reports false for a
// type it does not know, whose length it cannot tell.
func skipFieldValue(r *argReader, typ byte) bool {
	switch typ {
	case 't', 'b', 'B':
		r.take(1)
	case 's', 'u':
		r.take(2)
	case 'I', 'i', 'f':
		r.take(4)
	case 'l', 'L', 'd', 'T':
		r.take(8)
	case 'D':
		r.take(5)
	case 'S', 'x', 'A', 'F':
		r.longStr()
	case 'V':
	default:
		return false
	}
	return true
}

// beginFrame appends a frame header with a size to be patched by endFrame,
// and returns the frame's start offset.
func beginFrame(b []byte, typ byte, channel uint16) ([]byte, int) {
	start := len(b)
	b = append(b, typ, byte(channel>>8), byte(channel), 0, 0, 0, 0)
	return b, start
}

// endFrame patches the size of the frame begun at start and appends the
// frame-end octet.
func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start+3:], uint32(len(b)-start-frameHeaderLen))
	return append(b, frameEnd)
}

// beginMethod begins a method frame for method m on channel.
func beginMethod(b []byte, channel uint16, m methodKey) ([]byte, int) {
	b, start := beginFrame(b, frameMethod, channel)
	return binary.BigEndian.AppendUint32(b, uint32(m)), start
}

// appendShortStr appends a shortstr. Callers check the length (checkShortStr).
func appendShortStr(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

// checkShortStr reports a string too long for a shortstr.
func checkShortStr(what, s string) error {
	if len(s) > 255 {
		return fmt.Errorf("%s of %d bytes does not fit an AMQP shortstr (255)", what, len(s))
	}
	return nil
}

// appendLongStr appends a longstr.
func appendLongStr(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// appendTable appends a field table whose entries enc appends.
func appendTable(b []byte, enc func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = enc(b)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// appendTableString appends a table entry with a longstr value.
func appendTableString(b []byte, key, value string) []byte {
	return appendLongStr(append(appendShortStr(b, key), 'S'), value)
}

// appendTableBool appends a table entry with a boolean value.
func appendTableBool(b []byte, key string, v bool) []byte {
	x := byte(0)
	if v {
		x = 1
	}
	return append(appendShortStr(b, key), 't', x)
}

// appendMethodFrame appends a whole method frame whose arguments args
// appends (nil for none).
func appendMethodFrame(b []byte, channel uint16, m methodKey, args func([]byte) []byte) []byte {
	b, start := beginMethod(b, channel, m)
	if args != nil {
		b = args(b)
	}
	return endFrame(b, start)
}

// appendClose appends connection.close (channel 0) or channel.close.
func appendClose(b []byte, channel uint16, code uint16, text string) []byte {
	m := mChannelClose
	if channel == 0 {
		m = mConnectionClose
	}
	return appendMethodFrame(b, channel, m, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint16(b, code)
		b = appendShortStr(b, text)
		return append(b, 0, 0, 0, 0) // class id, method id: not caused by a method
	})
}

// appendBasicAck appends a basic.ack frame.
func appendBasicAck(b []byte, channel uint16, tag uint64, multiple bool) []byte {
	b, start := beginMethod(b, channel, mBasicAck)
	b = binary.BigEndian.AppendUint64(b, tag)
	bits := byte(0)
	if multiple {
		bits = 1
	}
	return endFrame(append(b, bits), start)
}

// appendHeartbeat appends a heartbeat frame.
func appendHeartbeat(b []byte) []byte {
	return append(b, frameHeartbeat, 0, 0, 0, 0, 0, 0, frameEnd)
}

// appendPublish appends one message as AMQP frames: basic.publish, a
// content header and the body split into frames of at most frameMax bytes.
// The message carries the publish time ts as stampTimestamp does: in the
// first 8 bytes of the encoded body when body has 8 bytes or more (body
// itself is not modified), else in the tsHeader header. tsOff is the offset
// in b of those 8 big-endian bytes, so that a caller can re-stamp a copy of
// the encoding without encoding again.
func appendPublish(b []byte, channel uint16, exchange, key string, deliveryMode byte, body []byte, ts int64, frameMax int) (out []byte, tsOff int) {
	b, start := beginMethod(b, channel, mBasicPublish)
	b = append(b, 0, 0) // reserved-1 (ticket)
	b = appendShortStr(b, exchange)
	b = appendShortStr(b, key)
	b = append(b, 0) // mandatory, immediate: off
	b = endFrame(b, start)

	b, start = beginFrame(b, frameHeader, channel)
	b = append(b, 0, classBasic, 0, 0) // class, weight
	b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
	inHeader := len(body) < 8
	flags := uint16(propDeliveryMode)
	if inHeader {
		flags |= propHeaders
	}
	b = binary.BigEndian.AppendUint16(b, flags)
	if inHeader {
		b = appendTable(b, func(b []byte) []byte {
			b = append(appendShortStr(b, tsHeader), 'l')
			tsOff = len(b)
			return binary.BigEndian.AppendUint64(b, uint64(ts))
		})
	}
	b = append(b, deliveryMode)
	b = endFrame(b, start)

	maxChunk := frameMax - frameOverhead
	for off := 0; off < len(body); {
		n := min(len(body)-off, maxChunk)
		b, start = beginFrame(b, frameBody, channel)
		if off == 0 && !inHeader {
			tsOff = len(b)
		}
		b = append(b, body[off:off+n]...)
		b = endFrame(b, start)
		off += n
	}
	if !inHeader {
		binary.BigEndian.PutUint64(b[tsOff:], uint64(ts))
	}
	return b, tsOff
}

// publishTemplate is a publisher's message encoded once. Every message of a
// publisher is the same but for its publish time, so the hot path copies
// the template and patches 8 bytes instead of encoding frames.
type publishTemplate struct {
	frames []byte
	tsOff  int
}

// newPublishTemplate encodes the message a publisher sends: size zero bytes
// (but the timestamp) to exchange with routing key key.
func newPublishTemplate(channel uint16, exchange, key string, size int, persistent bool, frameMax int) (*publishTemplate, error) {
	if err := checkShortStr("exchange name", exchange); err != nil {
		return nil, err
	}
	if err := checkShortStr("routing key", key); err != nil {
		return nil, err
	}
	if frameMax < minFrameMax {
		return nil, fmt.Errorf("frame_max %d below the protocol minimum %d", frameMax, minFrameMax)
	}
	mode := byte(1)
	if persistent {
		mode = 2
	}
	frames, tsOff := appendPublish(nil, 1, exchange, key, mode, make([]byte, size), 0, frameMax)
	return &publishTemplate{frames: frames, tsOff: tsOff}, nil
}

// appendTo appends the message stamped with ts to b.
func (t *publishTemplate) appendTo(b []byte, ts int64) []byte {
	off := len(b)
	b = append(b, t.frames...)
	binary.BigEndian.PutUint64(b[off+t.tsOff:], uint64(ts))
	return b
}

// stamp writes ts into the template itself, for a message written straight
// from it.
func (t *publishTemplate) stamp(ts int64) {
	binary.BigEndian.PutUint64(t.frames[t.tsOff:], uint64(ts))
}
