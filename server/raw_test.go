package server

import (
	"strings"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"testing"
	"time"

	"github.com/warrenmq/warren/amqp"
)

func TestRawServerGeneratedConsumerTag(t *testing.T) {
	ts := startServer(t)
	rc := dialRaw(t, ts.addr)
	rc.open(0)
	rc.send(1, &amqp.ChannelOpen{})
	rc.expectMethod(&amqp.ChannelOpenOk{})
	rc.send(1, &amqp.QueueDeclare{Queue: "", Exclusive: true})
	ok := &amqp.QueueDeclareOk{}
	rc.expectMethod(ok)
	if !strings.HasPrefix(ok.Queue, "amq.gen-") || len(ok.Queue) != len("amq.gen-")+22 {
		t.Fatalf("server-named queue %q", ok.Queue)
	}
	rc.send(1, &amqp.BasicConsume{Queue: ok.Queue})
	cok := &amqp.BasicConsumeOk{}
	rc.expectMethod(cok)
	if !strings.HasPrefix(cok.ConsumerTag, "amq.ctag-") {
		t.Fatalf("generated consumer tag %q", cok.ConsumerTag)
	}
}

func TestRawProtocolHeaderMismatch(t *testing.T) {
	ts := startServer(t)
	rc := dialRaw(t, ts.addr)
	rc.write([]byte("AMQP\x01\x01\x00\x0a"))
	got := make([]byte, 8)
	if err := rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.r.Read(got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(amqp.ProtocolHeader) {
		t.Fatalf("server answered % x", got)
	}
	rc.expectEOF()
}

func TestRawHandshakeTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.HandshakeTimeout = 200 * time.Millisecond })
	rc := dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader[:4]) // then stall
	start := time.Now()
	rc.expectEOF()
	if time.Since(start) > 4*time.Second {
		t.Fatalf("stalled handshake dropped only after %s", time.Since(start))
	}
}

func TestRawMissedHeartbeats(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Heartbeat = time.Second })
	rc := dialRaw(t, ts.addr)
	rc.open(1)
	// The server sends heartbeats while the client stays silent...
	f, err := rc.readFrame()
	if err != nil || f.Type != amqp.TypeHeartbeat {
		t.Fatalf("expected a heartbeat from the server, got %+v %v", f, err)
	}
	// ...and drops the client after two missed intervals.
	waitFor(t, 5*time.Second, "connection dropped", func() bool { return len(ts.Connections()) == 0 })
}

