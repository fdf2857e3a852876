package amqp

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// parsedFrame is a frame copied out of the buffer it was parsed from.
type parsedFrame struct {
	typ     uint8
	channel uint16
	payload string
}

// parseStream feeds chunks one after another into a growing buffer and parses
// every whole frame, as a connection's reader does. It returns the frames, the
// bytes left unparsed and the first error.
func parseStream(t *testing.T, chunks [][]byte, frameMax uint32) ([]parsedFrame, int, error) {
	var buf, frames = []byte(nil), []parsedFrame(nil)
	for _, chunk := range chunks {
		buf = append(buf, chunk...)
		for {
			f, n, err := ParseFrame(buf, frameMax)
			if err != nil {
				if n != 0 {
					t.Fatalf("error %v with n=%d", err, n)
				}
				return frames, len(buf), err
			}
			if n == 0 {
				break
			}
			if n != len(f.Payload)+FrameOverhead || FrameSize(buf) != n || buf[n-1] != FrameEnd {
				t.Fatalf("n=%d, payload %d bytes, FrameSize %d", n, len(f.Payload), FrameSize(buf))
			}
			if frameMax > 0 && n > int(frameMax) {
				t.Fatalf("accepted a %d-byte frame with frame-max %d", n, frameMax)
			}
			if len(f.Payload) > 0 && &f.Payload[0] != &buf[7] {
				t.Fatal("payload does not alias the buffer")
			}
			frames = append(frames, parsedFrame{f.Type, f.Channel, string(f.Payload)})
			buf = buf[n:]
		}
	}
	return frames, len(buf), nil
}

// FuzzParseFrame parses a byte stream delivered whole and delivered in two
// pieces split at a fuzzed position; both must give the same frames and error.
func FuzzParseFrame(f *testing.F) {
	props := fullProperties()
	var stream []byte
	stream = AppendMethodFrame(stream, 1, &BasicPublish{Exchange: "amq.direct", RoutingKey: "rk", Mandatory: true})
	stream = AppendContent(stream, 1, 4096, props.AppendTo(nil), bytes.Repeat([]byte("b"), 5000))
	stream = AppendHeartbeat(stream)
	f.Add(stream, uint16(11), uint32(4096))
	f.Add(stream, uint16(3), uint32(0))
	f.Add(AppendHeartbeat(nil), uint16(7), uint32(8))
	f.Add([]byte{TypeBody, 0, 1, 0, 0, 0, 1, 'x', 0xcd}, uint16(8), uint32(0))
	f.Add([]byte{4, 0, 0, 0, 0, 0, 0, 0xce}, uint16(0), uint32(0))
	f.Add([]byte{TypeBody, 0, 1, 0xff, 0xff, 0xff, 0xff}, uint16(2), uint32(131072))
	f.Add(append(append([]byte{}, ProtocolHeader...), AppendHeartbeat(nil)...), uint16(4), uint32(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, frameMax uint32) {
		k := int(cut) % (len(data) + 1)
		wantFrames, wantRest, wantErr := parseStream(t, [][]byte{data}, frameMax)
		gotFrames, gotRest, gotErr := parseStream(t, [][]byte{data[:k], data[k:]}, frameMax)
		if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Fatalf("split at %d: error %v, whole: %v", k, gotErr, wantErr)
		}
		if len(gotFrames) != len(wantFrames) {
			t.Fatalf("split at %d: %d frames, whole: %d", k, len(gotFrames), len(wantFrames))
		}
		for i := range wantFrames {
			if gotFrames[i] != wantFrames[i] {
				t.Fatalf("split at %d: frame %d is %+v, whole: %+v", k, i, gotFrames[i], wantFrames[i])
			}
		}
		if wantErr == nil && gotRest != wantRest {
			t.Fatalf("split at %d: %d bytes left, whole: %d", k, gotRest, wantRest)
		}
	})
}

// methodSeeds returns encodings of every method, empty and filled.
func methodSeeds() [][]byte {
	r := rand.New(rand.NewPCG(11, 12))
	var seeds [][]byte
	for _, id := range allMethodIDs() {
		m := newMethod(id)
		seeds = append(seeds, m.AppendTo(nil))
		fillRandom(r, m, r.Uint64())
		seeds = append(seeds, m.AppendTo(nil))
	}
	return seeds
}

