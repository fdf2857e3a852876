package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/warren/amqp"
)

// errHandshakeRefused ends a handshake that was refused and already logged
// (rate-limited): serve must not log it once more.
var errHandshakeRefused = errors.New("handshake refused")

// Bounds of the failure log: a user name is logged and keyed by at most
// failureUserMax bytes (a PLAIN response may carry 64 KiB of it), and at most
// failureKeysMax peers and users are tracked; past that they share one key.
const (
	failureUserMax = 128
	failureKeysMax = 4096
)

// failureLog rate-limits the log lines of failed logins and broken handshakes
// (one line per kind, peer address and user name per interval), and of
// accepted connections and channel errors (a burst of connLogBurst lines per
// key and interval); the next line of a key says how many were left out. A
// flood of connections thus costs a bounded number of lines whatever its
// rate, and is never silenced.
//
// mu is a leaf lock held only for the map update; the line is written after.
type failureLog struct {
	interval time.Duration
	mu       sync.Mutex
	seen     map[failureKey]*failureCount
	pruned   time.Time // last pruneLocked, which runs at most once per interval
}

type failureKey struct{ kind, peer, user string }

type failureCount struct {
	logged     time.Time // when the key's current interval began
	lines      int       // lines the key had in it, at most its kind's burst
	suppressed int       // failures since then without one
}

func newFailureLog(interval time.Duration) *failureLog {
	return &failureLog{interval: interval, seen: make(map[failureKey]*failureCount)}
}

// note counts one failure of key and reports whether it gets a log line, and
// how many failures of the key went unlogged before it. The key counted is
// returned: past failureKeysMax keys, new ones share one whose peer and user
// are "(many)".
func (l *failureLog) note(key failureKey, now time.Time) (counted failureKey, logIt bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fc := l.seen[key]
	if fc == nil && len(l.seen) >= failureKeysMax {
		if now.Sub(l.pruned) >= l.interval {
			l.pruneLocked(now)
		}
		if len(l.seen) >= failureKeysMax {
			key = failureKey{kind: key.kind, peer: "(many)", user: "(many)"}
			fc = l.seen[key]
		}
	}
	if fc == nil {
		l.seen[key] = &failureCount{logged: now, lines: 1}
		return key, true, 0
	}
	if now.Sub(fc.logged) < l.interval {
		if fc.lines < failureBurst(key.kind) {
			fc.lines++
			return key, true, 0
		}
		fc.suppressed++
		return key, false, 0
	}
	suppressed = fc.suppressed
	fc.logged, fc.lines, fc.suppressed = now, 1, 0
	return key, true, suppressed
}

// pruneLocked forgets the keys whose interval has passed without a failure
// left out, so that the next failure of such a key logs at once, as it would.
func (l *failureLog) pruneLocked(now time.Time) {
	l.pruned = now
	for k, fc := range l.seen {
		if fc.suppressed == 0 && now.Sub(fc.logged) >= l.interval {
			delete(l.seen, k)
		}
	}
}

// peerHost is the address part of a peer, so that every connection from one
// host shares a key whatever its port.
func peerHost(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return addr.String()
}

// clipUser cuts a client-chosen user name for the log and the failure key.
func clipUser(user string) string {
	if len(user) <= failureUserMax {
		return user
	}
	n := failureUserMax
	for n > 0 && !utf8.RuneStart(user[n]) {
		n--
	}
	return user[:n] + "…"
}

// logLimited writes msg for one event of kind (a failure, an accepted
// connection, a channel error) unless its key already had its lines in this
// interval.
func (c *conn) logLimited(level slog.Level, msg, kind, user string, attrs ...any) {
	key, logIt, suppressed := c.srv.failures.note(failureKey{kind: kind, peer: peerHost(c.nc.RemoteAddr()), user: clipUser(user)}, time.Now())
	if !logIt {
		return
	}
	if kind == failureLogin || kind == failureChannel {
		attrs = append(attrs, "user", key.user)
	}
	if key.peer == "(many)" {
		attrs = append(attrs, "peers", "many (failure log full)")
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	c.log.Log(context.Background(), level, msg, attrs...)
}

// Kinds of failureLog keys. Failed logins and broken handshakes get one
// line per key and interval; accepted connections and channel errors, which
// a well-behaved client also causes, get a burst of them before the rest
// are counted.
const (
	failureLogin     = "login"
	failureHandshake = "handshake"
	failureAccept    = "accept"  // "accepting AMQP connection", keyed by peer host
	failureChannel   = "channel" // channel errors, keyed by peer host and user
)

// connLogBurst is how many lines of an accept or channel-error key are
// logged per interval before the rest are only counted.
const connLogBurst = 100

func failureBurst(kind string) int {
	switch kind {
	case failureAccept, failureChannel:
		return connLogBurst
	}
	return 1
}

// loginRefused answers a failed login. RabbitMQ 3.10 sends connection.close
// 403 only to clients announcing authentication_failure_close (to others,
// nothing: the socket just closes), and keeps the socket for up to 3 s. Warren
// sends the same bytes, but only after holding the connection for
// LoginFailureDelay, so that no client, however it answers, learns the result
// of a guess sooner.
func (c *conn) loginRefused(mechanism, user, reason string) error {
	c.logLimited(slog.LevelWarn, "login refused", failureLogin, user, "mechanism", mechanism, "reason", reason)
	c.hold(c.srv.cfg.LoginFailureDelay)
	if c.supportsCap("authentication_failure_close") {
		e := amqp.NewError(amqp.AccessRefused, 0,
			"Login was refused using authentication mechanism %s. For details see the broker logfile.", mechanism)
		_ = c.sendRefusal(e) // the client may be gone already; either way the connection ends
	}
	return errHandshakeRefused
}

// dropHandshake ends a handshake that broke the protocol before tune-ok was
// accepted (an unknown SASL mechanism, a malformed response, an unacceptable
// frame-max or channel-max, a method out of order). RabbitMQ's reader sends
// nothing then: it waits 3 s and closes the socket.
func (c *conn) dropHandshake(e *amqp.Error) error {
	c.logLimited(slog.LevelInfo, "handshake failed", failureHandshake, "", "state", c.phase.String(), "reason", e.ReplyText())
	c.hold(c.srv.cfg.LoginFailureDelay)
	return errHandshakeRefused
}

// hold keeps the socket open for d on the connection's own goroutine, reading
// and discarding what the client sends. It returns early when the client
// closes or the server closes the socket (Server.Close, forceClose); it takes
// no lock and starts no goroutine or timer.
func (c *conn) hold(d time.Duration) {
	if d <= 0 || c.nc.SetReadDeadline(time.Now().Add(d)) != nil {
		return
	}
	var sink [512]byte
	for {
		if _, err := c.nc.Read(sink[:]); err != nil {
			return
		}
	}
}