func TestRawReplyCodes(t *testing.T) {
	ts := startServer(t)
	open := func(t *testing.T) *rawClient {
		rc := dialRaw(t, ts.addr)
		rc.open(0)
		rc.send(1, &amqp.ChannelOpen{})
		rc.expectMethod(&amqp.ChannelOpenOk{})
		return rc
	}
	t.Run("501 frame too large", func(t *testing.T) {
		rc := open(t)
		// Only the 7-byte header: the server must judge the size before the payload arrives.
		b, start := amqp.BeginFrame(nil, amqp.TypeBody, 1)
		b = append(b, make([]byte, 200000)...)
		rc.write(amqp.EndFrame(b, start)[:7])
		rc.expectConnectionClose(amqp.FrameError)
	})
	t.Run("501 bad frame end", func(t *testing.T) {
		rc := open(t)
		b := amqp.AppendMethodFrame(nil, 1, &amqp.BasicQos{PrefetchCount: 1})
		b[len(b)-1] = 0
		rc.write(b)
		rc.expectConnectionClose(amqp.FrameError)
	})
	t.Run("502 malformed arguments", func(t *testing.T) {
		rc := open(t)
		b, start := amqp.BeginFrame(nil, amqp.TypeMethod, 1)
		b = append(b, 0, 50, 0, 10, 0, 0, 200) // queue.declare with a short string running past the end
		rc.write(amqp.EndFrame(b, start))
		rc.expectConnectionClose(amqp.SyntaxError)
	})
	t.Run("504 second channel.open", func(t *testing.T) {
		rc := open(t)
		rc.send(1, &amqp.ChannelOpen{})
		rc.expectConnectionClose(amqp.ChannelError)
	})
	t.Run("504 method on unopened channel", func(t *testing.T) {
		rc := open(t)
		rc.send(7, &amqp.BasicQos{PrefetchCount: 1})
		rc.expectConnectionClose(amqp.ChannelError)
	})
	t.Run("505 body without header", func(t *testing.T) {
		rc := open(t)
		b, start := amqp.BeginFrame(nil, amqp.TypeBody, 1)
		b = append(b, "stray"...)
		rc.write(amqp.EndFrame(b, start))
		rc.expectConnectionClose(amqp.UnexpectedFrame)
	})
	t.Run("505 method where content header expected", func(t *testing.T) {
		rc := open(t)
		rc.send(1, &amqp.BasicPublish{RoutingKey: "x"})
		rc.send(1, &amqp.BasicQos{PrefetchCount: 1})
		rc.expectConnectionClose(amqp.UnexpectedFrame)
	})
	t.Run("540 unknown method", func(t *testing.T) {
		rc := open(t)
		b, start := amqp.BeginFrame(nil, amqp.TypeMethod, 1)
		b = append(b, 0, 60, 0, 99)
		rc.write(amqp.EndFrame(b, start))
		rc.expectConnectionClose(amqp.NotImplemented)
	})
	t.Run("501 heartbeat on a channel", func(t *testing.T) {
		rc := open(t)
		b := amqp.AppendHeartbeat(nil)
		b[2] = 1
		rc.write(b)
		rc.expectConnectionClose(amqp.FrameError)
	})
	t.Run("406 body larger than announced", func(t *testing.T) {
		rc := open(t)
		rc.send(1, &amqp.BasicPublish{RoutingKey: "x"})
		b, start := amqp.BeginFrame(nil, amqp.TypeHeader, 1)
		b = amqp.AppendContentHeader(b, 2, []byte{0, 0})
		b = amqp.EndFrame(b, start)
		b2, start := amqp.BeginFrame(nil, amqp.TypeBody, 1)
		b2 = append(b2, "toolong"...)
		rc.write(append(b, amqp.EndFrame(b2, start)...))
		rc.expectConnectionClose(amqp.FrameError)
	})
	t.Run("406 message over max size", func(t *testing.T) {
		ts := startServer(t, func(c *Config) { c.MaxMessageSize = 10 })
		rc := dialRaw(t, ts.addr)
		rc.open(0)
		rc.send(1, &amqp.ChannelOpen{})
		rc.expectMethod(&amqp.ChannelOpenOk{})
		rc.send(1, &amqp.BasicPublish{RoutingKey: "x"})
		b, start := amqp.BeginFrame(nil, amqp.TypeHeader, 1)
		b = amqp.AppendContentHeader(b, 11, []byte{0, 0})
		rc.write(amqp.EndFrame(b, start))
		cl := rc.expectChannelClose(amqp.PreconditionFailed)
		if !strings.Contains(cl.ReplyText, "larger than configured max size 10") {
			t.Fatalf("reply text %q", cl.ReplyText)
		}
	})
}

func TestRawAuthFailureAndVhostRefusal(t *testing.T) {
	ts := startServer(t)
	rc := dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{})
	rc.send(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00guest\x00wrong"), ClientProperties: failureCloseCaps})
	cl := rc.expectConnectionClose(amqp.AccessRefused)
	if cl.ReplyText != "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile." {
		t.Fatalf("reply text %q", cl.ReplyText)
	}

	rc = dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{})
	rc.send(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00guest\x00guest")})
	tune := &amqp.ConnectionTune{}
	rc.expectMethod(tune)
	if tune.ChannelMax != 2047 || tune.FrameMax != 131072 || tune.Heartbeat != 60 {
		t.Fatalf("tune %+v", tune)
	}
	rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072})
	rc.send(0, &amqp.ConnectionOpen{VirtualHost: "nope"})
	rc.expectConnectionClose(amqp.NotAllowed)
}

func TestRawChannelMax(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ChannelMax = 2 })
	rc := dialRaw(t, ts.addr)
	rc.open(0)
	rc.send(1, &amqp.ChannelOpen{})
	rc.expectMethod(&amqp.ChannelOpenOk{})
	rc.send(2, &amqp.ChannelOpen{})
	rc.expectMethod(&amqp.ChannelOpenOk{})
	rc.send(3, &amqp.ChannelOpen{})
	cl := rc.expectConnectionClose(amqp.NotAllowed)
	if !strings.Contains(cl.ReplyText, "has reached the negotiated channel_max (2)") {
		t.Fatalf("reply text %q", cl.ReplyText)
	}
}

