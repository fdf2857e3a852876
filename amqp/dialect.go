package amqp

import (
	"bytes"
	"encoding/binary"
)

// Dialect is the framing a connection speaks, fixed once by its protocol
// header. RabbitMQ 3.10 (rabbit_reader:handshake/2) accepts four headers:
// AMQP 0-9-1; AMQP 0-9, which it frames as 0-9-1; and AMQP 0-8 and the
// header of the early 0-9-1 drafts ("AMQP" 1 1 9 1), which it frames with its
// 0-8 module (rabbit_framing_amqp_0_8, from amqp-rabbitmq-0.8.json).
type Dialect uint8

const (
	// Dialect091 is AMQP 0-9-1, and AMQP 0-9 framed the same way.
	Dialect091 Dialect = iota
	// Dialect08 is AMQP 0-8 as RabbitMQ defines it.
	Dialect08
)

// The protocol headers accepted besides ProtocolHeader.
var (
	ProtocolHeader09       = []byte{'A', 'M', 'Q', 'P', 1, 1, 0, 9}
	ProtocolHeader08       = []byte{'A', 'M', 'Q', 'P', 1, 1, 8, 0}
	ProtocolHeader091Draft = []byte{'A', 'M', 'Q', 'P', 1, 1, 9, 1}
)

// HeaderDialect returns the dialect a protocol header asks for, and false for
// a header the server does not speak.
func HeaderDialect(h []byte) (Dialect, bool) {
	switch {
	case bytes.Equal(h, ProtocolHeader), bytes.Equal(h, ProtocolHeader09):
		return Dialect091, true
	case bytes.Equal(h, ProtocolHeader08), bytes.Equal(h, ProtocolHeader091Draft):
		return Dialect08, true
	}
	return Dialect091, false
}

// String names the dialect as RabbitMQ's management API names a connection's
// protocol.
func (d Dialect) String() string {
	if d == Dialect08 {
		return "AMQP 0-8"
	}
	return "AMQP 0-9-1"
}

// StartVersion returns the version-major and version-minor connection.start
// announces: 0-9 for 0-9-1 (the spec's own values), 8-0 for 0-8.
func (d Dialect) StartVersion() (major, minor uint8) {
	if d == Dialect08 {
		return 8, 0
	}
	return 0, 9
}

// Method ids where AMQP 0-8 differs from 0-9-1 on the wire. In 0-8,
// connection.close and close-ok are 10.60 and 10.61, and 10.50 is
// connection.redirect, which only a server sends.
const (
	id08ConnectionRedirect = 10<<16 | 50
	id08ConnectionClose    = 10<<16 | 60
	id08ConnectionCloseOk  = 10<<16 | 61
	id091CloseOk           = 10<<16 | 51
	idBasicConsume         = 60<<16 | 20
)

// From08 turns the payload of a method frame from an AMQP 0-8 client into the
// 0-9-1 form the server decodes: the ids of connection.close and close-ok are
// rewritten in place, and basic.consume, which has no arguments table in 0-8,
// gets an empty one (in a copy). It returns false for the ids that mean
// something else in 0-9-1 but no client method in 0-8 (10.50 and 10.51).
func From08(payload []byte) ([]byte, bool) {
	id, err := MethodID(payload)
	if err != nil {
		return payload, true // the 0-9-1 path reports the short frame
	}
	switch id {
	case id08ConnectionClose:
		binary.BigEndian.PutUint16(payload[2:], 50)
	case id08ConnectionCloseOk:
		binary.BigEndian.PutUint16(payload[2:], 51)
	case id08ConnectionRedirect, id091CloseOk:
		return payload, false
	case idBasicConsume:
		return append(append(make([]byte, 0, len(payload)+4), payload...), 0, 0, 0, 0), true
	}
	return payload, true
}

// As08 returns m encoded as AMQP 0-8 encodes it. Only connection.close,
// connection.close-ok and channel.open-ok (which has no arguments in 0-8)
// differ among the methods a server sends; every other method is returned as
// it is.
func As08(m Method) Method {
	switch m := m.(type) {
	case *ConnectionClose:
		return connectionClose08{m}
	case *ConnectionCloseOk:
		return connectionCloseOk08{m}
	case *ChannelOpenOk:
		return channelOpenOk08{m}
	}
	return m
}

type connectionClose08 struct{ *ConnectionClose }

func (connectionClose08) ID() uint32 { return id08ConnectionClose }

func (m connectionClose08) AppendTo(b []byte) []byte {
	n := len(b)
	b = m.ConnectionClose.AppendTo(b)
	binary.BigEndian.PutUint16(b[n+2:], 60)
	return b
}

type connectionCloseOk08 struct{ *ConnectionCloseOk }

func (connectionCloseOk08) ID() uint32 { return id08ConnectionCloseOk }

func (connectionCloseOk08) AppendTo(b []byte) []byte { return append(b, 0, 10, 0, 61) }

type channelOpenOk08 struct{ *ChannelOpenOk }

func (channelOpenOk08) AppendTo(b []byte) []byte { return append(b, 0, 20, 0, 11) }
