package server

import (
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

func TestMaxConnectionsRefusesAtAccept(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 2 })
	first := ts.dial(t)
	second := ts.dial(t)
	if conn, err := amqp091.Dial(ts.url); err == nil {
		conn.Close()
		t.Fatal("third connection accepted over MaxConnections=2")
	}
	if n := ts.RefusedConnections(); n != 1 {
		t.Fatalf("RefusedConnections = %d, want 1", n)
	}
	// The admitted connections are unaffected.
	ch, err := second.Channel()
	must(t, err)
	mustDeclare(t, ch, "still-served", nil)
	// Closing one frees its slot once its reader has finished.
	must(t, first.Close())
	waitFor(t, 5*time.Second, "a free connection slot", func() bool {
		conn, err := amqp091.Dial(ts.url)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

func TestMaxConnectionsPerVhost(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MaxConnectionsPerVhost = 1
		c.Vhosts = []string{"other"}
	})
	ts.grant(t, "guest", "other", Permission{".*", ".*", ".*"})
	ts.dial(t)
	// A second connection to "/" is refused at connection.open with 530.
	rc := dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{})
	rc.send(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00guest\x00guest"), Locale: "en_US"})
	tune := &amqp.ConnectionTune{}
	rc.expectMethod(tune)
	rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	rc.send(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	cl := rc.expectConnectionClose(amqp.NotAllowed)
	if want := "access to vhost '/' refused for user 'guest': connection limit (1) is reached"; !strings.Contains(cl.ReplyText, want) {
		t.Fatalf("reply text %q, want %q", cl.ReplyText, want)
	}
	// Another vhost has its own count.
	other, err := amqp091.Dial("amqp://guest:guest@" + ts.addr + "/other")
	must(t, err)
	defer other.Close()
	// A refused connection does not hold a slot: closing the first frees "/".
	for _, c := range ts.Connections() {
		if c.Vhost == "/" {
			ts.CloseConnection(c.ID, "test")
		}
	}
	waitFor(t, 5*time.Second, "a free slot on vhost /", func() bool {
		conn, err := amqp091.Dial(ts.url)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

func TestMaxQueuesPerVhost(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxQueuesPerVhost = 2 })
	_, ch := ts.channel(t)
	mustDeclare(t, ch, "q1", nil)
	mustDeclare(t, ch, "q2", nil)
	mustDeclare(t, ch, "q1", nil) // redeclaring an existing queue is not a new one
	_, err := ch.QueueDeclare("q3", false, false, false, false, nil)
	expectCode(t, err, amqp091.PreconditionFailed)
	if want := "cannot declare queue 'q3': queue limit in vhost '/' (2) is reached"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want text %q", err, want)
	}
	_, ch = ts.channel(t)
	_, err = ch.QueueDelete("q1", false, false, false)
	must(t, err)
	mustDeclare(t, ch, "q3", nil)
}

func TestMaxConsumersPerChannel(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConsumersPerChannel = 2 })
	conn, ch := ts.channel(t)
	mustDeclare(t, ch, "cq", nil)
	for _, tag := range []string{"c1", "c2"} {
		_, err := ch.Consume("cq", tag, false, false, false, false, nil)
		must(t, err)
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	_, err := ch.Consume("cq", "c3", false, false, false, false, nil)
	expectCode(t, err, amqp091.NotAllowed)
	e := waitClose(t, closed)
	if e == nil || e.Code != amqp091.NotAllowed || !strings.Contains(e.Reason, "reached maximum (2) of consumers per channel") {
		t.Fatalf("connection closed with %v", e)
	}
	// Another connection's channel has its own count.
	_, ch2 := ts.channel(t)
	for _, tag := range []string{"d1", "d2"} {
		_, err := ch2.Consume("cq", tag, false, false, false, false, nil)
		must(t, err)
	}
}

func TestMaxFieldTableSize(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxFieldTableSize = 64 })
	big := amqp091.Table{"x-note": strings.Repeat("n", 100)}
	small := amqp091.Table{"x-note": "n"}

	_, ch := ts.channel(t)
	_, err := ch.QueueDeclare("args", false, false, false, false, big)
	expectCode(t, err, amqp091.PreconditionFailed)
	if !strings.Contains(err.Error(), "exceeds the limit of 64 bytes") {
		t.Fatalf("error %v", err)
	}

	_, ch = ts.channel(t)
	mustDeclare(t, ch, "args", small)
	must(t, ch.Publish("", "args", false, false, amqp091.Publishing{Headers: small, Body: []byte("ok")}))
	waitFor(t, 5*time.Second, "the small-headers message", func() bool {
		_, ok, err := ch.Get("args", true)
		must(t, err)
		return ok
	})
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	must(t, ch.Publish("", "args", false, false, amqp091.Publishing{
		ContentType: "text/plain", Headers: big, Body: []byte("too big")}))
	e := waitClose(t, closed)
	if e == nil || e.Code != amqp091.PreconditionFailed || !strings.Contains(e.Reason, "headers table of") {
		t.Fatalf("channel closed with %v", e)
	}
	_, ch = ts.channel(t)
	q, err := ch.QueueDeclarePassive("args", false, false, false, false, nil)
	must(t, err)
	if q.Messages != 0 {
		t.Fatalf("%d messages in args, want 0: the oversized publish was routed", q.Messages)
	}
}

func TestHeadersTableLen(t *testing.T) {
	props := (&amqp.Properties{Flags: amqp.FlagContentType | amqp.FlagContentEncoding | amqp.FlagHeaders,
		ContentType: "a", ContentEncoding: "bb", Headers: amqp.Table{"k": "v"}}).AppendTo(nil)
	n, ok := headersTableLen(props)
	want := len(amqp.AppendTable(nil, amqp.Table{"k": "v"})) - 4
	if !ok || n != want {
		t.Fatalf("headersTableLen = %d, %v; want %d, true", n, ok, want)
	}
	if _, ok := headersTableLen((&amqp.Properties{Flags: amqp.FlagContentType, ContentType: "a"}).AppendTo(nil)); ok {
		t.Fatal("headers reported on properties without them")
	}
	if _, ok := headersTableLen([]byte{0x20}); ok {
		t.Fatal("headers reported on truncated properties")
	}
}

func FuzzHeadersTableLen(f *testing.F) {
	f.Add((&amqp.Properties{Flags: amqp.FlagContentType | amqp.FlagHeaders, ContentType: "x", Headers: amqp.Table{"a": int32(1)}}).AppendTo(nil))
	f.Add([]byte{0x20, 0x00, 0, 0, 0, 5})
	f.Add([]byte{0xe0, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, props []byte) {
		n, ok := headersTableLen(props)
		if ok && n < 0 {
			t.Fatalf("negative length %d", n)
		}
		// Whenever the codec finds headers, the peek agrees on their size.
		var p amqp.Properties
		if err := p.Decode(props); err == nil && p.Flags&amqp.FlagHeaders != 0 && len(props) >= 2 && props[1]&1 == 0 {
			if !ok {
				t.Fatalf("decoded headers the peek missed: % x", props)
			}
		}
	})
}

// BenchmarkHeadersTableLen is the per-publish cost of MaxFieldTableSize on
// the content header.
func BenchmarkHeadersTableLen(b *testing.B) {
	props := (&amqp.Properties{Flags: amqp.FlagContentType | amqp.FlagHeaders, ContentType: "application/json",
		Headers: amqp.Table{"trace-id": "0123456789abcdef", "attempt": int32(3)}}).AppendTo(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := headersTableLen(props); !ok {
			b.Fatal("no headers")
		}
	}
}
