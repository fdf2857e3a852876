package server

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// failureCloseCaps announces authentication_failure_close, which RabbitMQ
// requires before it answers a failed login with connection.close.
var failureCloseCaps = amqp.Table{"capabilities": amqp.Table{"authentication_failure_close": true}}

// failLogin sends a start-ok with a wrong password for guest.
func (rc *rawClient) failLogin(props amqp.Table) {
	rc.t.Helper()
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{})
	rc.send(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00guest\x00wrong"), Locale: "en_US", ClientProperties: props})
}

// TestLoginFailureDelayed shows that a failed login is answered only after
// LoginFailureDelay, whatever the client does: RabbitMQ's bytes (connection.close
// 403 for a client announcing authentication_failure_close, nothing for
// another), then the socket closes. Meanwhile other clients log in at once,
// and Server.Close does not wait for the delay.
func TestLoginFailureDelayed(t *testing.T) {
	const delay = 400 * time.Millisecond
	ts := startServer(t, func(c *Config) { c.LoginFailureDelay = delay })

	t.Run("connection.close with authentication_failure_close", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		rc.failLogin(failureCloseCaps)
		start := time.Now()
		cl := rc.expectConnectionClose(amqp.AccessRefused)
		if took := time.Since(start); took < delay {
			t.Fatalf("refusal after %s, want at least %s", took, delay)
		}
		want := "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."
		if cl.ReplyText != want || cl.ClassID != 0 || cl.MethodID != 0 {
			t.Fatalf("connection.close %+v, want %q for method 0.0", cl, want)
		}
		rc.expectEOF()
	})
	t.Run("silence without the capability", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		rc.failLogin(nil)
		start := time.Now()
		rc.expectSilentClose()
		if took := time.Since(start); took < delay {
			t.Fatalf("closed after %s, want at least %s", took, delay)
		}
	})
	t.Run("amqp091-go sees ErrCredentials after the delay", func(t *testing.T) {
		start := time.Now()
		_, err := amqp091.Dial("amqp://guest:wrong@" + ts.addr + "/")
		if !errors.Is(err, amqp091.ErrCredentials) {
			t.Fatalf("dial with a wrong password: %v, want ErrCredentials as against RabbitMQ", err)
		}
		if took := time.Since(start); took < delay {
			t.Fatalf("refused after %s, want at least %s", took, delay)
		}
	})
	t.Run("others log in while a refusal is held", func(t *testing.T) {
		held := dialRaw(t, ts.addr)
		held.failLogin(failureCloseCaps)
		start := time.Now()
		ts.dial(t).Close()
		if took := time.Since(start); took >= delay {
			t.Fatalf("a good login took %s while another was held", took)
		}
		held.expectConnectionClose(amqp.AccessRefused)
	})
	t.Run("Server.Close does not wait for a held refusal", func(t *testing.T) {
		var logs lockedBuffer
		ts := startServer(t, func(c *Config) {
			c.LoginFailureDelay = time.Hour
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		rc := dialRaw(t, ts.addr)
		rc.failLogin(failureCloseCaps)
		// The line is written just before the connection is held.
		waitFor(t, 5*time.Second, "the refusal to be held", func() bool { return strings.Contains(logs.String(), "login refused") })
		start := time.Now()
		must(t, ts.Close())
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Close took %s", took)
		}
		rc.expectEOF()
	})
}