// TestInternalError541 shows that a failing handler closes only its own
// connection with 541 INTERNAL_ERROR while other clients carry on.
func TestInternalError541(t *testing.T) {
	ts := startServer(t)
	bystander, bch := ts.channel(t)
	mustDeclare(t, bch, "still-here", nil)
	hook := func(f amqp.Frame) {
		if f.Type == amqp.TypeMethod {
			if id, _ := amqp.MethodID(f.Payload); id == (&amqp.BasicRecover{}).ID() {
				panic("injected failure")
			}
		}
	}
	testHookFrame.Store(&hook)
	t.Cleanup(func() { testHookFrame.Store(nil) })
	conn, ch := ts.channel(t)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	_ = ch.Recover(true)
	if e := waitClose(t, closed); e.Code != 541 {
		t.Fatalf("got %v", e)
	}
	publish(t, bch, "", "still-here", "x")
	if _, ok, err := bch.Get("still-here", true); err != nil || !ok {
		t.Fatalf("bystander broken: ok=%v err=%v", ok, err)
	}
	if bystander.IsClosed() {
		t.Fatal("bystander connection closed")
	}
}

// TestUpdateSecret: with the internal (password) backend RabbitMQ 3.10
// accepts any new secret and changes nothing (amqplib's updateSecret test
// sends "new secret" for guest); the connection goes on working.
func TestUpdateSecret(t *testing.T) {
	ts := startServer(t)
	conn := ts.dial(t)
	must(t, conn.UpdateSecret("new secret", "no reason"))
	must(t, conn.UpdateSecret("guest", "rotation"))
	ch, err := conn.Channel()
	must(t, err)
	mustDeclare(t, ch, "after-update-secret", nil)
	if conn.IsClosed() {
		t.Fatal("connection closed after update-secret")
	}
}

func TestRawHandshakeStallAfterHeader(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond })
	rc := dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{}) // then never answer
	rc.expectEOF()
}

func TestCloseDuringHandshake(t *testing.T) {
	ts := startServer(t)
	rc := dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{})
	must(t, ts.Close()) // must not wait for the stalled handshake's timeout
	rc.expectEOF()
}

// TestSlowConsumerIsBounded shows a consumer that stops reading its socket
// cannot make the broker buffer without bound: once its connection's write
// buffer is full the queue keeps the rest as ready messages, and delivers
// them when the consumer reads again.
func TestSlowConsumerIsBounded(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.WriteBufferLimit = 64 << 10 })
	_, pub := ts.channel(t)
	mustDeclare(t, pub, "slow", nil)
	rc := dialRaw(t, ts.addr)
	rc.open(0)
	rc.send(1, &amqp.ChannelOpen{})
	rc.expectMethod(&amqp.ChannelOpenOk{})
	rc.send(1, &amqp.BasicConsume{Queue: "slow", ConsumerTag: "slow", NoAck: true})
	rc.expectMethod(&amqp.BasicConsumeOk{})
	// The consumer now reads nothing while 20 MB are published.
	const n = 20000
	must(t, pub.Confirm(false))
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, n))
	body := make([]byte, 1024)
	for range n {
		must(t, pub.Publish("", "slow", false, false, amqp091.Publishing{Body: body}))
	}
	for range n {
		nextConfirm(t, confirms)
	}
	info := queueInfo(ts, "slow")
	if info.Ready == 0 || info.Delivered >= n {
		t.Fatalf("a consumer that does not read took everything: %+v", info)
	}
	// Reading again drains the queue.
	got := 0
	for got < n {
		f, err := rc.readFrame()
		if err != nil {
			t.Fatalf("after %d deliveries: %v", got, err)
		}
		if f.Type == amqp.TypeMethod {
			if id, _ := amqp.MethodID(f.Payload); id == (&amqp.BasicDeliver{}).ID() {
				got++
			}
		}
	}
	waitFor(t, 5*time.Second, "queue drained", func() bool { return queueInfo(ts, "slow").Ready == 0 })
}
