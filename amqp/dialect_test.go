package amqp

import (
	"bytes"
	"testing"
)

func TestHeaderDialect(t *testing.T) {
	cases := []struct {
		header  []byte
		dialect Dialect
		ok      bool
	}{
		{ProtocolHeader, Dialect091, true},
		{ProtocolHeader09, Dialect091, true},
		{ProtocolHeader08, Dialect08, true},
		{ProtocolHeader091Draft, Dialect08, true},
		{[]byte("AMQP\x00\x00\x09\x02"), Dialect091, false},
		{[]byte("AMQP\x03\x01\x00\x00"), Dialect091, false}, // AMQP 1.0 SASL: not served
		{[]byte("HTTP/1.1"), Dialect091, false},
	}
	for _, c := range cases {
		if d, ok := HeaderDialect(c.header); d != c.dialect || ok != c.ok {
			t.Errorf("HeaderDialect(% x) = %v, %v; want %v, %v", c.header, d, ok, c.dialect, c.ok)
		}
	}
	if maj, min := Dialect08.StartVersion(); maj != 8 || min != 0 {
		t.Errorf("0-8 start version %d-%d", maj, min)
	}
}

func TestFrom08(t *testing.T) {
	close08 := []byte{0, 10, 0, 60, 0, 200, 0, 0, 0, 0, 0}
	if got, ok := From08(close08); !ok || !bytes.Equal(got[:4], []byte{0, 10, 0, 50}) {
		t.Errorf("connection.close: % x %v", got, ok)
	}
	if got, ok := From08([]byte{0, 10, 0, 61}); !ok || !bytes.Equal(got, []byte{0, 10, 0, 51}) {
		t.Errorf("connection.close-ok: % x %v", got, ok)
	}
	for _, redirect := range [][]byte{{0, 10, 0, 50, 0, 0}, {0, 10, 0, 51}} {
		if _, ok := From08(redirect); ok {
			t.Errorf("% x accepted from a 0-8 client", redirect)
		}
	}
	full := (&BasicConsume{Queue: "q", ConsumerTag: "t", NoAck: true}).AppendTo(nil)
	in := append([]byte(nil), full[:len(full)-4]...)
	got, ok := From08(in)
	m, err := DecodeMethod(got)
	if !ok || err != nil || m.(*BasicConsume).Queue != "q" || !m.(*BasicConsume).NoAck || !bytes.Equal(in, full[:len(full)-4]) {
		t.Errorf("basic.consume: %+v %v %v (input changed: %v)", m, ok, err, !bytes.Equal(in, full[:len(full)-4]))
	}
	qos := (&BasicQos{PrefetchCount: 3}).AppendTo(nil)
	if got, ok := From08(qos); !ok || !bytes.Equal(got, qos) {
		t.Errorf("basic.qos changed: % x", got)
	}
}

func TestAs08(t *testing.T) {
	cl := As08(&ConnectionClose{ReplyCode: 320, ReplyText: "x", ClassID: 20, MethodID: 10}).AppendTo(nil)
	want := append([]byte{0, 10, 0, 60}, (&ConnectionClose{ReplyCode: 320, ReplyText: "x", ClassID: 20, MethodID: 10}).AppendTo(nil)[4:]...)
	if !bytes.Equal(cl, want) {
		t.Errorf("connection.close % x, want % x", cl, want)
	}
	if b := As08(&ConnectionCloseOk{}).AppendTo(nil); !bytes.Equal(b, []byte{0, 10, 0, 61}) {
		t.Errorf("connection.close-ok % x", b)
	}
	if b := As08(&ChannelOpenOk{}).AppendTo([]byte{9}); !bytes.Equal(b, []byte{9, 0, 20, 0, 11}) {
		t.Errorf("channel.open-ok % x", b)
	}
	deliver := &BasicDeliver{ConsumerTag: "c"}
	if As08(deliver) != Method(deliver) {
		t.Error("basic.deliver wrapped though 0-8 encodes it alike")
	}
}
