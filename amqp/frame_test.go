package amqp

import (
	"bytes"
	"errors"
	"testing"
)

func TestParseFrameWhole(t *testing.T) {
	frame := []byte{3, 0x01, 0x02, 0, 0, 0, 3, 'a', 'b', 'c', 0xce}
	f, n, err := ParseFrame(frame, 0)
	if err != nil || n != len(frame) {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if f.Type != TypeBody || f.Channel != 0x0102 || string(f.Payload) != "abc" {
		t.Fatalf("parsed %+v", f)
	}
	if cap(f.Payload) != 3 {
		t.Fatalf("payload capacity %d reaches past the payload", cap(f.Payload))
	}
	if FrameSize(frame) != len(frame) {
		t.Fatalf("FrameSize = %d, want %d", FrameSize(frame), len(frame))
	}
}

// TestParseFrameSequence parses back-to-back frames of every type from one
// buffer, as a connection's reader does.
func TestParseFrameSequence(t *testing.T) {
	var buf []byte
	buf = AppendMethodFrame(buf, 1, &BasicPublish{Exchange: "e", RoutingKey: "k"})
	buf = AppendContent(buf, 1, 0, (&Properties{}).AppendTo(nil), []byte("hello"))
	buf = AppendHeartbeat(buf)
	wantTypes := []uint8{TypeMethod, TypeHeader, TypeBody, TypeHeartbeat}
	for i, want := range wantTypes {
		f, n, err := ParseFrame(buf, FrameMinSize)
		if err != nil || n == 0 {
			t.Fatalf("frame %d: n=%d err=%v", i, n, err)
		}
		if f.Type != want {
			t.Fatalf("frame %d: type %d, want %d", i, f.Type, want)
		}
		if want == TypeBody && string(f.Payload) != "hello" {
			t.Fatalf("body %q", f.Payload)
		}
		buf = buf[n:]
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left over", len(buf))
	}
}

// TestParseFramePartial checks every prefix of a frame asks for more input.
func TestParseFramePartial(t *testing.T) {
	frame := AppendMethodFrame(nil, 3, &ConnectionTune{ChannelMax: 1, FrameMax: 2, Heartbeat: 3})
	for cut := range len(frame) {
		f, n, err := ParseFrame(frame[:cut], 0)
		if n != 0 || err != nil || f.Payload != nil {
			t.Errorf("prefix of %d bytes: %+v n=%d err=%v, want n=0 and no error", cut, f, n, err)
		}
		wantSize := 0
		if cut >= 7 {
			wantSize = len(frame)
		}
		if got := FrameSize(frame[:cut]); got != wantSize {
			t.Errorf("FrameSize of %d bytes = %d, want %d", cut, got, wantSize)
		}
	}
}

func TestParseFrameBadEnd(t *testing.T) {
	frame := AppendHeartbeat(nil)
	frame[len(frame)-1] = 0xcd
	if _, n, err := ParseFrame(frame, 0); !errors.Is(err, ErrFrameEnd) || n != 0 {
		t.Fatalf("n=%d err=%v, want ErrFrameEnd", n, err)
	}
	// The end octet is checked where the size says, not at the buffer's end.
	frame = append(AppendHeartbeat(nil), 0xce)
	frame[7] = 0
	if _, _, err := ParseFrame(frame, 0); !errors.Is(err, ErrFrameEnd) {
		t.Fatalf("err=%v, want ErrFrameEnd", err)
	}
}

func TestParseFrameTooLarge(t *testing.T) {
	body := make([]byte, 100)
	frame := AppendContent(nil, 1, 0, []byte{0, 0}, body)
	frame = frame[FrameSize(frame):] // the body frame: 108 bytes in all
	if _, n, err := ParseFrame(frame, 108); err != nil || n != 108 {
		t.Fatalf("frame of exactly frame-max: n=%d err=%v", n, err)
	}
	if _, _, err := ParseFrame(frame, 107); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame one byte over frame-max: err=%v, want ErrFrameTooLarge", err)
	}
	// The size is checked from the header alone, before the payload arrives.
	if _, _, err := ParseFrame(frame[:7], 107); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("header only: err=%v, want ErrFrameTooLarge", err)
	}
	huge := []byte{TypeBody, 0, 1, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := ParseFrame(huge, 131072); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("4 GiB frame: err=%v, want ErrFrameTooLarge", err)
	}
	if _, n, err := ParseFrame(huge, 0); err != nil || n != 0 {
		t.Fatalf("4 GiB frame without frame-max: n=%d err=%v, want a request for more", n, err)
	}
}

