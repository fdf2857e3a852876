package shovel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// worker runs one shovel: its goroutine (run) is the only one that touches
// the connections; halt stops it and waits.
type worker struct {
	m     *Manager
	param Param
	raw   string // the parameter's value as JSON, to see changes
	def   definition
	// static: from the configuration file (Config.Static), not a
	// parameter, so delete-after ends it without deleting anything.
	static bool

	ctx    context.Context // cancelled by halt
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards the status below; a leaf
	state  string     // starting, running, terminated
	reason string
	since  time.Time
	src    string // the URIs in use, as shown
	dest   string
}

// errDone ends a shovel whose delete-after is reached.
var errDone = errors.New("delete-after reached")

func newWorker(m *Manager, p Param) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{m: m, param: p, raw: encode(p.Value), def: parseDefinition(p.Value), ctx: ctx, cancel: cancel,
		state: "starting", since: time.Now()}
}

func (w *worker) halt() {
	w.cancel()
	w.wg.Wait()
}

func (w *worker) setState(state, reason string) {
	w.mu.Lock()
	w.state, w.reason, w.since = state, reason, time.Now()
	w.mu.Unlock()
}

// run connects, moves messages until a side fails, and reconnects after
// reconnect-delay, until halted or delete-after is reached.
func (w *worker) run() {
	defer w.wg.Done()
	log := w.m.cfg.Logger.With("shovel", w.param.Name, "vhost", w.param.Vhost)
	if w.def.unsupported != "" {
		w.setState("terminated", w.def.unsupported)
		log.Warn("shovel not started", "reason", w.def.unsupported)
		return
	}
	for {
		w.setState("starting", "")
		err := w.session()
		if w.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errDone) && w.static {
			log.Info("static shovel finished: delete-after reached")
			w.setState("terminated", "")
			return
		}
		if errors.Is(err, errDone) {
			log.Info("shovel finished: delete-after reached, deleting its parameter")
			w.setState("terminated", "")
			if w.m.cfg.Delete != nil {
				if err := w.m.cfg.Delete(w.param.Vhost, w.param.Name); err != nil {
					log.Warn("deleting a finished shovel's parameter", "err", err)
				}
			}
			return
		}
		w.setState("terminated", err.Error())
		log.Warn("shovel failed; reconnecting", "err", err, "reconnect_delay", w.def.reconnectDelay)
		if w.def.reconnectDelay == 0 {
			return // RabbitMQ: a reconnect-delay of 0 does not restart the shovel
		}
		t := time.NewTimer(w.def.reconnectDelay)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// dial opens a connection to uri; a direct URI goes to the local listener.
func (w *worker) dial(uri string) (*amqp.Connection, error) {
	cfg := amqp.Config{
		Properties: amqp.Table{"connection_name": fmt.Sprintf("Shovel %s", w.param.Name)},
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: 30 * time.Second}
			c, err := d.DialContext(w.ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// amqp091-go clears the deadline once the handshake is done.
			return c, c.SetDeadline(time.Now().Add(30 * time.Second))
		},
	}
	if vhost, ok := isLocal(uri); ok {
		local, err := w.m.cfg.Local()
		if err != nil {
			return nil, err
		}
		cfg.Vhost = vhost
		cfg.SASL = []amqp.Authentication{&amqp.PlainAuth{Username: local.User, Password: local.Password}}
		uri = "amqp://" + local.Addr + "/"
	}
	return amqp.DialConfig(uri, cfg)
}

// Status is the shovel's status as GET /api/shovels shows it.
func (w *worker) status(node string) map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := map[string]any{
		"node": node, "timestamp": w.since.UTC().Format(time.DateTime), "name": w.param.Name,
		"vhost": w.param.Vhost, "type": "dynamic", "state": w.state,
	}
	if w.static {
		st["type"] = "static"
	}
	if w.state == "terminated" && w.reason != "" {
		st["reason"] = w.reason
	}
	if w.state != "running" {
		return st
	}
	d := w.def
	st["src_uri"], st["dest_uri"] = w.src, w.dest
	st["src_protocol"], st["dest_protocol"] = "amqp091", "amqp091"
	if d.srcQueue != "" {
		st["src_queue"] = d.srcQueue
	} else {
		st["src_exchange"], st["src_exchange_key"] = d.srcExchange, d.srcExchangeKey
	}
	if d.destQueue != "" {
		st["dest_queue"] = d.destQueue
	} else if d.destExchange != "" {
		st["dest_exchange"] = d.destExchange
		if d.destExchangeKey != nil {
			st["dest_exchange_key"] = *d.destExchangeKey
		}
	}
	return st
}

// ShovelStatus returns every shovel's status, sorted by vhost and name.
func (m *Manager) ShovelStatus() []map[string]any {
	m.mu.Lock()
	ws := make([]*worker, 0, len(m.workers))
	for _, w := range m.workers {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	sortWorkers(ws)
	out := make([]map[string]any, len(ws))
	for i, w := range ws {
		out[i] = w.status(m.cfg.Node)
	}
	return out
}
