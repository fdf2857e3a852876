package amqp

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// specJSON is the part of RabbitMQ's codegen JSON these tests check the
// generated code against.
type specJSON struct {
	Domains [][2]string `json:"domains"`
	Classes []struct {
		Name    string `json:"name"`
		ID      uint32 `json:"id"`
		Methods []struct {
			Name        string `json:"name"`
			ID          uint32 `json:"id"`
			Content     bool   `json:"content"`
			Synchronous bool   `json:"synchronous"`
			Arguments   []struct {
				Name   string `json:"name"`
				Type   string `json:"type"`
				Domain string `json:"domain"`
			} `json:"arguments"`
		} `json:"methods"`
	} `json:"classes"`
}

// TestMethodsMatchSpec checks every method of the spec JSON against the
// generated registry: id, name, content and synchronous flags, and the Go type
// of each argument in order.
func TestMethodsMatchSpec(t *testing.T) {
	raw, err := os.ReadFile("spec/amqp-rabbitmq-0.9.1.json")
	if err != nil {
		t.Fatal(err)
	}
	var s specJSON
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	domains := map[string]string{}
	for _, d := range s.Domains {
		domains[d[0]] = d[1]
	}
	goType := map[string]reflect.Type{
		"bit": reflect.TypeFor[bool](), "octet": reflect.TypeFor[uint8](), "short": reflect.TypeFor[uint16](),
		"long": reflect.TypeFor[uint32](), "longlong": reflect.TypeFor[uint64](), "timestamp": reflect.TypeFor[uint64](),
		"shortstr": reflect.TypeFor[string](), "longstr": reflect.TypeFor[[]byte](), "table": reflect.TypeFor[Table](),
	}
	n := 0
	for _, c := range s.Classes {
		for _, m := range c.Methods {
			n++
			id := c.ID<<16 | m.ID
			name := c.Name + "." + m.Name
			got := newMethod(id)
			if got == nil {
				t.Errorf("%s (%d.%d): newMethod returned nil", name, c.ID, m.ID)
				continue
			}
			if got.ID() != id || got.Name() != name || MethodName(id) != name {
				t.Errorf("%d.%d: ID %#x Name %q MethodName %q, want %#x %q", c.ID, m.ID, got.ID(), got.Name(), MethodName(id), id, name)
			}
			if got.HasContent() != m.Content || got.Synchronous() != m.Synchronous {
				t.Errorf("%s: HasContent %v Synchronous %v, want %v %v", name, got.HasContent(), got.Synchronous(), m.Content, m.Synchronous)
			}
			st := reflect.TypeOf(got).Elem()
			if st.NumField() != len(m.Arguments) {
				t.Errorf("%s: %d fields, spec has %d arguments", name, st.NumField(), len(m.Arguments))
				continue
			}
			for i, a := range m.Arguments {
				typ := a.Type
				if typ == "" {
					typ = domains[a.Domain]
				}
				if st.Field(i).Type != goType[typ] {
					t.Errorf("%s: field %d (%s) is %s, spec argument %s is %s", name, i, st.Field(i).Name, st.Field(i).Type, a.Name, typ)
				}
			}
		}
	}
	if ids := allMethodIDs(); len(ids) != n {
		t.Errorf("newMethod knows %d methods, spec has %d", len(ids), n)
	}
}

func TestNewMethodUnknown(t *testing.T) {
	for _, id := range []uint32{0, 10 << 16, 10<<16 | 12, 60<<16 | 41, 99<<16 | 10, 0xffffffff} {
		if _, err := NewMethod(id); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("NewMethod(%#x) error %v, want ErrUnknownMethod", id, err)
		}
		payload := []byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
		if _, err := DecodeMethod(payload); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("DecodeMethod(%x) error %v, want ErrUnknownMethod", payload, err)
		}
	}
	if got := MethodName(99<<16 | 7); got != "99.7" {
		t.Errorf("MethodName of unknown pair = %q, want 99.7", got)
	}
	if m, err := NewMethod(60<<16 | 40); err != nil || m.Name() != "basic.publish" {
		t.Errorf("NewMethod(basic.publish) = %v, %v", m, err)
	}
}

// TestMethodRoundTrip encodes every method with random non-zero arguments and
// every combination of its bit arguments, and decodes it three ways: into a
// fresh struct, from a method frame, and into a reused struct holding other
// values.
func TestMethodRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, id := range allMethodIDs() {
		proto := newMethod(id)
		t.Run(proto.Name(), func(t *testing.T) {
			combos := uint64(1) << boolFields(proto)
			for bits := range combos {
				for range 3 {
					want := newMethod(id)
					fillRandom(r, want, bits)
					checkMethodRoundTrip(t, r, want)
				}
			}
		})
	}
}