// TestLoginFailureLogRateLimited shows that many failed logins and broken
// handshakes from one peer cost one log line per user (or per peer) per
// interval, and that the next line counts the failures left out.
func TestLoginFailureLogRateLimited(t *testing.T) {
	var logs lockedBuffer
	ts := startServer(t, func(c *Config) {
		c.LoginFailureDelay = time.Millisecond
		c.LoginFailureLogInterval = time.Hour
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const n = 40
	for i := 0; i < n; i++ {
		rc := dialRaw(t, ts.addr)
		rc.failLogin(failureCloseCaps)
		rc.expectConnectionClose(amqp.AccessRefused)
		rc = dialRaw(t, ts.addr)
		rc.write(amqp.ProtocolHeader)
		rc.expectMethod(&amqp.ConnectionStart{})
		rc.send(0, &amqp.ConnectionStartOk{Mechanism: "NOSUCH", Response: []byte("x")})
		rc.expectSilentClose()
	}
	_, err := amqp091.Dial("amqp://nobody:x@" + ts.addr + "/")
	if !errors.Is(err, amqp091.ErrCredentials) {
		t.Fatalf("dial as an unknown user: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var refused, broken []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, "login refused"):
			refused = append(refused, l)
		case strings.Contains(l, "handshake failed"), strings.Contains(l, "refusing connection"):
			broken = append(broken, l)
		}
	}
	if len(refused) != 2 || !strings.Contains(refused[0], "user=guest") || !strings.Contains(refused[1], "user=nobody") ||
		!strings.Contains(refused[0], "peer=127.0.0.1") {
		t.Fatalf("%d failed logins of 2 users logged as:\n%s", n+1, strings.Join(refused, "\n"))
	}
	if len(broken) != 1 || !strings.Contains(broken[0], "unknown authentication mechanism 'NOSUCH'") {
		t.Fatalf("%d broken handshakes logged as:\n%s", n, strings.Join(broken, "\n"))
	}
}

// TestLoginFailureLogCountsSuppressed: once the interval has passed, the next
// failure of a key is logged with the number left out since its last line.
func TestLoginFailureLogCountsSuppressed(t *testing.T) {
	var logs lockedBuffer
	const interval = 300 * time.Millisecond
	ts := startServer(t, func(c *Config) {
		c.LoginFailureDelay = time.Millisecond
		c.LoginFailureLogInterval = interval
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	attempts := 0
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), "login refused") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second line after %d failures:\n%s", attempts, logs.String())
		}
		rc := dialRaw(t, ts.addr)
		rc.failLogin(failureCloseCaps)
		rc.expectConnectionClose(amqp.AccessRefused)
		attempts++
	}
	want := fmt.Sprintf("suppressed=%d", attempts-2)
	if attempts < 3 || !strings.Contains(logs.String(), want) {
		t.Fatalf("after %d failures over %s, want a line with %s:\n%s", attempts, interval, want, logs.String())
	}
}

// TestFailureLogBounded: the failure log tracks a bounded number of keys
// whatever the number of peers and users, and clips long user names.
func TestFailureLogBounded(t *testing.T) {
	l := newFailureLog(time.Hour)
	now := time.Now()
	logged := 0
	for i := 0; i < 3*failureKeysMax; i++ {
		if _, ok, _ := l.note(failureKey{kind: failureLogin, peer: "127.0.0.2", user: fmt.Sprint("u", i)}, now); ok {
			logged++
		}
	}
	if len(l.seen) > failureKeysMax+1 || logged != failureKeysMax+1 {
		t.Fatalf("%d keys tracked, %d lines for %d users (bound %d)", len(l.seen), logged, 3*failureKeysMax, failureKeysMax)
	}
	// Past the interval, stale keys make room again.
	key, ok, _ := l.note(failureKey{kind: failureLogin, peer: "127.0.0.3", user: "late"}, now.Add(2*time.Hour))
	if !ok || key.user != "late" || len(l.seen) > failureKeysMax+1 {
		t.Fatalf("late key %+v logged=%v with %d keys", key, ok, len(l.seen))
	}
	if u := clipUser(strings.Repeat("é", 1000)); len(u) > failureUserMax+len("…") || !strings.HasSuffix(u, "…") {
		t.Fatalf("clipped user %q (%d bytes)", u, len(u))
	}
}

