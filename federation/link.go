package federation

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/warrenmq/warren/internal/paramvalue"
	"net"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// linkSpec is what one link federates: an object and one upstream.
type linkSpec struct {
	target Target
	up     upstream
	raw    string // the object's declaration and the upstream's values, to see changes
	here   bool   // this node runs the link (Config.Here)
}

// link runs one exchange or queue link: its goroutine (run) is the only one
// that touches the connections; halt stops it and waits.
type link struct {
	m    *Manager
	spec linkSpec
	id   string

	ctx    context.Context // cancelled by halt
	cancel context.CancelFunc
	wg     sync.WaitGroup
	rebind chan struct{} // exchange links: the downstream bindings may have changed
	// removed is set before halt when no node wants the link any more, so
	// an exchange link deletes its upstream queue (resource-cleanup-mode).
	removed atomic.Bool

	mu        sync.Mutex // guards the status below; a leaf
	state     string     // starting, running, error
	reason    string
	since     time.Time
	uri       string // the upstream URI in use, redacted
	localConn string // the downstream connection's name
}

func newLink(m *Manager, s linkSpec) *link {
	ctx, cancel := context.WithCancel(context.Background())
	kind := "exchange"
	if s.target.Queue {
		kind = "queue"
	}
	sum := sha1.Sum([]byte(kind + "\x00" + s.target.Vhost + "\x00" + s.target.Name + "\x00" + s.up.name))
	return &link{m: m, spec: s, id: hex.EncodeToString(sum[:4]), ctx: ctx, cancel: cancel,
		rebind: make(chan struct{}, 1), state: "starting", since: time.Now()}
}

func (l *link) halt() {
	l.cancel()
	l.wg.Wait()
}

// bindingsChanged wakes an exchange link to compare its upstream bindings
// with the downstream exchange's; it never blocks.
func (l *link) bindingsChanged() {
	select {
	case l.rebind <- struct{}{}:
	default:
	}
}

func (l *link) setState(state, reason string) {
	l.mu.Lock()
	l.state, l.reason, l.since = state, reason, time.Now()
	if state != "running" {
		l.localConn = ""
	}
	l.mu.Unlock()
}

// minReconnectDelay keeps a reconnect-delay of 0 from spinning on an
// upstream that refuses every attempt.
const minReconnectDelay = 100 * time.Millisecond

