package server

import (
	"encoding/binary"
	"errors"

	"github.com/warrenmq/warren/amqp"
)

// The remote-queue operations travel as plain byte payloads over the
// cluster's rpc plane. The encoding is a flat sequence of uvarints and
// length-prefixed byte strings: cheap to write on the publish path and
// with nothing to negotiate, since every node of a cluster runs the same
// release.

// wireWriter appends fields to a payload.
type wireWriter struct{ b []byte }

func (w *wireWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *wireWriter) int(v int64) { w.b = binary.AppendVarint(w.b, v) }

func (w *wireWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *wireWriter) bytes(v []byte) {
	w.uint(uint64(len(v)))
	w.b = append(w.b, v...)
}

func (w *wireWriter) string(v string) {
	w.uint(uint64(len(v)))
	w.b = append(w.b, v...)
}

// errMalformed is a payload this release cannot have written.
var errMalformed = errors.New("server: malformed remote-queue payload")

// wireReader reads fields in the order they were written; the first
// error sticks and every later read returns zero values.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errMalformed
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errMalformed
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) bool() bool {
	if r.err != nil || len(r.b) == 0 {
		r.err = errMalformed
		return false
	}
	v := r.b[0] != 0
	r.b = r.b[1:]
	return v
}

// bytes returns a field aliasing the payload: callers that keep it past
// the handler copy the payload first (the rpc plane hands each request its
// own buffer).
func (r *wireReader) bytes() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errMalformed
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *wireReader) string() string { return string(r.bytes()) }

// stringAs reads a string, returning *last when it is the same text and
// keeping it in *last otherwise: the fields that repeat from item to item
// of a batch (vhost, queue, exchange, routing key) are then allocated once
// per run of equal values, not once per item.
func (r *wireReader) stringAs(last *string) string {
	b := r.bytes()
	if string(b) != *last {
		*last = string(b)
	}
	return *last
}

// count reads a number of items that follow, each at least one byte, so a
// corrupt count cannot make the reader allocate beyond the payload.
func (r *wireReader) count() int {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.err = errMalformed
		return 0
	}
	return int(n)
}

// The answer of every remote-queue rpc starts with a status byte: the
// operation's refusal travels as RabbitMQ's reply code and text, so the
// ingress node closes the client's channel exactly as the home would.
const (
	wireOK      = 0
	wireRefused = 1
)

// okAnswer starts a successful answer.
func okAnswer() *wireWriter { return &wireWriter{b: []byte{wireOK}} }

// refusedAnswer is the answer carrying e.
func refusedAnswer(e *amqp.Error) []byte {
	w := wireWriter{b: []byte{wireRefused}}
	w.uint(uint64(e.Code))
	w.string(e.Text)
	return w.b
}

// readAnswer splits an answer into its refusal, if any, and the reader of
// its result. method is the client's method the refusal is reported for.
func readAnswer(b []byte, method uint32) (*wireReader, *amqp.Error) {
	if len(b) == 0 {
		return nil, amqp.NewError(amqp.InternalError, method, "empty answer from the queue's home node")
	}
	r := &wireReader{b: b[1:]}
	if b[0] == wireOK {
		return r, nil
	}
	code := r.uint()
	text := r.string()
	if r.err != nil {
		return nil, amqp.NewError(amqp.InternalError, method, "malformed refusal from the queue's home node")
	}
	return nil, amqp.NewError(uint16(code), method, "%s", text)
}

// appendOutgoing writes one delivery or basic.get message.
func (w *wireWriter) outgoing(m outgoing) {
	w.uint(m.id)
	w.bool(m.redelivered)
	w.string(m.msg.Exchange)
	w.string(m.msg.RoutingKey)
	w.bytes(m.props)
	w.bytes(m.msg.Body)
}

// outgoing reads what appendOutgoing wrote; the message owns its bytes.
func (r *wireReader) outgoing() outgoing {
	var m outgoing
	m.id = r.uint()
	m.redelivered = r.bool()
	msg := &Message{Exchange: r.string(), RoutingKey: r.string(), ttl: -1}
	m.props = cloneBytes(r.bytes())
	msg.RawProps = m.props
	msg.Body = cloneBytes(r.bytes())
	m.msg = msg
	return m
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// table writes an AMQP field table (consumer arguments).
func (w *wireWriter) table(t amqp.Table) {
	if len(t) == 0 {
		w.bytes(nil)
		return
	}
	w.bytes(amqp.AppendTable(nil, t))
}

func (r *wireReader) table() amqp.Table {
	b := r.bytes()
	if r.err != nil || len(b) == 0 {
		return nil
	}
	t, err := amqp.DecodeTable(b)
	if err != nil {
		r.err = errMalformed
	}
	return t
}