// TestRawHandshakeSilentClose: RabbitMQ 3.10 answers a handshake that breaks
// the protocol before tune-ok is accepted by closing the socket after its
// delay without sending anything (rabbit_reader handle_exception/3); Warren
// does the same. Once the client awaits open-ok, it answers connection.close.
func TestRawHandshakeSilentClose(t *testing.T) {
	const delay = 200 * time.Millisecond
	ts := startServer(t, func(c *Config) { c.LoginFailureDelay = delay })
	login := &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00guest\x00guest"), Locale: "en_US"}
	cases := []struct {
		name    string
		startOk *amqp.ConnectionStartOk // nil: send tuneOk instead of start-ok
		tuneOk  *amqp.ConnectionTuneOk
	}{
		{name: "unknown SASL mechanism", startOk: &amqp.ConnectionStartOk{Mechanism: "CRAM-MD5", Response: []byte("x")}},
		{name: "malformed PLAIN response", startOk: &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("guest")}},
		{name: "tune-ok instead of start-ok", tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 10, FrameMax: 4096}},
		{name: "frame-max below 4096", startOk: login, tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 10, FrameMax: 4095}},
		{name: "frame-max above the server's", startOk: login, tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131073}},
		{name: "frame-max 0", startOk: login, tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 10, FrameMax: 0}},
		{name: "channel-max 0", startOk: login, tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 0, FrameMax: 131072}},
		{name: "channel-max above the server's", startOk: login, tuneOk: &amqp.ConnectionTuneOk{ChannelMax: 2048, FrameMax: 131072}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, ts.addr)
			rc.write(amqp.ProtocolHeader)
			rc.expectMethod(&amqp.ConnectionStart{})
			// start is taken before the frame that fails is sent: the
			// broker's hold begins when it reads that frame, which can be
			// before send returns here.
			var start time.Time
			if tc.startOk != nil {
				start = time.Now()
				rc.send(0, tc.startOk)
			}
			if tc.startOk != nil && tc.tuneOk != nil {
				rc.expectMethod(&amqp.ConnectionTune{})
			}
			if tc.tuneOk != nil {
				start = time.Now()
				rc.send(0, tc.tuneOk)
			}
			rc.expectSilentClose()
			if took := time.Since(start); took < delay {
				t.Fatalf("closed after %s, want at least %s", took, delay)
			}
		})
	}
	t.Run("heartbeats before open are ignored", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		rc.write(amqp.ProtocolHeader)
		rc.expectMethod(&amqp.ConnectionStart{})
		rc.write(amqp.AppendHeartbeat(nil))
		rc.send(0, login)
		rc.expectMethod(&amqp.ConnectionTune{})
		rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 0})
		rc.write(amqp.AppendHeartbeat(nil))
		rc.send(0, &amqp.ConnectionOpen{VirtualHost: "/"})
		rc.expectMethod(&amqp.ConnectionOpenOk{})
	})
	t.Run("a method out of order at open gets connection.close 504", func(t *testing.T) {
		rc := dialRaw(t, ts.addr)
		rc.write(amqp.ProtocolHeader)
		rc.expectMethod(&amqp.ConnectionStart{})
		rc.send(0, login)
		rc.expectMethod(&amqp.ConnectionTune{})
		rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: 2047, FrameMax: 131072})
		rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: 2047, FrameMax: 131072})
		cl := rc.expectConnectionClose(amqp.ChannelError)
		if cl.ReplyText != "CHANNEL_ERROR - unexpected method in connection state opening" || cl.ClassID != 10 || cl.MethodID != 31 {
			t.Fatalf("connection.close %+v", cl)
		}
	})
}

// tuneOkPattern matches the reply text of a refused tune-ok, for the log.
var tuneOkPattern = regexp.MustCompile(`negotiated frame_max = 0 is higher than the maximum allowed value \(131072\)`)

// TestTuneOkRefusalLogged: the silent close still tells the operator why, in
// RabbitMQ's words.
func TestTuneOkRefusalLogged(t *testing.T) {
	var logs lockedBuffer
	ts := startServer(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	rc := dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader)
	rc.expectMethod(&amqp.ConnectionStart{})
	rc.send(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: []byte("\x00guest\x00guest")})
	rc.expectMethod(&amqp.ConnectionTune{})
	rc.send(0, &amqp.ConnectionTuneOk{ChannelMax: 2047})
	rc.expectSilentClose()
	waitFor(t, 5*time.Second, "the log line", func() bool { return tuneOkPattern.MatchString(logs.String()) })
	if !strings.Contains(logs.String(), "state=tuning") {
		t.Fatalf("log:\n%s", logs.String())
	}
}
