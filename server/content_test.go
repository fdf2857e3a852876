package server

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// hugeBody is what the hostile headers below announce: the largest body the
// default max-message-size accepts.
const hugeBody = 128 << 20

// sendHugeHeaders opens channels first..first+n-1 and starts on each a
// publish to exchange whose header announces hugeBody bytes, sending no body.
func sendHugeHeaders(rc *rawClient, first, n int, exchange string) {
	rc.t.Helper()
	var b []byte
	for id := uint16(first); id < uint16(first+n); id++ {
		b = amqp.AppendMethodFrame(b, id, &amqp.ChannelOpen{})
	}
	rc.write(b)
	for range n {
		rc.expectMethod(&amqp.ChannelOpenOk{})
	}
	b = b[:0]
	props := (&amqp.Properties{}).AppendTo(nil)
	for id := uint16(first); id < uint16(first+n); id++ {
		b = amqp.AppendMethodFrame(b, id, &amqp.BasicPublish{Exchange: exchange, RoutingKey: "k"})
		var start int
		b, start = amqp.BeginFrame(b, amqp.TypeHeader, id)
		b = amqp.AppendContentHeader(b, hugeBody, props)
		b = amqp.EndFrame(b, start)
	}
	rc.write(b)
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestPublishRefusedAtHeaderHoldsNoBody: a user without write permission
// sends 80 basic.publish + content headers announcing 128 MiB each and no
// body. Each channel is closed with RabbitMQ's 403 at once (RabbitMQ 3.10
// answers the same only after the whole body arrived), and the broker's
// heap does not grow by the announced sizes.
func TestPublishRefusedAtHeaderHoldsNoBody(t *testing.T) {
	const headers = 80
	ts := startServer(t)
	ts.addUser(t, "writeless", "pw")
	ts.grant(t, "writeless", "/", Permission{Configure: ".*", Write: "", Read: ".*"})
	rc := dialRaw(t, ts.addr)
	rc.openAs("writeless", "pw", 0)
	before := heapInuse()
	sendHugeHeaders(rc, 1, headers, "amq.direct")
	want := "ACCESS_REFUSED - access to exchange 'amq.direct' in vhost '/' refused for user 'writeless'"
	for range headers {
		cl := rc.expectChannelClose(amqp.AccessRefused)
		if cl.ReplyText != want || cl.ClassID != amqp.ClassBasic || cl.MethodID != 40 {
			t.Fatalf("channel.close %q (%d,%d), want %q (60,40)", cl.ReplyText, cl.ClassID, cl.MethodID, want)
		}
	}
	if grown := int64(heapInuse()) - int64(before); grown > 64<<20 {
		t.Fatalf("heap grew by %d MiB for %d refused headers", grown>>20, headers)
	}
}

// TestPendingHugeHeadersHoldNoMemory: a user who may publish leaves 80
// headers announcing 128 MiB pending. The broker allocates body memory as
// bytes arrive, so neither its heap nor the memory alarm moves, and the
// connection keeps being served.
func TestPendingHugeHeadersHoldNoMemory(t *testing.T) {
	const headers = 80
	ts := startServer(t)
	rc := dialRaw(t, ts.addr)
	rc.open(0)
	before := heapInuse()
	ts.SetMemoryHighWatermark(MemoryUsed() + 512<<20)
	t.Cleanup(func() { ts.SetMemoryHighWatermark(0) })
	sendHugeHeaders(rc, 1, headers, "")
	// Frames are handled in order: the declare-ok proves every header was.
	rc.send(headers+1, &amqp.ChannelOpen{})
	rc.expectMethod(&amqp.ChannelOpenOk{})
	rc.send(headers+1, &amqp.QueueDeclare{Queue: "after-headers"})
	rc.expectMethod(&amqp.QueueDeclareOk{})
	ts.checkMemory()
	if ts.MemoryAlarm() {
		t.Fatalf("memory alarm raised by %d pending headers: %d MiB used", headers, MemoryUsed()>>20)
	}
	if grown := int64(heapInuse()) - int64(before); grown > 64<<20 {
		t.Fatalf("heap grew by %d MiB for %d pending headers", grown>>20, headers)
	}
}

// TestBodiesAssembledAsTheyArrive publishes, interleaved frame by frame on
// several channels, bodies from empty to several frames long: more small
// bodies at once than a connection reserves ahead (so some grow as they
// arrive) and bodies that grow over many frames. Every body arrives intact.
func TestBodiesAssembledAsTheyArrive(t *testing.T) {
	ts := startServer(t)
	rc := dialRaw(t, ts.addr)
	rc.open(0)
	const frameMax = 131072
	sizes := []int{0, 1, frameMax - 8, frameMax - 7, 3*frameMax + 5, 1<<20 + 3}
	for range 16 {
		sizes = append(sizes, 100<<10) // 16 × 100 KiB > bodyReserveLimit
	}
	rng := rand.New(rand.NewPCG(1, 2))
	bodies := make([][]byte, len(sizes))
	var b []byte
	for i, n := range sizes {
		bodies[i] = make([]byte, n)
		for j := range bodies[i] {
			bodies[i][j] = byte(rng.Uint32())
		}
		b = amqp.AppendMethodFrame(b, uint16(i+1), &amqp.ChannelOpen{})
	}
	b = amqp.AppendMethodFrame(b, uint16(len(sizes)+1), &amqp.ChannelOpen{})
	rc.write(b)
	for range len(sizes) + 1 {
		rc.expectMethod(&amqp.ChannelOpenOk{})
	}
	rc.send(uint16(len(sizes)+1), &amqp.QueueDeclare{Queue: "assembled"})
	rc.expectMethod(&amqp.QueueDeclareOk{})
	rc.write(interleavedPublishes(bodies, "assembled", frameMax))

	_, ch := ts.channel(t)
	got := make(map[string]bool)
	for i := range bodies {
		var msg []byte
		waitFor(t, 10*time.Second, fmt.Sprintf("message %d of %d", i+1, len(bodies)), func() bool {
			d, ok, err := ch.Get("assembled", true)
			must(t, err)
			msg = d.Body
			return ok
		})
		got[string(msg)] = true
	}
	for i, body := range bodies {
		if !got[string(body)] {
			t.Fatalf("body %d (%d bytes) did not arrive intact", i, len(body))
		}
	}
}

// interleavedPublishes encodes one publish per body, body i on channel i+1:
// every header first, then the body frames of all channels round-robin.
func interleavedPublishes(bodies [][]byte, queue string, frameMax int) []byte {
	var b []byte
	props := (&amqp.Properties{}).AppendTo(nil)
	for i, body := range bodies {
		id := uint16(i + 1)
		b = amqp.AppendMethodFrame(b, id, &amqp.BasicPublish{RoutingKey: queue})
		var start int
		b, start = amqp.BeginFrame(b, amqp.TypeHeader, id)
		b = amqp.AppendContentHeader(b, uint64(len(body)), props)
		b = amqp.EndFrame(b, start)
	}
	chunk := frameMax - 8
	for off := 0; ; off += chunk {
		sent := false
		for i, body := range bodies {
			if off >= len(body) {
				continue
			}
			var start int
			b, start = amqp.BeginFrame(b, amqp.TypeBody, uint16(i+1))
			b = append(b, body[off:min(off+chunk, len(body))]...)
			b = amqp.EndFrame(b, start)
			sent = true
		}
		if !sent {
			return b
		}
	}
}
