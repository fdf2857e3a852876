package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseFrameRoundTrip(t *testing.T) {
	var b []byte
	b = appendMethodFrame(b, 0, mConnectionCloseOk, nil)
	b = appendBasicAck(b, 7, 1<<40+3, true)
	b = appendHeartbeat(b)
	b = appendClose(b, 1, replyNotFound, "NOT_FOUND - no exchange 'x'")
	want := []struct {
		typ     byte
		channel uint16
		method  methodKey
	}{{frameMethod, 0, mConnectionCloseOk}, {frameMethod, 7, mBasicAck}, {frameHeartbeat, 0, 0}, {frameMethod, 1, mChannelClose}}
	rest := b
	for i, w := range want {
		// Every strict prefix of a frame is incomplete, not an error.
		f, n, err := parseFrame(rest, 1<<20)
		if err != nil || n == 0 {
			t.Fatalf("frame %d: n=%d err=%v", i, n, err)
		}
		for cut := range n {
			if _, m, err := parseFrame(rest[:cut], 1<<20); m != 0 || err != nil {
				t.Fatalf("frame %d cut at %d: n=%d err=%v, want incomplete", i, cut, m, err)
			}
		}
		if f.typ != w.typ || f.channel != w.channel {
			t.Fatalf("frame %d: type %d channel %d, want %d %d", i, f.typ, f.channel, w.typ, w.channel)
		}
		if f.typ == frameMethod {
			k, r, err := f.method()
			if err != nil || k != w.method {
				t.Fatalf("frame %d: method %v err %v, want %v", i, methodName(k), err, methodName(w.method))
			}
			switch k {
			case mBasicAck:
				tag, multiple, err := parseConfirm(r)
				if err != nil || tag != 1<<40+3 || !multiple {
					t.Fatalf("ack: tag %d multiple %t err %v", tag, multiple, err)
				}
			case mChannelClose:
				ca, err := parseClose(r)
				if err != nil || ca.code != replyNotFound || ca.text != "NOT_FOUND - no exchange 'x'" {
					t.Fatalf("close: %+v %v", ca, err)
				}
			}
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left over", len(rest))
	}
}

func TestParseFrameRejectsCorruption(t *testing.T) {
	good := appendBasicAck(nil, 1, 5, false)
	bad := bytes.Clone(good)
	bad[len(bad)-1] = 0
	if _, _, err := parseFrame(bad, 1<<20); !errors.Is(err, errMalformed) {
		t.Errorf("wrong frame end: err %v", err)
	}
	if _, _, err := parseFrame(good, len(good)-frameOverhead-1); !errors.Is(err, errMalformed) {
		t.Errorf("payload above the limit: err %v", err)
	}
	huge := []byte{frameBody, 0, 1, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := parseFrame(huge, clientFrameMax); !errors.Is(err, errMalformed) {
		t.Errorf("4 GiB size announced: err %v", err)
	}
	f, _, _ := parseFrame(appendHeartbeat(nil), 1<<20)
	if _, _, err := f.method(); err == nil {
		t.Error("heartbeat parsed as a method")
	}
}

func TestAppendPublishGolden(t *testing.T) {
	body := make([]byte, 16)
	body[15] = 0xAB
	const ts = 0x0102030405060708
	got, tsOff := appendPublish(nil, 1, "", "q", 1, body, ts, 4096)
	want := []byte{
		// basic.publish: class 60, method 40, ticket 0, exchange "", key "q", bits 0
		1, 0, 1, 0, 0, 0, 10, 0, 60, 0, 40, 0, 0, 0, 1, 'q', 0, 0xCE,
		// header: class 60, weight 0, size 16, flags delivery-mode, mode 1
		2, 0, 1, 0, 0, 0, 15, 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0x10, 0, 1, 0xCE,
		// body: the time in the first 8 bytes, then the rest of the body
		3, 0, 1, 0, 0, 0, 16, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0xAB, 0xCE,
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n% x\nwant\n% x", got, want)
	}
	if tsOff != 18+23+7 {
		t.Fatalf("tsOff %d, want %d", tsOff, 18+23+7)
	}
	if body[0] != 0 {
		t.Fatal("appendPublish wrote into the caller's body")
	}
}

// decodedMessage is one publish parsed back from frames.
type decodedMessage struct {
	exchange, key string
	mode          byte
	body          []byte
	ts            int64
	tsOK          bool
	maxFrame      int // largest frame seen, overhead included
}

// decodePublishes parses the publishes in b, checking the frame sequence.
func decodePublishes(t *testing.T, b []byte, frameMax int) []decodedMessage {
	t.Helper()
	var out []decodedMessage
	for len(b) > 0 {
		var m decodedMessage
		next := func(typ byte) frame {
			t.Helper()
			f, n, err := parseFrame(b, frameMax-frameOverhead)
			if err != nil || n == 0 || f.typ != typ || f.channel != 1 {
				t.Fatalf("frame type %d channel %d n %d err %v, want type %d on channel 1", f.typ, f.channel, n, err, typ)
			}
			m.maxFrame = max(m.maxFrame, n)
			b = b[n:]
			return f
		}
		k, r, err := next(frameMethod).method()
		if err != nil || k != mBasicPublish {
			t.Fatalf("method %s err %v, want basic.publish", methodName(k), err)
		}
		r.u16()
		m.exchange, m.key = string(r.shortStr()), string(r.shortStr())
		r.u8()
		if !r.ok() || len(r.b) != 0 {
			t.Fatalf("basic.publish arguments malformed")
		}
		hf := next(frameHeader)
		h, err := parseContentHeader(hf.payload)
		if err != nil {
			t.Fatal(err)
		}
		// The delivery mode is the last property the encoder writes.
		m.mode = hf.payload[len(hf.payload)-1]
		for uint64(len(m.body)) < h.bodySize {
			m.body = append(m.body, next(frameBody).payload...)
		}
		if uint64(len(m.body)) != h.bodySize {
			t.Fatalf("body of %d bytes, header says %d", len(m.body), h.bodySize)
		}
		if len(m.body) >= 8 {
			m.ts = int64(binary.BigEndian.Uint64(m.body))
			m.tsOK = m.ts > 0
		} else {
			m.ts, m.tsOK = tableTimestamp(h.headers)
		}
		out = append(out, m)
	}
	return out
}

func TestAppendPublishSplitsBodyAtFrameMax(t *testing.T) {
	body := make([]byte, 10_000)
	for i := range body {
		body[i] = byte(i)
	}
	b, _ := appendPublish(nil, 1, "ex", "key", 2, body, 42, 4096)
	msgs := decodePublishes(t, b, 4096)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if m.exchange != "ex" || m.key != "key" || m.mode != 2 || m.ts != 42 || m.maxFrame != 4096 {
		t.Fatalf("decoded %q %q mode %d ts %d max frame %d", m.exchange, m.key, m.mode, m.ts, m.maxFrame)
	}
	if !bytes.Equal(m.body[8:], body[8:]) {
		t.Fatal("body bytes after the timestamp differ")
	}
	// 10,000 bytes in frames of at most 4,088: three body frames.
	if n := bytes.Count(b, []byte{frameEnd}); n < 5 {
		t.Fatalf("only %d frame ends", n)
	}
}

func TestAppendPublishSmallBodyCarriesTimeInHeader(t *testing.T) {
	for _, size := range []int{0, 1, 7} {
		tmpl, err := newPublishTemplate(1, "", "q", size, false, 4096)
		if err != nil {
			t.Fatal(err)
		}
		b := tmpl.appendTo(nil, 1_700_000_000_000_000_001)
		b = tmpl.appendTo(b, 1_700_000_000_000_000_002)
		msgs := decodePublishes(t, b, 4096)
		if len(msgs) != 2 || len(msgs[0].body) != size || msgs[0].ts != 1_700_000_000_000_000_001 ||
			msgs[1].ts != 1_700_000_000_000_000_002 || !msgs[1].tsOK || msgs[0].mode != 1 {
			t.Fatalf("size %d: %+v", size, msgs)
		}
	}
}

func TestTableTimestamp(t *testing.T) {
	entries := func(f func([]byte) []byte) []byte {
		b := appendTable(nil, f)
		return b[4:] // the table's bytes, as parseContentHeader returns them
	}
	long := func(b []byte, key string, v int64) []byte {
		return binary.BigEndian.AppendUint64(append(appendShortStr(b, key), 'l'), uint64(v))
	}
	tests := []struct {
		name  string
		table []byte
		want  int64
		ok    bool
	}{
		{"alone", entries(func(b []byte) []byte { return long(b, tsHeader, 99) }), 99, true},
		{"after others", entries(func(b []byte) []byte {
			b = appendTableString(b, "a", "text")
			b = appendTableBool(b, "b", true)
			b = long(b, "c", 5)
			b = append(appendShortStr(b, "d"), 'F', 0, 0, 0, 0)
			b = append(appendShortStr(b, "e"), 'V')
			return long(b, tsHeader, 77)
		}), 77, true},
		{"int32", entries(func(b []byte) []byte {
			return binary.BigEndian.AppendUint32(append(appendShortStr(b, tsHeader), 'I'), 12345)
		}), 12345, true},
		{"negative", entries(func(b []byte) []byte { return long(b, tsHeader, -5) }), 0, false},
		{"string", entries(func(b []byte) []byte { return appendTableString(b, tsHeader, "soon") }), 0, false},
		{"missing", entries(func(b []byte) []byte { return long(b, "other", 5) }), 0, false},
		{"unknown type first", entries(func(b []byte) []byte { return long(append(appendShortStr(b, "z"), '?'), tsHeader, 5) }), 0, false},
		{"truncated", entries(func(b []byte) []byte { return long(b, tsHeader, 5) })[:10], 0, false},
		{"empty", nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := tableTimestamp(tt.table)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("%s: %d %t, want %d %t", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestConfirmTracker(t *testing.T) {
	tr := newConfirmTracker(10)
	if tr.available() != 10 {
		t.Fatalf("available %d, want 10", tr.available())
	}
	tr.reserve(10) // tags 1..10
	if tr.available() != 0 {
		t.Fatalf("available %d after reserving the window", tr.available())
	}
	steps := []struct {
		tag      uint64
		multiple bool
		settled  int
	}{
		{3, true, 3},   // 1..3
		{3, true, 0},   // again: nothing new
		{5, false, 1},  // 5 alone, out of order
		{5, false, 0},  // duplicate
		{6, true, 2},   // 4 and 6 (5 was settled)
		{20, false, 0}, // never published
		{8, false, 1},
		{10, true, 3}, // 7, 9, 10
	}
	for i, s := range steps {
		if got := tr.settle(s.tag, s.multiple); got != s.settled {
			t.Fatalf("step %d: settle(%d, %t) = %d, want %d", i, s.tag, s.multiple, got, s.settled)
		}
	}
	if tr.outstanding != 0 || tr.base != 11 || tr.available() != 10 {
		t.Fatalf("outstanding %d base %d available %d", tr.outstanding, tr.base, tr.available())
	}
	tr.reserve(4) // 11..14
	tr.unreserve(2)
	if tr.outstanding != 2 || tr.next != 13 {
		t.Fatalf("after unreserve: outstanding %d next %d", tr.outstanding, tr.next)
	}
	if got := tr.settle(0, true); got != 2 {
		t.Fatalf("settle(0, multiple) = %d, want every outstanding tag (2)", got)
	}
	// An old unsettled tag holds the ring: the span, not only the count,
	// limits reservations, so no two live tags share a bit.
	tr = newConfirmTracker(4) // ring of 64 tags
	tr.reserve(4)
	tr.settle(4, false)
	tr.settle(3, false)
	tr.settle(2, false) // tag 1 stays outstanding
	for range 100 {
		n := tr.available()
		if n == 0 {
			break
		}
		tr.reserve(1)
		tr.settle(tr.next-1, false)
	}
	if span := tr.next - tr.base; span > tr.mask+1 {
		t.Fatalf("span %d exceeds the ring of %d", span, tr.mask+1)
	}
	if got := tr.settle(1, false); got != 1 || tr.outstanding != 0 {
		t.Fatalf("settling the old tag: %d, outstanding %d", got, tr.outstanding)
	}
}

func TestParseAMQPURI(t *testing.T) {
	tests := []struct {
		raw                    string
		addr, user, pass, host string
		vhost                  string
		tls                    bool
	}{
		{"amqp://guest:guest@127.0.0.1:5798/", "127.0.0.1:5798", "guest", "guest", "127.0.0.1", "/", false},
		{"amqp://localhost", "localhost:5672", "guest", "guest", "localhost", "/", false},
		{"amqps://u:p%40ss@broker/vh", "broker:5671", "u", "p@ss", "broker", "vh", true},
		{"amqp://u@[::1]:5673/%2f", "[::1]:5673", "u", "guest", "::1", "/", false},
	}
	for _, tt := range tests {
		u, err := parseAMQPURI(tt.raw)
		if err != nil {
			t.Fatalf("%s: %v", tt.raw, err)
		}
		if u.addr != tt.addr || u.user != tt.user || u.password != tt.pass || u.host != tt.host || u.vhost != tt.vhost || u.tls != tt.tls {
			t.Errorf("%s: %+v", tt.raw, u)
		}
	}
	if _, err := parseAMQPURI("http://localhost/"); err == nil {
		t.Error("http scheme accepted")
	}
}

// fakeBroker is the server side of one AMQP connection on real TCP,
// scripted by a test: it checks what the fast client sends frame by frame.
type fakeBroker struct {
	t        *testing.T
	conn     net.Conn
	buf      []byte
	frameMax int
}

// startFakeBroker listens on 127.0.0.1 and runs script on the first
// connection in a goroutine owned by the test; the test's end waits for it.
// script's error is reported with t.Error.
func startFakeBroker(t *testing.T, script func(b *fakeBroker) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			t.Errorf("fake broker: accept: %v", err)
			return
		}
		defer conn.Close()
		// Bounds a script whose client never comes.
		if err := conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
			t.Errorf("fake broker: %v", err)
			return
		}
		if err := script(&fakeBroker{t: t, conn: conn, frameMax: clientFrameMax}); err != nil {
			t.Errorf("fake broker: %v", err)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "amqp://guest:guest@" + ln.Addr().String() + "/"
}

// frame reads the next frame from the client.
func (b *fakeBroker) frame() (frame, error) {
	for {
		f, n, err := parseFrame(b.buf, b.frameMax-frameOverhead)
		if err != nil {
			return frame{}, err
		}
		if n > 0 {
			// Copy: the payload must survive the next read.
			f.payload = bytes.Clone(f.payload)
			b.buf = b.buf[n:]
			return f, nil
		}
		chunk := make([]byte, 64<<10)
		m, err := b.conn.Read(chunk)
		if m == 0 && err != nil {
			return frame{}, fmt.Errorf("read: %w", err)
		}
		b.buf = append(b.buf, chunk[:m]...)
	}
}

// expect reads the next frame, skipping heartbeats, and checks that it is
// method want.
func (b *fakeBroker) expect(want methodKey) (argReader, error) {
	for {
		f, err := b.frame()
		if err != nil {
			return argReader{}, fmt.Errorf("waiting for %s: %w", methodName(want), err)
		}
		if f.typ == frameHeartbeat {
			continue
		}
		k, r, err := f.method()
		if err != nil || k != want {
			return argReader{}, fmt.Errorf("got %s (frame type %d, err %v), want %s", methodName(k), f.typ, err, methodName(want))
		}
		return r, nil
	}
}

func (b *fakeBroker) send(frames []byte) error {
	_, err := b.conn.Write(frames)
	return err
}

// handshake plays the server's side up to channel.open-ok, proposing
// frameMax and heartbeat (seconds). beforeOpenOk is sent just before
// channel.open-ok.
func (b *fakeBroker) handshake(frameMax uint32, heartbeat uint16, beforeOpenOk []byte) error {
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(b.conn, hdr); err != nil || !bytes.Equal(hdr, amqpProtocolHeader) {
		return fmt.Errorf("protocol header %q, %v", hdr, err)
	}
	if err := b.send(appendMethodFrame(nil, 0, mConnectionStart, func(p []byte) []byte {
		p = append(p, 0, 9)
		p = appendTable(p, func(p []byte) []byte { return appendTableString(p, "product", "fake") })
		return appendLongStr(appendLongStr(p, "PLAIN AMQPLAIN"), "en_US")
	})); err != nil {
		return err
	}
	r, err := b.expect(mConnectionStartOk)
	if err != nil {
		return err
	}
	props := r.longStr()
	mech, resp := string(r.shortStr()), string(r.longStr())
	if !r.ok() || mech != "PLAIN" || resp != "\x00guest\x00guest" {
		return fmt.Errorf("start-ok: mechanism %q response %q", mech, resp)
	}
	for _, capability := range []string{"publisher_confirms", "consumer_cancel_notify", "basic.nack", "connection.blocked"} {
		if !bytes.Contains(props, []byte(capability)) {
			return fmt.Errorf("client properties lack capability %s", capability)
		}
	}
	if err := b.send(appendMethodFrame(nil, 0, mConnectionTune, func(p []byte) []byte {
		p = binary.BigEndian.AppendUint16(p, 2047)
		p = binary.BigEndian.AppendUint32(p, frameMax)
		return binary.BigEndian.AppendUint16(p, heartbeat)
	})); err != nil {
		return err
	}
	if r, err = b.expect(mConnectionTuneOk); err != nil {
		return err
	}
	chMax, fm, hb := r.u16(), r.u32(), r.u16()
	if chMax != 2047 || fm != frameMax || hb != heartbeat {
		return fmt.Errorf("tune-ok %d %d %d, want %d %d %d", chMax, fm, hb, 2047, frameMax, heartbeat)
	}
	b.frameMax = int(frameMax)
	if r, err = b.expect(mConnectionOpen); err != nil {
		return err
	}
	if vhost := string(r.shortStr()); vhost != "/" {
		return fmt.Errorf("vhost %q", vhost)
	}
	if err := b.send(appendMethodFrame(nil, 0, mConnectionOpenOk, func(p []byte) []byte { return append(p, 0) })); err != nil {
		return err
	}
	if _, err := b.expect(mChannelOpen); err != nil {
		return err
	}
	out := append(bytes.Clone(beforeOpenOk), appendMethodFrame(nil, 1, mChannelOpenOk, func(p []byte) []byte { return append(p, 0, 0, 0, 0) })...)
	return b.send(out)
}

// closeHandshake answers the client's connection.close.
func (b *fakeBroker) closeHandshake() error {
	if _, err := b.expect(mConnectionClose); err != nil {
		return err
	}
	return b.send(appendMethodFrame(nil, 0, mConnectionCloseOk, nil))
}

// readPublishes reads n publishes and checks their frames against frame_max.
func (b *fakeBroker) readPublishes(n, size int) error {
	for i := range n {
		if _, err := b.expect(mBasicPublish); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		f, err := b.frame()
		if err != nil || f.typ != frameHeader {
			return fmt.Errorf("message %d: header frame type %d, %v", i, f.typ, err)
		}
		h, err := parseContentHeader(f.payload)
		if err != nil || h.bodySize != uint64(size) {
			return fmt.Errorf("message %d: body size %d, %v", i, h.bodySize, err)
		}
		var body []byte
		for len(body) < size {
			f, err := b.frame() // parseFrame rejects a frame above frame_max
			if err != nil || f.typ != frameBody {
				return fmt.Errorf("message %d: body frame type %d, %v", i, f.typ, err)
			}
			body = append(body, f.payload...)
		}
		if ts := int64(binary.BigEndian.Uint64(body)); ts <= 0 {
			return fmt.Errorf("message %d: no publish time in the body", i)
		}
	}
	return nil
}

// fakeConfig is a configuration for a fast worker talking to a fake broker.
func fakeConfig(url string) *Config {
	cfg := DefaultConfig()
	cfg.URL = url
	cfg.DrainTimeout = 10 * time.Second
	return &cfg
}

func TestFastPublisherConfirmsMultipleAndNacks(t *testing.T) {
	const n, size = 10, 10_000 // bodies span three frames of a 4096-byte frame_max
	url := startFakeBroker(t, func(b *fakeBroker) error {
		if err := b.handshake(4096, 0, nil); err != nil {
			return err
		}
		if _, err := b.expect(mConfirmSelect); err != nil {
			return err
		}
		if err := b.send(appendMethodFrame(nil, 1, mConfirmSelectOk, nil)); err != nil {
			return err
		}
		if err := b.readPublishes(n, size); err != nil {
			return err
		}
		nack := func(p []byte, tag uint64, multiple bool) []byte {
			p, start := beginMethod(p, 1, mBasicNack)
			p = binary.BigEndian.AppendUint64(p, tag)
			bits := byte(2) // requeue
			if multiple {
				bits |= 1
			}
			return endFrame(append(p, bits), start)
		}
		// 1-5 acked at once, 6 nacked, 7-9 acked at once, 10 nacked
		// with multiple, duplicates ignored.
		var out []byte
		out = appendBasicAck(out, 1, 5, true)
		out = nack(out, 6, false)
		out = appendBasicAck(out, 1, 9, true)
		out = appendBasicAck(out, 1, 3, false)
		out = nack(out, 10, true)
		if err := b.send(out); err != nil {
			return err
		}
		return b.closeHandshake()
	})
	cfg := fakeConfig(url)
	cfg.Size, cfg.Confirm, cfg.PMessages = size, n, n
	p, err := openPublisher(cfg, 1, "", "q")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := [3]uint64{p.published.Load(), p.confirmed.Load(), p.nacked.Load()}; got != [3]uint64{n, 8, 2} {
		t.Fatalf("published/confirmed/nacked = %v, want [10 8 2]", got)
	}
	if !p.finished.Load() {
		t.Fatal("publisher not marked finished")
	}
}

func TestFastPublisherWaitsWhileBlocked(t *testing.T) {
	unblocked := make(chan struct{})
	url := startFakeBroker(t, func(b *fakeBroker) error {
		blocked := appendMethodFrame(nil, 0, mConnectionBlocked, func(p []byte) []byte { return appendShortStr(p, "low on memory") })
		if err := b.handshake(4096, 0, blocked); err != nil {
			return err
		}
		// Nothing may arrive while blocked: wait a bounded while for it.
		if err := b.conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
			return err
		}
		if f, err := b.frame(); err == nil {
			return fmt.Errorf("frame of type %d sent while blocked", f.typ)
		} else if !isTimeout(err) {
			return err
		}
		if err := b.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		close(unblocked)
		if err := b.send(appendMethodFrame(nil, 0, mConnectionUnblocked, nil)); err != nil {
			return err
		}
		if err := b.readPublishes(5, 16); err != nil {
			return err
		}
		return b.closeHandshake()
	})
	cfg := fakeConfig(url)
	cfg.PMessages = 5
	p, err := openPublisher(cfg, 1, "", "q")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-unblocked:
	default:
		t.Fatal("publisher finished before the broker unblocked it")
	}
	if p.published.Load() != 5 {
		t.Fatalf("published %d, want 5", p.published.Load())
	}
}

// isTimeout reports whether err is a passed deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestFastConsumerSendsHeartbeats(t *testing.T) {
	url := startFakeBroker(t, func(b *fakeBroker) error {
		if err := b.handshake(8192, 1, nil); err != nil {
			return err
		}
		if _, err := b.expect(mBasicConsume); err != nil {
			return err
		}
		if err := b.send(appendMethodFrame(nil, 1, mBasicConsumeOk, func(p []byte) []byte { return appendShortStr(p, "warren-perf-1") })); err != nil {
			return err
		}
		// The client wrote nothing since consume: within a couple of
		// heartbeat intervals it must send a heartbeat frame.
		if err := b.conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			return err
		}
		f, err := b.frame()
		if err != nil || f.typ != frameHeartbeat {
			return fmt.Errorf("frame type %d, %v; want a heartbeat", f.typ, err)
		}
		// A cancel from the broker ends the consumer with an error.
		if err := b.send(appendMethodFrame(nil, 1, mBasicCancel, func(p []byte) []byte { return append(appendShortStr(p, "warren-perf-1"), 1) })); err != nil {
			return err
		}
		return b.closeHandshake()
	})
	cfg := fakeConfig(url)
	cfg.AutoAck, cfg.Prefetch = true, 0
	c, err := openConsumer(cfg, 1, "q")
	if err != nil {
		t.Fatal(err)
	}
	if c.fast.conn.heartbeat != time.Second {
		t.Fatalf("heartbeat %v, want the broker's 1s", c.fast.conn.heartbeat)
	}
	err = c.run(context.Background())
	if !errors.Is(err, ErrWorker) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("err = %v, want the broker's cancel as ErrWorker", err)
	}
}

