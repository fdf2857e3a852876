package amqp

import (
	"errors"
	"testing"
)

// benchFrameMax is RabbitMQ's default frame-max.
const benchFrameMax = 131072

// benchProps is a typical publisher's property list: content type, persistent
// delivery, a message id and a timestamp.
func benchProps() []byte {
	p := Properties{
		Flags:        FlagContentType | FlagDeliveryMode | FlagMessageID | FlagTimestamp,
		ContentType:  "application/octet-stream",
		DeliveryMode: 2,
		MessageID:    "4f6b2c1e-9d1a-4c55-8a43-0e7f2b9d3c11",
		Timestamp:    1700000000,
	}
	return p.AppendTo(nil)
}

var benchBody = []byte("0123456789abcdef")

// publishFrames returns a basic.publish method frame, its content header and a
// 16-byte body frame, as a client writes them.
func publishFrames() []byte {
	b := AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.direct", RoutingKey: "orders.created"})
	return AppendContent(b, 1, benchFrameMax, benchProps(), benchBody)
}

var errBench = errors.New("unexpected frame")

// decodePublish does what a connection's reader does with publishFrames: parse
// the three frames, read the method id, decode into a reused struct and split
// the content header. It returns the body length.
func decodePublish(buf []byte, pub *BasicPublish) (int, error) {
	f, n, err := ParseFrame(buf, benchFrameMax)
	if err != nil || n == 0 || f.Type != TypeMethod {
		return 0, errBench
	}
	id, err := MethodID(f.Payload)
	if err != nil || id != pub.ID() {
		return 0, errBench
	}
	if err := pub.Decode(f.Payload[4:]); err != nil {
		return 0, err
	}
	buf = buf[n:]
	if f, n, err = ParseFrame(buf, benchFrameMax); err != nil || n == 0 || f.Type != TypeHeader {
		return 0, errBench
	}
	h, err := ParseContentHeader(f.Payload)
	if err != nil {
		return 0, err
	}
	buf = buf[n:]
	if f, n, err = ParseFrame(buf, benchFrameMax); err != nil || n == 0 || f.Type != TypeBody || uint64(len(f.Payload)) != h.BodySize {
		return 0, errBench
	}
	return len(f.Payload), nil
}

// encodeDeliver appends what a channel's writer sends per delivered message: a
// basic.deliver method frame, the content header and the body.
func encodeDeliver(buf []byte, d *BasicDeliver, props, body []byte) []byte {
	buf = AppendMethodFrame(buf, 1, d)
	return AppendContent(buf, 1, benchFrameMax, props, body)
}

func BenchmarkDecodePublish(b *testing.B) {
	buf := publishFrames()
	var pub BasicPublish
	if _, err := decodePublish(buf, &pub); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := decodePublish(buf, &pub); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDeliver(b *testing.B) {
	d := &BasicDeliver{ConsumerTag: "amq.ctag-Xk3yPq9Zt1", Exchange: "amq.direct", RoutingKey: "orders.created"}
	props := benchProps()
	buf := encodeDeliver(nil, d, props, benchBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		d.DeliveryTag++
		buf = encodeDeliver(buf[:0], d, props, benchBody)
	}
}

// TestHotPathAllocations pins the two paths every message takes at zero
// allocations: decoding a publish into a reused struct, and encoding a
// delivery into a reused buffer.
func TestHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	buf := publishFrames()
	var pub BasicPublish
	if n, err := decodePublish(buf, &pub); err != nil || n != len(benchBody) || pub.RoutingKey != "orders.created" {
		t.Fatalf("decodePublish = %d, %v, %+v", n, err, pub)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := decodePublish(buf, &pub); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("publish decode: %v allocations, want 0", allocs)
	}

	d := &BasicDeliver{ConsumerTag: "ctag", Exchange: "amq.direct", RoutingKey: "orders.created"}
	props := benchProps()
	out := encodeDeliver(nil, d, props, benchBody)
	if allocs := testing.AllocsPerRun(100, func() {
		d.DeliveryTag++
		out = encodeDeliver(out[:0], d, props, benchBody)
	}); allocs != 0 {
		t.Errorf("deliver encode: %v allocations, want 0", allocs)
	}
}

// clientProperties is a table like the one client libraries send in
// connection.start-ok.
func clientProperties() Table {
	return Table{
		"product":         "AMQP 0.9.1 Client",
		"version":         "1.16.0",
		"platform":        "golang",
		"information":     "https://github.com/rabbitmq/amqp091-go",
		"connection_name": "billing-worker-7",
		"capabilities": Table{
			"connection.blocked":           true,
			"consumer_cancel_notify":       true,
			"authentication_failure_close": true,
			"basic.nack":                   true,
			"publisher_confirms":           true,
			"per_consumer_qos":             true,
		},
	}
}

func BenchmarkDecodeTable(b *testing.B) {
	enc := AppendTable(nil, clientProperties())
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := DecodeTable(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendTable(b *testing.B) {
	t := clientProperties()
	buf := AppendTable(nil, t)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = AppendTable(buf[:0], t)
	}
}

func BenchmarkPropertiesDecode(b *testing.B) {
	withHeaders := fullProperties()
	cases := []struct {
		name string
		raw  []byte
	}{
		{"typical", benchProps()},
		{"all", withHeaders.AppendTo(nil)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var p Properties // reused, as a connection would
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.raw)))
			for b.Loop() {
				if err := p.Decode(tc.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Real publishers send a new message id with every message, which costs
	// one string per decode.
	b.Run("typical-new-id", func(b *testing.B) {
		raws := [2][]byte{benchProps(), benchProps()}
		raws[1][len(raws[1])-9] ^= 1 // the message id's last byte
		var p Properties
		b.ReportAllocs()
		b.SetBytes(int64(len(raws[0])))
		i := 0
		for b.Loop() {
			if err := p.Decode(raws[i&1]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkPeekDeliveryMode(b *testing.B) {
	p := fullProperties()
	raw := p.AppendTo(nil)
	b.ReportAllocs()
	for b.Loop() {
		if PeekDeliveryMode(raw) != 2 {
			b.Fatal("wrong delivery mode")
		}
	}
}