func TestParseFrameUnknownType(t *testing.T) {
	for _, typ := range []byte{0, 4, 5, 7, 9, 'A', 0xff} {
		frame := []byte{typ, 0, 0, 0, 0, 0, 0, 0xce}
		if _, _, err := ParseFrame(frame, 0); !errors.Is(err, ErrFrameType) {
			t.Errorf("type %d: err=%v, want ErrFrameType", typ, err)
		}
		// Known from the first 7 bytes already.
		if _, _, err := ParseFrame(frame[:7], 0); !errors.Is(err, ErrFrameType) {
			t.Errorf("type %d, header only: err=%v, want ErrFrameType", typ, err)
		}
	}
	// The protocol header is not a frame.
	if _, _, err := ParseFrame(ProtocolHeader, 0); !errors.Is(err, ErrFrameType) {
		t.Errorf("protocol header: err=%v, want ErrFrameType", err)
	}
}

func TestHeartbeat(t *testing.T) {
	hb := AppendHeartbeat([]byte{1})
	if want := []byte{1, 8, 0, 0, 0, 0, 0, 0, 0xce}; !bytes.Equal(hb, want) {
		t.Fatalf("AppendHeartbeat = %x, want %x", hb, want)
	}
	f, n, err := ParseFrame(hb[1:], FrameMinSize)
	if err != nil || n != 8 || f.Type != TypeHeartbeat || f.Channel != 0 || len(f.Payload) != 0 {
		t.Fatalf("parsed %+v n=%d err=%v", f, n, err)
	}
}

func TestBeginEndFrame(t *testing.T) {
	b, start := BeginFrame([]byte("xx"), TypeBody, 0xabcd)
	if start != 9 {
		t.Fatalf("payload starts at %d, want 9", start)
	}
	b = EndFrame(append(b, "payload"...), start)
	want := []byte{'x', 'x', 3, 0xab, 0xcd, 0, 0, 0, 7, 'p', 'a', 'y', 'l', 'o', 'a', 'd', 0xce}
	if !bytes.Equal(b, want) {
		t.Fatalf("got %x, want %x", b, want)
	}
}

// TestAppendContentSplits checks bodies are cut into frames no larger than
// frameMax, with the content header first and the body intact.
func TestAppendContentSplits(t *testing.T) {
	const frameMax = FrameMinSize
	const chunk = frameMax - FrameOverhead
	props := (&Properties{Flags: FlagContentType, ContentType: "text/plain"}).AppendTo(nil)
	for _, size := range []int{0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 3*chunk + 5} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i * 7)
		}
		buf := AppendContent([]byte("method"), 9, frameMax, props, body)
		if string(buf[:6]) != "method" {
			t.Fatalf("size %d: prefix overwritten", size)
		}
		checkContentFrames(t, buf[6:], frameMax, 9, props, body, (size+chunk-1)/chunk)
	}
}

// checkContentFrames parses a content header and its body frames from buf and
// checks them against props and body.
func checkContentFrames(t *testing.T, buf []byte, frameMax uint32, channel uint16, props, body []byte, wantBodyFrames int) {
	t.Helper()
	f, n, err := ParseFrame(buf, frameMax)
	if err != nil || n == 0 || f.Type != TypeHeader || f.Channel != channel {
		t.Fatalf("size %d: header frame %+v n=%d err=%v", len(body), f, n, err)
	}
	h, err := ParseContentHeader(f.Payload)
	if err != nil || h.ClassID != ClassBasic || h.BodySize != uint64(len(body)) || !bytes.Equal(h.Props, props) {
		t.Fatalf("size %d: content header %+v err=%v", len(body), h, err)
	}
	buf = buf[n:]
	var got []byte
	frames := 0
	for len(buf) > 0 {
		f, n, err := ParseFrame(buf, frameMax)
		if err != nil || n == 0 || f.Type != TypeBody || f.Channel != channel {
			t.Fatalf("size %d: body frame %d: %+v n=%d err=%v", len(body), frames, f, n, err)
		}
		if len(f.Payload) == 0 {
			t.Fatalf("size %d: empty body frame", len(body))
		}
		got = append(got, f.Payload...)
		buf = buf[n:]
		frames++
	}
	if frames != wantBodyFrames {
		t.Fatalf("size %d: %d body frames, want %d", len(body), frames, wantBodyFrames)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("size %d: body differs after splitting", len(body))
	}
}

// TestAppendContentNoFrameMax sends the body in one frame when frameMax is 0.
func TestAppendContentNoFrameMax(t *testing.T) {
	body := bytes.Repeat([]byte("z"), 200000)
	buf := AppendContent(nil, 1, 0, []byte{0, 0}, body)
	checkContentFrames(t, buf, 0, 1, []byte{0, 0}, body, 1)
}