func TestFastDialRefusedLogin(t *testing.T) {
	url := startFakeBroker(t, func(b *fakeBroker) error {
		hdr := make([]byte, 8)
		if _, err := io.ReadFull(b.conn, hdr); err != nil {
			return err
		}
		if err := b.send(appendMethodFrame(nil, 0, mConnectionStart, func(p []byte) []byte {
			return appendLongStr(appendLongStr(append(p, 0, 9, 0, 0, 0, 0), "PLAIN"), "en_US")
		})); err != nil {
			return err
		}
		if _, err := b.expect(mConnectionStartOk); err != nil {
			return err
		}
		if err := b.send(appendClose(nil, 0, 403, "ACCESS_REFUSED - Login was refused")); err != nil {
			return err
		}
		_, err := b.expect(mConnectionCloseOk)
		return err
	})
	_, err := dialFast(url, "test")
	var sce *ServerCloseError
	if !errors.Is(err, ErrConnect) || !errors.As(err, &sce) || sce.Code != 403 || !sce.Connection {
		t.Fatalf("err = %v, want ErrConnect with the broker's 403", err)
	}
}

func TestFastPublishToMissingExchangeFails(t *testing.T) {
	for _, confirm := range []int{0, 20} {
		t.Run(fmt.Sprintf("confirm=%d", confirm), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.URL = brokerURL(t)
			cfg.Confirm, cfg.PMessages = confirm, 100
			p, err := openPublisher(&cfg, 1, fmt.Sprintf("no-such-exchange-%d", time.Now().UnixNano()), "k")
			if err != nil {
				t.Fatal(err)
			}
			err = p.run(context.Background())
			var sce *ServerCloseError
			if !errors.Is(err, ErrWorker) || !errors.As(err, &sce) || sce.Code != replyNotFound || sce.Connection {
				t.Fatalf("err = %v, want the broker's channel.close 404 as ErrWorker", err)
			}
		})
	}
}

