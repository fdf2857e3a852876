package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/warrenmq/warren/amqp"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("WARREN_CRASH_BROKER_DIR"); dir != "" {
		runCrashBroker(dir, os.Getenv("WARREN_CRASH_BROKER_ADDR")) // never returns: killed by the test
	}
	goleak.VerifyTestMain(m)
}

// testServer is a broker on 127.0.0.1:0 for one test.
type testServer struct {
	*Server
	url  string
	addr string
}

// startServer starts a broker with the test defaults, adjusted by mutate.
func startServer(t testing.TB, mutate ...func(*Config)) *testServer {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.MemoryHighWatermark = 0
	cfg.DiskFreeLimit = 0 // the test machine's free space must not block publishers
	// Refused logins are held for RabbitMQ's 3 s by default; tests of other
	// things need not wait (handshake_test.go measures the delay).
	cfg.LoginFailureDelay = 10 * time.Millisecond
	level := slog.LevelWarn
	if os.Getenv("WARREN_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	for _, f := range mutate {
		f(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	addr := s.Addr().String()
	return &testServer{Server: s, addr: addr, url: "amqp://guest:guest@" + addr + "/"}
}

// dial opens an amqp091-go connection closed at test end.
func (ts *testServer) dial(t testing.TB) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.Dial(ts.url)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// channel opens a connection and a channel on it.
func (ts *testServer) channel(t testing.TB) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	c := ts.dial(t)
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return c, ch
}

// addVhost creates vhost name through the management API's PutVhost and
// returns it; an existing vhost is returned unchanged.
func (ts *testServer) addVhost(t testing.TB, name string) *Vhost {
	t.Helper()
	if vh := ts.Vhost(name); vh != nil {
		return vh
	}
	if _, err := ts.PutVhost(name, VhostMeta{}); err != nil {
		t.Fatalf("add vhost %q: %v", name, err)
	}
	return ts.Vhost(name)
}

// addUser creates or replaces a user with a clear-text password through
// the management API's PutUser.
func (ts *testServer) addUser(t testing.TB, name, password string, tags ...string) {
	t.Helper()
	if _, err := ts.PutUser(UserSpec{Name: name, Password: &password, Tags: tags}); err != nil {
		t.Fatalf("add user %q: %v", name, err)
	}
}

// grant sets user's permission on vhost through the management API's
// SetPermission.
func (ts *testServer) grant(t testing.TB, user, vhost string, p Permission) {
	t.Helper()
	if _, err := ts.SetPermission(user, vhost, p); err != nil {
		t.Fatalf("grant %q on %q: %v", user, vhost, err)
	}
}

// dialURL opens a connection to url (a broker process's) and a channel on
// it; the caller closes the connection.
func dialURL(t testing.TB, url string) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	conn, err := amqp091.Dial(url)
	must(t, err)
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		t.Fatalf("channel: %v", err)
	}
	return conn, ch
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustDeclare declares a non-durable queue.
func mustDeclare(t testing.TB, ch *amqp091.Channel, name string, args amqp091.Table) amqp091.Queue {
	t.Helper()
	q, err := ch.QueueDeclare(name, false, false, false, false, args)
	if err != nil {
		t.Fatalf("declare %q: %v", name, err)
	}
	return q
}

func publish(t testing.TB, ch *amqp091.Channel, exchange, key, body string) {
	t.Helper()
	must(t, ch.Publish(exchange, key, false, false, amqp091.Publishing{Body: []byte(body)}))
}

// amqpCode returns the reply code of an amqp091 error, or 0.
func amqpCode(err error) int {
	var e *amqp091.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// expectCode fails unless err is an AMQP exception with code.
func expectCode(t testing.TB, err error, code int) {
	t.Helper()
	if amqpCode(err) != code {
		t.Fatalf("want AMQP error %d, got %v", code, err)
	}
}

// waitClose waits for a channel or connection NotifyClose and returns the error.
func waitClose(t testing.TB, c chan *amqp091.Error) *amqp091.Error {
	t.Helper()
	select {
	case e := <-c:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no close notification within 5s")
		return nil
	}
}

// recv waits for one delivery.
func recv(t testing.TB, d <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case m, ok := <-d:
		if !ok {
			t.Fatal("delivery channel closed")
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery within 5s")
		return amqp091.Delivery{}
	}
}

// expectNone asserts that no delivery is pending for d. Synchronous round trips
// on the publishing and the consuming channel make sure the broker has handled
// every earlier publish and written every earlier delivery; the short wait
// then covers only the client library's hand-off to d.
func expectNone(t testing.TB, d <-chan amqp091.Delivery, consumer, publisher *amqp091.Channel) {
	t.Helper()
	for _, ch := range []*amqp091.Channel{publisher, consumer} {
		if err := ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil); err != nil {
			t.Fatalf("sync round trip: %v", err)
		}
	}
	select {
	case m := <-d:
		t.Fatalf("unexpected delivery %q", m.Body)
	case <-time.After(50 * time.Millisecond):
	}
}

