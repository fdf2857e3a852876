package server

import (
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// startLoggedServer starts a broker whose info-level log is captured.
func startLoggedServer(t *testing.T, mutate ...func(*Config)) (*testServer, *lockedBuffer) {
	t.Helper()
	logs := new(lockedBuffer)
	ts := startServer(t, append([]func(*Config){func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}}, mutate...)...)
	return ts, logs
}

// logLines returns the captured lines of level with msg that contain every
// one of parts.
func logLines(logs *lockedBuffer, level, msg string, parts ...string) []string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(l, "level="+level+" ") || !strings.Contains(l, "msg="+strconv.Quote(msg)) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// waitLogLine waits for one line of level with msg and parts and returns it.
func waitLogLine(t *testing.T, logs *lockedBuffer, level, msg string, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ls := logLines(logs, level, msg, parts...); len(ls) > 0 {
			return ls[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s line %q with %q in:\n%s", level, msg, parts, logs.String())
	return ""
}

// TestConnectionLifecycleLogged: like RabbitMQ 3.10's rabbit_reader, Warren
// logs at info every accepted connection (peer and local address), its
// authentication (user, vhost, mechanism, client-provided name) and its close
// (code, text, who closed); a client that vanishes and a connection the
// broker closes are warnings, as are channel errors (code and text). A TCP
// probe that sends nothing leaves no line.
func TestConnectionLifecycleLogged(t *testing.T) {
	ts, logs := startLoggedServer(t)
	probe, err := net.Dial("tcp", ts.addr)
	must(t, err)
	must(t, probe.Close())

	cfg := amqp091.Config{Properties: amqp091.Table{"connection_name": "ops-orders"}}
	conn, err := amqp091.DialConfig(ts.url, cfg)
	must(t, err)
	local := conn.LocalAddr().String()
	peer := "peer=" + local
	waitLogLine(t, logs, "INFO", "accepting AMQP connection", peer, "local="+ts.addr)
	waitLogLine(t, logs, "INFO", "connection authenticated and granted access to vhost", peer,
		"user=guest", "vhost=/", "mechanism=PLAIN", "connection_name=ops-orders")
	ch, err := conn.Channel()
	must(t, err)
	_, err = ch.QueueDeclarePassive("ops-missing", false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)
	waitLogLine(t, logs, "WARN", "channel error", peer, "user=guest", "channel=1", "code=404",
		`NOT_FOUND - no queue 'ops-missing' in vhost '/'`)
	must(t, conn.Close())
	waitLogLine(t, logs, "INFO", "closing AMQP connection", peer, "closed_by=client", "code=200", "user=guest")

	vanished := dialRaw(t, ts.addr)
	vanished.open(0)
	vanishedPeer := "peer=" + vanished.nc.LocalAddr().String()
	must(t, vanished.nc.Close())
	waitLogLine(t, logs, "WARN", "closing AMQP connection", vanishedPeer, "closed_by=client",
		`reason="client unexpectedly closed TCP connection"`)

	broken := dialRaw(t, ts.addr)
	broken.open(0)
	brokenPeer := "peer=" + broken.nc.LocalAddr().String()
	broken.write([]byte{amqp.TypeHeartbeat, 0, 1, 0, 0, 0, 0, 0xCE}) // a heartbeat on channel 1
	broken.expectConnectionClose(amqp.FrameError)
	broken.send(0, &amqp.ConnectionCloseOk{})
	waitLogLine(t, logs, "WARN", "closing AMQP connection", brokenPeer, "closed_by=broker", "code=501")

	open := dialRaw(t, ts.addr)
	open.open(0)
	openPeer := "peer=" + open.nc.LocalAddr().String()
	must(t, ts.Close())
	waitLogLine(t, logs, "WARN", "closing AMQP connection", openPeer, "closed_by=broker", "code=320", "shutdown")

	if n := len(logLines(logs, "INFO", "accepting AMQP connection")); n != 4 {
		t.Fatalf("%d accepted connections logged for 4 and a probe:\n%s", n, logs.String())
	}
	assertShutdownPhases(t, logs.String())
}

// assertShutdownPhases checks Close's one line per phase, in order.
func assertShutdownPhases(t *testing.T, log string) {
	t.Helper()
	at := 0
	for _, phase := range []string{
		`msg="stopping: closing the AMQP listeners"`,
		`msg="stopping: closing connections" connections=1`,
		`msg="stopping: checkpointing message stores and queue indexes"`,
		`msg=stopped`,
	} {
		i := strings.Index(log[at:], phase)
		if i < 0 {
			t.Fatalf("shutdown phase %s missing or out of order in:\n%s", phase, log)
		}
		at += i + len(phase)
	}
}

var suppressedAttr = regexp.MustCompile(`suppressed=(\d+)`)

// TestConnectionLogFloodBounded: a flood of connections that send a protocol
// header and vanish costs a bounded number of lines, connLogBurst accept
// lines and one close line per peer and interval, and the next lines count
// what was left out: rate-limited, never silenced.
func TestConnectionLogFloodBounded(t *testing.T) {
	const interval = time.Second
	ts, logs := startLoggedServer(t, func(c *Config) { c.LoginFailureLogInterval = interval })
	began := time.Now()
	attempts := 0
	for ; attempts < 20000; attempts++ {
		if len(logLines(logs, "INFO", "accepting AMQP connection", "suppressed=")) > 0 &&
			len(logLines(logs, "WARN", "closing AMQP connection", "suppressed=")) > 0 {
			break
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("no counted lines after %d connections:\n%s", attempts, logs.String())
		}
		rc := dialRaw(t, ts.addr)
		rc.write(amqp.ProtocolHeader)
		rc.expectMethod(&amqp.ConnectionStart{})
		must(t, rc.nc.Close())
	}
	windows := int(time.Since(began)/interval) + 1
	accepted := logLines(logs, "INFO", "accepting AMQP connection")
	closed := logLines(logs, "WARN", "closing AMQP connection")
	if len(accepted) > windows*connLogBurst || len(closed) > windows {
		t.Fatalf("%d connections in %d intervals: %d accept lines (burst %d), %d close lines",
			attempts, windows, len(accepted), connLogBurst, len(closed))
	}
	if got := sumSuppressed(accepted) + len(accepted); got > attempts || sumSuppressed(accepted) == 0 {
		t.Fatalf("accept lines count %d connections of %d:\n%s", got, attempts, strings.Join(accepted, "\n"))
	}
	if attempts <= connLogBurst {
		t.Fatalf("only %d connections: the flood never passed the burst", attempts)
	}
	t.Logf("%d connections in %d intervals: %d accept lines, %d close lines", attempts, windows, len(accepted), len(closed))
}

func sumSuppressed(lines []string) int {
	sum := 0
	for _, l := range lines {
		if m := suppressedAttr.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			sum += n
		}
	}
	return sum
}