func TestFastLargeBodiesSpanFrames(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Size = 300_000 // above the broker's 128 KiB frame_max and the publisher's write batch
	cfg.Confirm = 4
	cfg.Prefetch = 3
	cfg.PMessages = 40
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Published != 40 || sum.Confirmed != 40 || sum.Consumed != 40 || sum.Latency.Count != 40 {
		t.Fatalf("published/confirmed/consumed/latencies = %d/%d/%d/%d, want 40 each",
			sum.Published, sum.Confirmed, sum.Consumed, sum.Latency.Count)
	}
}

func TestFastDialWrongPassword(t *testing.T) {
	url := strings.Replace(brokerURL(t), "guest:guest", "guest:wrong", 1)
	_, err := dialFast(url, "test")
	if !errors.Is(err, ErrConnect) {
		t.Fatalf("err = %v, want ErrConnect", err)
	}
}

func TestFastRateLimitedPublisherKeepsLatencyLow(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.Rate = 1000
	cfg.CMessages = 200
	cfg.Duration = 3 * time.Second
	sum, err := run(context.Background(), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Without confirms only the flush before every wait writes the
	// messages: the buffer would otherwise hold them until 64 KiB (about
	// 700 messages, 0.7 s at this rate) accumulate.
	if sum.Consumed != 200 || sum.Latency.P50US > 100_000 {
		t.Fatalf("consumed %d, p50 %.0f µs", sum.Consumed, sum.Latency.P50US)
	}
}

func TestScenarioWithAMQP091Client(t *testing.T) {
	for _, client := range []string{clientAMQP091, clientFast} {
		t.Run(client, func(t *testing.T) {
			o := defaultScenarioOptions()
			o.url = brokerURL(t)
			o.duration = 700 * time.Millisecond
			o.client = client
			res := mustRunScenario(t, "persistent", o)
			if len(res.Phases) != 1 {
				t.Fatalf("%d phases", len(res.Phases))
			}
			s := res.Phases[0]
			if s.Published == 0 || s.Confirmed != s.Published || s.Consumed == 0 || s.Latency.Count == 0 {
				t.Fatalf("summary %+v", s)
			}
		})
	}
}

// FuzzParseFrame feeds arbitrary bytes to the fast client's frame parser
// and the decoders behind it. Nothing may panic; a frame the parser
// accepts must re-encode to the same bytes.
func FuzzParseFrame(f *testing.F) {
	f.Add(appendBasicAck(nil, 1, 5, true))
	f.Add(appendHeartbeat(nil))
	f.Add(appendClose(nil, 1, 404, "NOT_FOUND"))
	pub, _ := appendPublish(nil, 1, "ex", "key", 2, make([]byte, 5000), 7, 4096)
	f.Add(pub)
	small, _ := appendPublish(nil, 1, "", "q", 1, []byte{1, 2}, 7, 4096)
	f.Add(small)
	f.Add(appendMethodFrame(nil, 1, mBasicDeliver, func(b []byte) []byte {
		b = appendShortStr(b, "ctag")
		b = binary.BigEndian.AppendUint64(b, 9)
		return appendShortStr(appendShortStr(append(b, 0), ""), "q")
	}))
	f.Fuzz(func(t *testing.T, data []byte) {
		rest := data
		for {
			fr, n, err := parseFrame(rest, clientFrameMax-frameOverhead)
			if err != nil || n == 0 {
				return
			}
			b, start := beginFrame(nil, fr.typ, fr.channel)
			b = endFrame(append(b, fr.payload...), start)
			if !bytes.Equal(b, rest[:n]) {
				t.Fatalf("re-encoded % x, parsed from % x", b, rest[:n])
			}
			switch fr.typ {
			case frameMethod:
				if k, r, err := fr.method(); err == nil {
					switch k {
					case mBasicAck, mBasicNack:
						_, _, _ = parseConfirm(r)
					case mBasicDeliver:
						_, _ = parseDeliver(r)
					case mConnectionClose, mChannelClose:
						_, _ = parseClose(r)
					}
				}
			case frameHeader:
				if h, err := parseContentHeader(fr.payload); err == nil {
					if ts, ok := tableTimestamp(h.headers); ok && ts <= 0 {
						t.Fatalf("accepted non-positive time %d", ts)
					}
				}
			}
			rest = rest[n:]
		}
	})
}

func BenchmarkPublishEncode(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			tmpl, err := newPublishTemplate(1, "", "warren-perf-transient", size, false, clientFrameMax)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, fastFlushAt+len(tmpl.frames))
			b.ReportAllocs()
			b.SetBytes(int64(len(tmpl.frames)))
			for i := 0; b.Loop(); i++ {
				buf = tmpl.appendTo(buf, int64(i)+1)
				if len(buf) >= fastFlushAt {
					buf = buf[:0]
				}
			}
		})
	}
}