// nextConfirm waits for one publisher confirm.
func nextConfirm(t testing.TB, c <-chan amqp091.Confirmation) amqp091.Confirmation {
	t.Helper()
	select {
	case conf := <-c:
		return conf
	case <-time.After(5 * time.Second):
		t.Fatal("no publisher confirm within 5s")
		return amqp091.Confirmation{}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawClient speaks AMQP frames directly, for protocol errors clients cannot produce.
type rawClient struct {
	t   testing.TB
	nc  net.Conn
	r   *bufio.Reader
	buf []byte
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// open performs the handshake as guest and returns after open-ok.
func (rc *rawClient) open(heartbeat uint16) {
	rc.t.Helper()
	rc.openAs("guest", "guest", heartbeat)
}

// openAs performs the handshake as user on vhost / and returns after open-ok.
func (rc *rawClient) openAs(user, pass string, heartbeat uint16) {
	rc.t.Helper()
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{})
	rc.send(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00" + user + "\x00" + pass), Locale: "en_US",
		ClientProperties: amqp.Table{"capabilities": amqp.Table{"consumer_cancel_notify": true}}})
	tune := &amqp.ConnectionTune{}
	rc.expectMethod(tune)
	rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: heartbeat})
	rc.send(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	rc.expectMethod(&amqp.ConnectionOpenOk{})
}

func (rc *rawClient) write(b []byte) {
	rc.t.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatalf("raw write: %v", err)
	}
}

func (rc *rawClient) send(channel uint16, m amqp.Method) {
	rc.t.Helper()
	rc.write(amqp.AppendMethodFrame(nil, channel, m))
}

// readFrame reads one frame, failing after 5 s.
func (rc *rawClient) readFrame() (amqp.Frame, error) {
	if err := rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return amqp.Frame{}, err
	}
	hdr := make([]byte, 7)
	if _, err := io.ReadFull(rc.r, hdr); err != nil {
		return amqp.Frame{}, err
	}
	rest := make([]byte, amqp.FrameSize(hdr)-7)
	if _, err := io.ReadFull(rc.r, rest); err != nil {
		return amqp.Frame{}, err
	}
	f, n, err := amqp.ParseFrame(append(hdr, rest...), 0)
	if err != nil || n == 0 {
		return amqp.Frame{}, fmt.Errorf("bad frame from server: %v", err)
	}
	return f, nil
}

// rawMethod returns the next method frame's channel, method id and payload
// undecoded, skipping heartbeats: 0-8 ids mean other methods in 0-9-1.
func (rc *rawClient) rawMethod() (uint16, uint32, []byte) {
	rc.t.Helper()
	for {
		f, err := rc.readFrame()
		if err != nil {
			rc.t.Fatalf("raw read: %v", err)
		}
		if f.Type == amqp.TypeHeartbeat {
			continue
		}
		if f.Type != amqp.TypeMethod {
			rc.t.Fatalf("expected a method frame, got type %d", f.Type)
		}
		id, err := amqp.MethodID(f.Payload)
		if err != nil {
			rc.t.Fatal(err)
		}
		return f.Channel, id, f.Payload
	}
}

// nextMethod returns the next method frame decoded, skipping heartbeats.
func (rc *rawClient) nextMethod() (uint16, amqp.Method) {
	rc.t.Helper()
	channel, _, payload := rc.rawMethod()
	m, err := amqp.DecodeMethod(payload)
	if err != nil {
		rc.t.Fatalf("decoding server method: %v", err)
	}
	return channel, m
}

func (rc *rawClient) expectMethod(into amqp.Method) {
	rc.t.Helper()
	_, m := rc.nextMethod()
	if m.ID() != into.ID() {
		rc.t.Fatalf("expected %s, got %s %+v", into.Name(), m.Name(), m)
	}
	reflect.ValueOf(into).Elem().Set(reflect.ValueOf(m).Elem())
}

// expectConnectionClose reads until connection.close and checks its code.
func (rc *rawClient) expectConnectionClose(code uint16) *amqp.ConnectionClose {
	rc.t.Helper()
	for {
		_, m := rc.nextMethod()
		if cl, ok := m.(*amqp.ConnectionClose); ok {
			if cl.ReplyCode != code {
				rc.t.Fatalf("connection.close code %d (%s), want %d", cl.ReplyCode, cl.ReplyText, code)
			}
			rc.send(0, &amqp.ConnectionCloseOk{})
			return cl
		}
	}
}

// expectChannelClose reads until channel.close and checks its code.
func (rc *rawClient) expectChannelClose(code uint16) *amqp.ChannelClose {
	rc.t.Helper()
	for {
		ch, m := rc.nextMethod()
		if cl, ok := m.(*amqp.ChannelClose); ok {
			if cl.ReplyCode != code {
				rc.t.Fatalf("channel.close code %d (%s), want %d", cl.ReplyCode, cl.ReplyText, code)
			}
			rc.send(ch, &amqp.ChannelCloseOk{})
			return cl
		}
	}
}

// expectEOF waits for the server to close the socket.
func (rc *rawClient) expectEOF() {
	rc.t.Helper()
	for {
		_, err := rc.readFrame()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			return
		}
		rc.t.Fatalf("expected the server to close the connection, got %v", err)
	}
}

// expectSilentClose waits for the server to close the socket without sending
// a single byte, as RabbitMQ's reader does when a handshake breaks the protocol.
func (rc *rawClient) expectSilentClose() {
	rc.t.Helper()
	if err := rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		rc.t.Fatal(err)
	}
	got := make([]byte, 64)
	n, err := io.ReadAtLeast(rc.r, got, 1)
	if n > 0 {
		rc.t.Fatalf("server sent % x before closing", got[:n])
	}
	if !errors.Is(err, io.EOF) && !isReset(err) {
		rc.t.Fatalf("expected the server to close the connection, got %v", err)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// contextWithStop is a context cancelled when stop closes.
func contextWithStop(stop <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx
}