func checkMethodRoundTrip(t *testing.T, r *rand.Rand, want Method) {
	t.Helper()
	payload := want.AppendTo(nil)
	if got, _ := MethodID(payload); got != want.ID() {
		t.Fatalf("AppendTo wrote method id %#x, want %#x", got, want.ID())
	}
	got, err := DecodeMethod(payload)
	if err != nil {
		t.Fatalf("DecodeMethod(%x): %v", payload, err)
	}
	if !sameValue(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if again := got.AppendTo(nil); !bytes.Equal(again, payload) {
		t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, payload)
	}

	frame := AppendMethodFrame([]byte("prefix"), 7, want)
	f, n, err := ParseFrame(frame[6:], 0)
	if err != nil || n != len(frame)-6 || f.Type != TypeMethod || f.Channel != 7 || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("method frame: %+v n=%d err=%v", f, n, err)
	}

	reused := newMethod(want.ID())
	fillRandom(r, reused, r.Uint64())
	if err := reused.Decode(payload[4:]); err != nil {
		t.Fatalf("Decode into reused struct: %v", err)
	}
	if !sameValue(reused, want) {
		t.Fatalf("decode into reused struct:\n got %+v\nwant %+v", reused, want)
	}
}

// TestMethodZeroRoundTrip covers empty strings, byte slices and tables.
func TestMethodZeroRoundTrip(t *testing.T) {
	for _, id := range allMethodIDs() {
		want := newMethod(id)
		got, err := DecodeMethod(want.AppendTo(nil))
		if err != nil {
			t.Errorf("%s: %v", want.Name(), err)
			continue
		}
		if !sameValue(got, want) {
			t.Errorf("%s: got %+v, want zero value", want.Name(), got)
		}
	}
}

// TestMethodTruncatedAndTrailing cuts every method's encoding at every byte and
// appends a byte to it.
func TestMethodTruncatedAndTrailing(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, id := range allMethodIDs() {
		m := newMethod(id)
		fillRandom(r, m, r.Uint64())
		payload := m.AppendTo(nil)
		for i := range len(payload) {
			if _, err := DecodeMethod(payload[:i]); !errors.Is(err, ErrTruncated) {
				t.Errorf("%s cut at %d of %d: error %v, want ErrTruncated", m.Name(), i, len(payload), err)
			}
		}
		if _, err := DecodeMethod(append(payload, 0)); !errors.Is(err, ErrTrailingBytes) {
			t.Errorf("%s with a trailing byte: error %v, want ErrTrailingBytes", m.Name(), err)
		}
	}
}

// TestDecodeKnownFrames decodes frames built by hand from the specification,
// not by this package's encoder, and checks the encoder reproduces them.
func TestDecodeKnownFrames(t *testing.T) {
	tests := []struct {
		name  string
		frame []byte
		want  Method
	}{
		{
			name: "basic.publish",
			frame: []byte{
				1, 0, 5, 0, 0, 0, 18, // method frame, channel 5, 18 bytes
				0, 60, 0, 40, // basic.publish
				0, 0, // ticket
				3, 'a', 'm', 'q', // exchange
				6, 'o', 'r', 'd', 'e', 'r', 's', // routing key
				0x01, // mandatory, not immediate
				0xce,
			},
			want: &BasicPublish{Exchange: "amq", RoutingKey: "orders", Mandatory: true},
		},
		{
			name: "connection.tune",
			frame: []byte{
				1, 0, 0, 0, 0, 0, 12,
				0, 10, 0, 30, // connection.tune
				0x07, 0xff, // channel-max 2047
				0, 2, 0, 0, // frame-max 131072
				0, 60, // heartbeat 60
				0xce,
			},
			want: &ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60},
		},
		{
			name: "queue.declare",
			frame: []byte{
				1, 0, 1, 0, 0, 0, 38,
				0, 50, 0, 10, // queue.declare
				0, 0, // ticket
				4, 'j', 'o', 'b', 's', // queue
				0x02 | 0x10, // durable, nowait
				0, 0, 0, 22, // arguments, 22 bytes
				12, 'x', '-', 'm', 'a', 'x', '-', 'l', 'e', 'n', 'g', 't', 'h', 'l', 0, 0, 0, 0, 0, 0, 0, 10,
				0xce,
			},
			want: &QueueDeclare{Queue: "jobs", Durable: true, Nowait: true, Arguments: Table{"x-max-length": int64(10)}},
		},
		{
			name: "basic.deliver",
			frame: []byte{
				1, 0, 2, 0, 0, 0, 26,
				0, 60, 0, 60, // basic.deliver
				4, 'c', 't', 'a', 'g', // consumer tag
				0, 0, 0, 0, 0, 0, 1, 0, // delivery tag 256
				0x01,        // redelivered
				2, 'e', 'x', // exchange
				4, 'k', 'e', 'y', '1', // routing key
				0xce,
			},
			want: &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 256, Redelivered: true, Exchange: "ex", RoutingKey: "key1"},
		},
		{
			name: "channel.close",
			frame: []byte{
				1, 0, 3, 0, 0, 0, 23,
				0, 20, 0, 40, // channel.close
				0x01, 0x94, // 404
				12, 'N', 'O', 'T', '_', 'F', 'O', 'U', 'N', 'D', ' ', '-', ' ',
				0, 50, 0, 10, // caused by queue.declare
				0xce,
			},
			want: &ChannelClose{ReplyCode: 404, ReplyText: "NOT_FOUND - ", ClassID: 50, MethodID: 10},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, n, err := ParseFrame(tc.frame, 131072)
			if err != nil || n != len(tc.frame) || f.Type != FrameMethod {
				t.Fatalf("ParseFrame: %+v n=%d err=%v", f, n, err)
			}
			got, err := DecodeMethod(f.Payload)
			if err != nil {
				t.Fatalf("DecodeMethod: %v", err)
			}
			if !sameValue(got, tc.want) {
				t.Fatalf("decoded %+v, want %+v", got, tc.want)
			}
			if enc := AppendMethodFrame(nil, f.Channel, tc.want); !bytes.Equal(enc, tc.frame) {
				t.Fatalf("AppendMethodFrame:\n got %x\nwant %x", enc, tc.frame)
			}
		})
	}
}