func BenchmarkConsumerParseDelivery(b *testing.B) {
	// One delivery's frames, as a broker sends them for a 16-byte message.
	var in []byte
	in = appendMethodFrame(in, 1, mBasicDeliver, func(p []byte) []byte {
		p = appendShortStr(p, "warren-perf-1")
		p = binary.BigEndian.AppendUint64(p, 1)
		return appendShortStr(appendShortStr(append(p, 0), ""), "q")
	})
	msg, _ := appendPublish(nil, 1, "", "q", 1, make([]byte, 16), 1, clientFrameMax)
	_, n, _ := parseFrame(msg, clientFrameMax)
	in = append(in, msg[n:]...) // header and body frames
	c := &consumer{cfg: &Config{AutoAck: true}, interval: newHistogram(), spare: newHistogram()}
	c.fast = &fastCons{conn: &fastConn{frameMax: clientFrameMax}}
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		rest := in
		for len(rest) > 0 {
			fr, n, err := parseFrame(rest, clientFrameMax)
			if err != nil || n == 0 {
				b.Fatalf("parse: n=%d err=%v", n, err)
			}
			if _, err := c.onFrame(fr, 2); err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
		}
	}
}

// TestClientsInteroperate publishes with one client and consumes with the
// other, so that each client's encoding is checked by an independent
// decoder (amqp091-go's), including the time in a header for small bodies.
func TestClientsInteroperate(t *testing.T) {
	for _, pair := range [][2]string{{clientFast, clientAMQP091}, {clientAMQP091, clientFast}} {
		for _, size := range []int{4, 100} {
			t.Run(fmt.Sprintf("%s-to-%s-%dB", pair[0], pair[1], size), func(t *testing.T) {
				cfg := e2eConfig(t)
				cfg.Size, cfg.Confirm, cfg.Prefetch, cfg.PMessages, cfg.CMessages = size, 50, 20, 500, 500
				queue := cfg.queueNames()[0]
				if err := setupTopology(cfg, []string{queue}); err != nil {
					t.Fatal(err)
				}
				pubCfg, conCfg := *cfg, *cfg
				pubCfg.Client, conCfg.Client = pair[0], pair[1]
				c, err := openConsumer(&conCfg, 1, queue)
				if err != nil {
					t.Fatal(err)
				}
				p, err := openPublisher(&pubCfg, 1, "", queue)
				if err != nil {
					t.Fatal(errors.Join(err, c.abort()))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				var wg sync.WaitGroup
				errs := make([]error, 2)
				wg.Add(2)
				go func() { defer wg.Done(); errs[0] = p.run(ctx) }()
				go func() { defer wg.Done(); errs[1] = c.run(ctx) }()
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				h := newHistogram()
				c.takeLatencies(h)
				if p.confirmed.Load() != 500 || c.consumed.Load() != 500 || h.count() != 500 {
					t.Fatalf("confirmed %d, consumed %d, latencies %d; want 500 each", p.confirmed.Load(), c.consumed.Load(), h.count())
				}
			})
		}
	}
}
