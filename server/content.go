package server

// Body buffers of publishes in progress. A content header only announces a
// body size; the broker holds memory for a body as its bytes arrive, so a
// header claiming 128 MiB costs nothing until 128 MiB are sent, and the
// memory alarm sees only what the broker really holds.

// bodyReserveLimit bounds, per connection, the bytes allocated for bodies
// before they arrive: a body that fits in one frame is allocated whole with
// its properties at the header (one allocation, filled in place, never
// copied), as long as the connection's reservations stay below this. Past
// it, and for larger bodies, the buffer grows as frames arrive. Eight
// default-sized frames cover publishers interleaving a few channels.
const bodyReserveLimit = 1 << 20

// contentBuffer returns the properties, copied out of the read buffer, and an
// empty body with room for what the connection may reserve ahead of the
// bytes. Both share one allocation.
func (ch *channel) contentBuffer(props []byte, size uint64) (rawProps, body []byte) {
	c := ch.conn
	room := uint64(0)
	if size <= uint64(c.frameMax) && c.bodyReserved+size <= bodyReserveLimit {
		room = size
		c.bodyReserved += size
		ch.pubReserved = size
	}
	buf := make([]byte, len(props), uint64(len(props))+room)
	copy(buf, props)
	return buf[:len(props):len(props)], buf[len(props):]
}

// appendBody adds a body frame's bytes to the publish in progress. A buffer
// too small is replaced by one twice as large (at most the announced size),
// so a body is copied about once more in all and memory stays within twice
// the bytes received.
func (ch *channel) appendBody(p []byte) {
	m := ch.pubMsg
	if need := uint64(len(m.Body)) + uint64(len(p)); need > uint64(cap(m.Body)) {
		grow := min(ch.pubSize, max(2*uint64(cap(m.Body)), need))
		np := len(m.RawProps)
		buf := make([]byte, np, uint64(np)+grow)
		copy(buf, m.RawProps)
		m.Body = append(buf[np:], m.Body...)
		m.RawProps = buf[:np:np]
	}
	m.Body = append(m.Body, p...)
}

// endContent ends the publish in progress, complete or abandoned, and gives
// back the connection's reservation for its body.
func (ch *channel) endContent() {
	ch.conn.bodyReserved -= ch.pubReserved
	ch.pubReserved = 0
	ch.pubActive, ch.pubHeader, ch.pubMsg, ch.pubEx = false, false, nil, nil
}