// run connects, federates until a side fails, and reconnects after the
// upstream's reconnect-delay, until halted.
func (l *link) run() {
	defer l.wg.Done()
	t := l.spec.target
	log := l.m.cfg.Logger.With("federation_upstream", l.spec.up.name, "vhost", t.Vhost, "object", t.Name, "queue", t.Queue)
	for {
		l.setState("starting", "")
		var err error
		if t.Queue {
			err = l.queueSession()
		} else {
			err = l.exchangeSession()
		}
		if l.ctx.Err() != nil {
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("federation link stopped", "err", err)
			}
			return
		}
		l.setState("error", err.Error())
		delay := max(l.spec.up.reconnectDelay, minReconnectDelay)
		log.Warn("federation link failed; reconnecting", "err", err, "reconnect_delay", delay)
		timer := time.NewTimer(delay)
		select {
		case <-l.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// conns are a session's two connections and their close notifications.
type conns struct {
	up, down             *amqp.Connection
	upClosed, downClosed chan *amqp.Error
	uri                  string
}

func (c *conns) close() {
	for _, x := range []*amqp.Connection{c.up, c.down} {
		if x != nil {
			_ = x.Close() // the session is over; a close error says nothing more
		}
	}
}

// connect opens the upstream connection (a URI of the upstream, the
// downstream object's vhost when the URI names none) and the downstream
// one (this broker's listener as the internal user).
func (l *link) connect() (*conns, error) {
	c := &conns{}
	uri, err := paramvalue.PickURI(l.spec.up.uris)
	if err != nil {
		return c, err
	}
	c.uri = uri
	l.mu.Lock()
	l.uri = redactURI(uri)
	l.mu.Unlock()
	name := fmt.Sprintf("Federation link (upstream: %s, policy: %s)", l.spec.up.name, l.spec.target.Name)
	if c.up, err = l.dial(uri, uriVhost(uri, l.spec.target.Vhost), nil, name); err != nil {
		return c, fmt.Errorf("upstream %s: %w", redactURI(uri), err)
	}
	local, err := l.m.cfg.Local()
	if err != nil {
		return c, fmt.Errorf("downstream: %w", err)
	}
	auth := []amqp.Authentication{&amqp.PlainAuth{Username: local.User, Password: local.Password}}
	if c.down, err = l.dial("amqp://"+local.Addr+"/", l.spec.target.Vhost, auth, name); err != nil {
		return c, fmt.Errorf("downstream: %w", err)
	}
	c.upClosed = c.up.NotifyClose(make(chan *amqp.Error, 1))
	c.downClosed = c.down.NotifyClose(make(chan *amqp.Error, 1))
	return c, nil
}

// dial opens a connection whose dial and handshake the link's context and
// a 30 s deadline bound.
func (l *link) dial(uri, vhost string, auth []amqp.Authentication, name string) (*amqp.Connection, error) {
	cfg := amqp.Config{
		Vhost: vhost, SASL: auth,
		Properties: amqp.Table{"connection_name": name},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: 30 * time.Second}
			c, err := d.DialContext(l.ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// amqp091-go clears the deadline once the handshake is done.
			return c, c.SetDeadline(time.Now().Add(30 * time.Second))
		},
	}
	return amqp.DialConfig(uri, cfg)
}

// running marks the link running over the downstream connection down.
func (l *link) running(down *amqp.Connection) {
	l.setState("running", "")
	l.mu.Lock()
	l.localConn = down.LocalAddr().String() + " -> " + down.RemoteAddr().String()
	l.mu.Unlock()
}

// sideError is why a session ended: the side and the broker's reply.
func sideError(side string, e *amqp.Error) error {
	if e == nil {
		return fmt.Errorf("%s closed", side)
	}
	return fmt.Errorf("%s closed: %w", side, e)
}

// disposable runs f on a channel of its own, so a refusal that closes the
// channel (a passive declare of what is missing) leaves the others open.
func disposable(c *amqp.Connection, f func(*amqp.Channel) error) error {
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	err = f(ch)
	if cerr := ch.Close(); err == nil && cerr != nil && !errors.Is(cerr, amqp.ErrClosed) {
		err = cerr
	}
	return err
}

// replyCode is the code of a broker's refusal, 0 for another error.
func replyCode(err error) int {
	var e *amqp.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// status is the link as /api/federation-links shows it
// (rabbit_federation_mgmt).
func (l *link) status() map[string]any {
	t, u := l.spec.target, l.spec.up
	l.mu.Lock()
	defer l.mu.Unlock()
	st := map[string]any{
		"node": l.m.cfg.Node, "vhost": t.Vhost, "id": l.id, "upstream": u.name, "status": l.state,
		"timestamp": l.since.UTC().Format(time.DateTime), "uri": l.uri,
	}
	if t.Queue {
		st["type"], st["queue"], st["upstream_queue"] = "queue", t.Name, orDefault(u.queue, t.Name)
		st["consumer_tag"] = u.consumerTag
	} else {
		st["type"], st["exchange"], st["upstream_exchange"] = "exchange", t.Name, orDefault(u.exchange, t.Name)
	}
	switch l.state {
	case "running":
		st["local_connection"] = l.localConn
	case "error":
		st["error"] = l.reason
	}
	return st
}

// issueStatus is the error entry of an object whose policy names an
// upstream or a set that does not exist (RabbitMQ shows no link at all;
// Warren says why there is none).
func issueStatus(node string, t Target, reason string) map[string]any {
	st := map[string]any{"node": node, "vhost": t.Vhost, "status": "error", "error": reason,
		"timestamp": time.Now().UTC().Format(time.DateTime)}
	if t.Queue {
		st["type"], st["queue"] = "queue", t.Name
	} else {
		st["type"], st["exchange"] = "exchange", t.Name
	}
	if s, ok := t.Policy["federation-upstream-set"].(string); ok {
		st["upstream_set"] = s
	}
	if s, ok := t.Policy["federation-upstream"].(string); ok {
		st["upstream"] = s
	}
	return st
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