// TestMethodBitsIgnoreUnusedBits checks that bits beyond a method's bit
// arguments are ignored rather than rejected, as RabbitMQ does.
func TestMethodBitsIgnoreUnusedBits(t *testing.T) {
	payload := []byte{0, 60, 0, 80, 0, 0, 0, 0, 0, 0, 0, 9, 0xfe} // basic.ack tag 9, multiple clear
	m, err := DecodeMethod(payload)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*BasicAck); got.DeliveryTag != 9 || got.Multiple {
		t.Fatalf("decoded %+v, want tag 9 without multiple", got)
	}
}

// TestDecodeStringsDoNotAliasInput checks that decoded short strings are
// copies: a connection reuses its read buffer, and names outlive it.
func TestDecodeStringsDoNotAliasInput(t *testing.T) {
	payload := (&BasicPublish{Exchange: "ex", RoutingKey: "rk"}).AppendTo(nil)
	var m BasicPublish
	if err := m.Decode(payload[4:]); err != nil {
		t.Fatal(err)
	}
	for i := range payload {
		payload[i] = 'Z'
	}
	if m.Exchange != "ex" || m.RoutingKey != "rk" {
		t.Fatalf("strings changed with the input buffer: %+v", m)
	}
}

// TestDecodeReusesEqualStrings checks that decoding bytes equal to the current
// value keeps the very same string, which is what makes reuse allocation-free,
// and that different bytes replace it.
func TestDecodeReusesEqualStrings(t *testing.T) {
	m := BasicPublish{Exchange: strings.Clone("amq.topic"), RoutingKey: strings.Clone("a.b")}
	ex, rk := unsafe.StringData(m.Exchange), unsafe.StringData(m.RoutingKey)
	if err := m.Decode((&BasicPublish{Exchange: "amq.topic", RoutingKey: "a.b"}).AppendTo(nil)[4:]); err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(m.Exchange) != ex || unsafe.StringData(m.RoutingKey) != rk {
		t.Fatal("decoding equal bytes replaced the struct's strings")
	}
	if err := m.Decode((&BasicPublish{Exchange: "amq.topic", RoutingKey: "a.c"}).AppendTo(nil)[4:]); err != nil {
		t.Fatal(err)
	}
	if m.RoutingKey != "a.c" || unsafe.StringData(m.Exchange) != ex {
		t.Fatalf("after a new routing key: %+v", m)
	}
}

// TestLongstrCapacity checks that a decoded long string cannot be appended to
// in place, which would overwrite the bytes after it in the read buffer.
func TestLongstrCapacity(t *testing.T) {
	payload := (&ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00guest\x00guest"), Locale: "en_US"}).AppendTo(nil)
	m, err := DecodeMethod(payload)
	if err != nil {
		t.Fatal(err)
	}
	resp := m.(*ConnectionStartOk).Response
	if cap(resp) != len(resp) {
		t.Fatalf("Response has capacity %d beyond its length %d", cap(resp), len(resp))
	}
	_ = append(resp, 'X')
	if m2, err := DecodeMethod(payload); err != nil || m2.(*ConnectionStartOk).Locale != "en_US" {
		t.Fatalf("input changed by appending to Response: %+v %v", m2, err)
	}
}

func TestMethodIDTruncated(t *testing.T) {
	for i := range 4 {
		if _, err := MethodID(make([]byte, i)); !errors.Is(err, ErrTruncated) {
			t.Errorf("MethodID of %d bytes: %v, want ErrTruncated", i, err)
		}
	}
	if id, err := MethodID([]byte{0, 60, 0, 40, 99}); err != nil || id != 60<<16|40 {
		t.Errorf("MethodID = %#x, %v", id, err)
	}
}
