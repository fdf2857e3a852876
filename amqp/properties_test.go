package amqp

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// fullProperties sets all 14 properties to non-zero values.
func fullProperties() Properties {
	return Properties{
		Flags:           allPropertyFlags,
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         Table{"x-death": []any{Table{"count": int64(1)}}, "retries": int32(3)},
		DeliveryMode:    2,
		Priority:        9,
		CorrelationID:   "corr-1",
		ReplyTo:         "amq.rabbitmq.reply-to",
		Expiration:      "60000",
		MessageID:       "msg-42",
		Timestamp:       1700000000,
		Type:            "order.created",
		UserID:          "guest",
		AppID:           "billing",
		ClusterID:       "c1",
	}
}

func TestPropertiesAllRoundTrip(t *testing.T) {
	want := fullProperties()
	raw := want.AppendTo(nil)
	var got Properties
	if err := got.Decode(raw); err != nil {
		t.Fatal(err)
	}
	if !sameValue(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if mode := PeekDeliveryMode(raw); mode != 2 {
		t.Errorf("PeekDeliveryMode = %d, want 2", mode)
	}
	if prio, ok := PeekPriority(raw); prio != 9 || !ok {
		t.Errorf("PeekPriority = %d, %v, want 9, true", prio, ok)
	}
}

// TestPropertiesKnownBytes decodes a property list written out by hand.
func TestPropertiesKnownBytes(t *testing.T) {
	raw := []byte{
		0x98, 0x40, // content-type, delivery-mode, priority, timestamp
		10, 't', 'e', 'x', 't', '/', 'p', 'l', 'a', 'i', 'n',
		2,                      // persistent
		5,                      // priority
		0, 0, 0, 0, 0, 0, 1, 0, // timestamp 256
	}
	want := Properties{
		Flags:        FlagContentType | FlagDeliveryMode | FlagPriority | FlagTimestamp,
		ContentType:  "text/plain",
		DeliveryMode: 2,
		Priority:     5,
		Timestamp:    256,
	}
	var got Properties
	if err := got.Decode(raw); err != nil {
		t.Fatal(err)
	}
	if !sameValue(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	if enc := want.AppendTo(nil); !bytes.Equal(enc, raw) {
		t.Fatalf("AppendTo:\n got %x\nwant %x", enc, raw)
	}
}

// TestPropertiesEverySubset round-trips every one of the 2^14 subsets of
// properties with random values, and checks the peek functions agree with Decode.
func TestPropertiesEverySubset(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var got Properties // reused, as a connection would
	for set := range uint32(1 << 14) {
		flags := uint16(set << 2)
		want := randProperties(r, flags)
		raw := want.AppendTo(nil)
		if err := got.Decode(raw); err != nil {
			t.Fatalf("flags %#04x: %v", flags, err)
		}
		if !sameValue(got, want) {
			t.Fatalf("flags %#04x:\n got %+v\nwant %+v", flags, got, want)
		}
		checkPeek(t, raw, &got)
	}
}

// checkPeek fails the test when the peek functions disagree with decoded.
func checkPeek(t testing.TB, raw []byte, decoded *Properties) {
	t.Helper()
	if mode := PeekDeliveryMode(raw); mode != decoded.DeliveryMode {
		t.Fatalf("PeekDeliveryMode(%x) = %d, Decode says %d", raw, mode, decoded.DeliveryMode)
	}
	prio, ok := PeekPriority(raw)
	if ok != (decoded.Flags&FlagPriority != 0) || prio != decoded.Priority {
		t.Fatalf("PeekPriority(%x) = %d, %v; Decode says %d with flags %#04x", raw, prio, ok, decoded.Priority, decoded.Flags)
	}
}

// TestPropertiesZeroValuesPresent checks that a present property with a zero
// value is written and read back as present.
func TestPropertiesZeroValuesPresent(t *testing.T) {
	want := Properties{Flags: allPropertyFlags}
	raw := want.AppendTo(nil)
	// 2 flag bytes, 10 empty short strings, an empty table, 2 octets, a timestamp.
	if wantLen := 2 + 10 + 4 + 2 + 8; len(raw) != wantLen {
		t.Fatalf("encoded %d bytes, want %d", len(raw), wantLen)
	}
	got := fullProperties()
	if err := got.Decode(raw); err != nil {
		t.Fatal(err)
	}
	if !sameValue(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if prio, ok := PeekPriority(raw); prio != 0 || !ok {
		t.Fatalf("PeekPriority = %d, %v, want 0, true", prio, ok)
	}
}

// TestPropertiesDecodeResets checks that decoding into a used struct clears
// properties the new list does not carry.
func TestPropertiesDecodeResets(t *testing.T) {
	got := fullProperties()
	want := Properties{Flags: FlagReplyTo, ReplyTo: "r"}
	if err := got.Decode(want.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	if !sameValue(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestPropertiesTruncated(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	sets := []Properties{fullProperties(), {Flags: allPropertyFlags}, {}}
	for range 300 {
		sets = append(sets, randProperties(r, uint16(r.Uint32())&allPropertyFlags))
	}
	for _, p := range sets {
		raw := p.AppendTo(nil)
		for cut := range len(raw) {
			var got Properties
			if err := got.Decode(raw[:cut]); !errors.Is(err, ErrTruncated) {
				t.Fatalf("flags %#04x cut at %d of %d: error %v, want ErrTruncated", p.Flags, cut, len(raw), err)
			}
			// The peek functions must not panic and must not invent a value
			// that differs from the whole list's.
			if mode := PeekDeliveryMode(raw[:cut]); mode != 0 && mode != p.DeliveryMode {
				t.Fatalf("PeekDeliveryMode of a cut list = %d, want 0 or %d", mode, p.DeliveryMode)
			}
			if prio, ok := PeekPriority(raw[:cut]); ok && prio != p.Priority {
				t.Fatalf("PeekPriority of a cut list = %d, want %d", prio, p.Priority)
			}
		}
		if err := new(Properties).Decode(append(raw, 0)); !errors.Is(err, ErrTrailingBytes) {
			t.Fatalf("flags %#04x with a trailing byte: error %v, want ErrTrailingBytes", p.Flags, err)
		}
	}
}

// TestPropertiesReservedFlagBits checks that the continuation bit and the
// unused bit 1 are never written, whatever Flags holds.
func TestPropertiesReservedFlagBits(t *testing.T) {
	raw := (&Properties{Flags: FlagPriority | 3, Priority: 4}).AppendTo(nil)
	if !bytes.Equal(raw, []byte{0x08, 0x00, 4}) {
		t.Fatalf("encoded %x, want 080004", raw)
	}
}

// TestPropertiesContinuationFlags decodes a property list that carries a
// continuation flag word, which the spec allows and basic never needs.
func TestPropertiesContinuationFlags(t *testing.T) {
	raw := []byte{
		0x18, 0x01, // delivery-mode, priority, continuation
		0x00, 0x01, // continuation word, continued again
		0x00, 0x00, // last flag word
		2, 7,
	}
	var got Properties
	if err := got.Decode(raw); err != nil {
		t.Fatal(err)
	}
	want := Properties{Flags: FlagDeliveryMode | FlagPriority, DeliveryMode: 2, Priority: 7}
	if !sameValue(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	checkPeek(t, raw, &got)
	if err := got.Decode(raw[:4]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("cut continuation: error %v, want ErrTruncated", err)
	}
}

func TestPropertiesBadHeaders(t *testing.T) {
	raw := []byte{0x20, 0x00, 0, 0, 0, 3, 1, 'k', '?'}
	if err := new(Properties).Decode(raw); !errors.Is(err, ErrFieldType) {
		t.Fatalf("error %v, want ErrFieldType", err)
	}
}

// TestPeekMalformed feeds the peek functions lists that are cut before the
// property they look for.
func TestPeekMalformed(t *testing.T) {
	tests := [][]byte{
		nil,
		{0x10},
		{0x10, 0x00},                // delivery-mode flagged, no value
		{0x90, 0x00, 5, 'a'},        // content-type cut short
		{0x30, 0x00, 0, 0, 0, 9, 1}, // headers longer than the list
		{0x30, 0x00, 0xff, 0xff, 0xff, 0xff},
	}
	for _, raw := range tests {
		if mode := PeekDeliveryMode(raw); mode != 0 {
			t.Errorf("PeekDeliveryMode(%x) = %d, want 0", raw, mode)
		}
		if prio, ok := PeekPriority(raw); ok || prio != 0 {
			t.Errorf("PeekPriority(%x) = %d, %v, want 0, false", raw, prio, ok)
		}
	}
	if mode := PeekDeliveryMode([]byte{0x18, 0x00, 2}); mode != 2 {
		t.Errorf("delivery mode before a missing priority: %d, want 2", mode)
	}
}

func TestContentHeader(t *testing.T) {
	props := (&Properties{Flags: FlagDeliveryMode, DeliveryMode: 2}).AppendTo(nil)
	payload := AppendContentHeader([]byte{9}, 0x0102030405, props)[1:]
	want := []byte{0, 60, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 0x10, 0x00, 2}
	if !bytes.Equal(payload, want) {
		t.Fatalf("AppendContentHeader:\n got %x\nwant %x", payload, want)
	}
	h, err := ParseContentHeader(payload)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClassID != ClassBasic || h.BodySize != 0x0102030405 || !bytes.Equal(h.Props, props) {
		t.Fatalf("ParseContentHeader = %+v", h)
	}
	// A non-zero weight, which the spec says must be zero, is ignored.
	payload[2], payload[3] = 0xff, 0xff
	if h2, err := ParseContentHeader(payload); err != nil || h2.BodySize != h.BodySize {
		t.Fatalf("with a weight: %+v, %v", h2, err)
	}
	for cut := range 14 {
		if _, err := ParseContentHeader(payload[:cut]); !errors.Is(err, ErrTruncated) {
			t.Errorf("%d bytes: error %v, want ErrTruncated", cut, err)
		}
	}
}

// TestPropertiesDecodeReusesEqualStrings checks that a reused struct keeps
// strings equal to the incoming bytes, and that new strings are copies that do
// not alias the input.
func TestPropertiesDecodeReusesEqualStrings(t *testing.T) {
	first := Properties{Flags: FlagContentType | FlagMessageID, ContentType: "text/plain", MessageID: "m1"}
	var p Properties
	if err := p.Decode(first.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	ct := unsafe.StringData(p.ContentType)
	second := Properties{Flags: FlagContentType | FlagMessageID, ContentType: "text/plain", MessageID: "m2"}
	raw := second.AppendTo(nil)
	if err := p.Decode(raw); err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(p.ContentType) != ct {
		t.Error("decoding an equal content type replaced the string")
	}
	for i := range raw {
		raw[i] = 'Z'
	}
	if !sameValue(p, second) {
		t.Fatalf("got %+v, want %+v", p, second)
	}
}
