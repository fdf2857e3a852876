package amqp

import (
	"encoding/binary"
	"fmt"
)

// Method is one AMQP method's arguments. Every generated struct implements it.
type Method interface {
	// ID returns the class id in the high and the method id in the low 16 bits.
	ID() uint32
	// Name returns the spec's name, e.g. "basic.publish".
	Name() string
	// HasContent reports whether a content header and body follow.
	HasContent() bool
	// Synchronous reports whether the method expects a reply.
	Synchronous() bool
	// Decode reads the arguments from the bytes after the method id.
	Decode(b []byte) error
	// AppendTo appends class id, method id and arguments.
	AppendTo(b []byte) []byte
}

// MethodID returns the combined class and method id at the start of a method
// frame's payload.
func MethodID(payload []byte) (uint32, error) {
	if len(payload) < 4 {
		return 0, fmt.Errorf("method frame: %w", ErrTruncated)
	}
	return binary.BigEndian.Uint32(payload), nil
}

// NewMethod returns an empty struct for a combined class and method id, or an
// error wrapping ErrUnknownMethod.
func NewMethod(id uint32) (Method, error) {
	m := newMethod(id)
	if m == nil {
		return nil, fmt.Errorf("%w: class %d method %d", ErrUnknownMethod, id>>16, id&0xffff)
	}
	return m, nil
}

// DecodeMethod decodes a method frame's payload into a freshly allocated struct.
// Hot paths instead read MethodID and Decode into a struct they reuse.
func DecodeMethod(payload []byte) (Method, error) {
	id, err := MethodID(payload)
	if err != nil {
		return nil, err
	}
	m, err := NewMethod(id)
	if err != nil {
		return nil, err
	}
	if err := m.Decode(payload[4:]); err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name(), err)
	}
	return m, nil
}

// MethodName returns the spec name of a combined id, or "class.method" numbers
// when the pair is unknown.
func MethodName(id uint32) string {
	if m := newMethod(id); m != nil {
		return m.Name()
	}
	return fmt.Sprintf("%d.%d", id>>16, id&0xffff)
}