// FuzzDecodeMethod decodes arbitrary method payloads. What decodes must
// re-encode stably, and decoding into a reused struct must give the same result
// as decoding into a fresh one.
func FuzzDecodeMethod(f *testing.F) {
	for _, seed := range methodSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMethod(data)
		if len(data) >= 4 {
			if reused := newMethod(uint32(data[0])<<24 | uint32(data[1])<<16 | uint32(data[2])<<8 | uint32(data[3])); reused != nil {
				fillRandom(rand.New(rand.NewPCG(uint64(len(data)), 1)), reused, ^uint64(0))
				rerr := reused.Decode(data[4:])
				if (rerr == nil) != (err == nil) {
					t.Fatalf("reused struct: error %v, fresh: %v", rerr, err)
				}
				if err == nil && !sameValue(reused, m) {
					t.Fatalf("reused struct decoded %+v, fresh %+v", reused, m)
				}
			}
		}
		if err != nil {
			return
		}
		enc := m.AppendTo(nil)
		if len(enc) > len(data) {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(data), len(enc))
		}
		m2, err := DecodeMethod(enc)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", m.Name(), err)
		}
		if !sameValue(m, m2) {
			t.Fatalf("re-encoded %s decodes to %+v, first %+v", m.Name(), m2, m)
		}
		if enc2 := m2.AppendTo(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding of %s is not stable:\n%x\n%x", m.Name(), enc, enc2)
		}
	})
}

// FuzzDecodeTable decodes arbitrary field tables. A decoded table must
// re-encode to no more bytes and decode to an equal table.
func FuzzDecodeTable(f *testing.F) {
	f.Add(AppendTable(nil, sampleTable()))
	f.Add(AppendTable(nil, nil))
	f.Add(AppendTable(nil, nestMixed(MaxTableDepth)))
	f.Add(AppendTable(nil, nestTables(MaxTableDepth+1)))
	r := rand.New(rand.NewPCG(13, 14))
	for range 5 {
		f.Add(AppendTable(nil, randTable(r, 3)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := DecodeTable(data)
		if err != nil {
			return
		}
		enc := AppendTable(nil, tab)
		if len(enc) > len(data) {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(data), len(enc))
		}
		tab2, err := DecodeTable(enc)
		if err != nil {
			t.Fatalf("re-encoded table does not decode: %v", err)
		}
		if !sameValue(tab, tab2) {
			t.Fatalf("re-encoded table decodes to %#v, first %#v", tab2, tab)
		}
		if enc2 := AppendTable(nil, tab2); !bytes.Equal(enc, enc2) {
			t.Fatalf("table encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzProperties decodes arbitrary property lists. The peek functions must
// agree with Decode, and decoded properties must round-trip.
func FuzzProperties(f *testing.F) {
	full := fullProperties()
	f.Add(full.AppendTo(nil))
	f.Add((&Properties{Flags: allPropertyFlags}).AppendTo(nil))
	f.Add((&Properties{Flags: FlagDeliveryMode | FlagPriority, DeliveryMode: 2, Priority: 3}).AppendTo(nil))
	f.Add([]byte{0x18, 0x01, 0x00, 0x00, 2, 7})
	r := rand.New(rand.NewPCG(15, 16))
	for range 5 {
		p := randProperties(r, uint16(r.Uint32())&allPropertyFlags)
		f.Add(p.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mode := PeekDeliveryMode(data)
		prio, hasPrio := PeekPriority(data)
		var p Properties
		err := p.Decode(data)
		// CheckProperties accepts what Decode accepts, with the same flags; it
		// judges the headers table by its length only.
		flags, cerr := CheckProperties(data)
		if err == nil && (cerr != nil || flags != p.Flags) {
			t.Fatalf("Decode ok with flags %#x, CheckProperties %#x, %v", p.Flags, flags, cerr)
		}
		if cerr == nil && err != nil && flags&FlagHeaders == 0 {
			t.Fatalf("CheckProperties accepted what Decode refused: %v", err)
		}
		reused := fullProperties()
		if rerr := reused.Decode(data); (rerr == nil) != (err == nil) {
			t.Fatalf("reused struct: error %v, fresh: %v", rerr, err)
		}
		if err != nil {
			return
		}
		if !sameValue(reused, p) {
			t.Fatalf("reused struct decoded %+v, fresh %+v", reused, p)
		}
		if mode != p.DeliveryMode || hasPrio != (p.Flags&FlagPriority != 0) || prio != p.Priority {
			t.Fatalf("peek says mode %d priority %d/%v, Decode %+v", mode, prio, hasPrio, p)
		}
		enc := p.AppendTo(nil)
		var p2 Properties
		if err := p2.Decode(enc); err != nil {
			t.Fatalf("re-encoded properties do not decode: %v", err)
		}
		if !sameValue(p, p2) {
			t.Fatalf("re-encoded properties decode to %+v, first %+v", p2, p)
		}
		if enc2 := p2.AppendTo(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("property encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}
