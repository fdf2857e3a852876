// Package shovel runs RabbitMQ's dynamic shovels: for each runtime
// parameter of component "shovel", a worker consumes from the source broker
// and publishes to the destination broker over AMQP 0-9-1 (amqp091-go), as
// RabbitMQ 3.10's rabbitmq_shovel plugin does. The package knows nothing of
// the broker it runs in: Config gives it the stored parameters, the address
// and credential of the local listener (for amqp:// URIs with no host) and
// a way to delete a parameter (delete-after).
package shovel

import (
	"encoding/json"
	"log/slog"
	"sync"
)

// Param is one stored shovel parameter.
type Param struct {
	Vhost, Name string
	Value       any // the JSON object, numbers as json.Number
}

// Local is where the broker's own AMQP listener is and how to log in to it.
type Local struct {
	Addr, User, Password string
}

// Config wires a Manager to its broker.
type Config struct {
	// Params returns the stored shovel parameters. Required.
	Params func() []Param
	// Static are the shovels of the configuration file (RabbitMQ's static
	// shovels): run like the parameters, shown with type static, never
	// deleted (delete-after only ends one), named apart from the
	// parameters.
	Static []Param
	// Local returns the local broker's listener, for direct URIs. Required.
	Local func() (Local, error)
	// Delete removes a shovel's parameter once delete-after is reached.
	Delete func(vhost, name string) error
	// Here reports whether this node runs the shovel, so that in a cluster
	// one node moves each message: key names the shovel, and vhost and
	// queue are its source when that is a queue of this broker (a direct
	// URI), "" otherwise; the broker answers from the queue's home node
	// or a stable hash of key over the alive nodes. Nil: every shovel runs
	// here (a standalone node).
	Here func(key, vhost, queue string) bool
	// Node is the node name reported in the status.
	Node string
	// ClusterName is the cluster's name, which x-shovelled headers carry
	// as shovelled-by (rabbit_nodes:cluster_name()). Default: Node.
	ClusterName func() string
	Logger      *slog.Logger
}

// Manager runs one worker per stored shovel parameter. Its reconcile
// goroutine owns the set of workers; Changed wakes it.
type Manager struct {
	cfg  Config
	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex // guards workers; a leaf
	workers map[key]*worker
	closed  bool
}

type key struct {
	vhost, name string
	static      bool
}

// New makes a Manager; Start runs it.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Manager{cfg: cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), workers: make(map[key]*worker)}
}

// Start runs the stored shovels and follows the changes Changed announces.
func (m *Manager) Start() {
	m.wg.Add(1)
	go m.reconcileLoop()
	m.Changed()
}

// Changed tells the manager the shovel parameters may have changed. It
// never blocks, so the broker may call it with its locks held.
func (m *Manager) Changed() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Close stops every shovel and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	m.mu.Lock()
	ws := m.workers
	m.workers = map[key]*worker{}
	m.mu.Unlock()
	for _, w := range ws {
		w.halt()
	}
}

func (m *Manager) reconcileLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.stop:
			return
		case <-m.kick:
			m.reconcile()
		}
	}
}

// reconcile starts a worker for each new parameter, restarts the workers
// whose parameter changed and stops those whose parameter is gone.
func (m *Manager) reconcile() {
	want := make(map[key]Param)
	for _, p := range m.cfg.Params() {
		if m.runsHere(p) {
			want[key{p.Vhost, p.Name, false}] = p
		}
	}
	for _, p := range m.cfg.Static {
		if m.runsHere(p) {
			want[key{p.Vhost, p.Name, true}] = p
		}
	}
	m.mu.Lock()
	var stale []*worker
	for k, w := range m.workers {
		if p, ok := want[k]; !ok || encode(p.Value) != w.raw {
			stale = append(stale, w)
			delete(m.workers, k)
		}
	}
	m.mu.Unlock()
	for _, w := range stale {
		w.halt() // outside m.mu: a worker may take a moment to let go
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, p := range want {
		if _, ok := m.workers[k]; !ok && !m.closed {
			m.workers[k] = m.startWorker(p, k.static)
		}
	}
}

// runsHere asks Config.Here whether this node runs p.
func (m *Manager) runsHere(p Param) bool {
	if m.cfg.Here == nil {
		return true
	}
	d := parseDefinition(p.Value)
	var vhost, queue string
	if len(d.srcURIs) > 0 && d.srcQueue != "" {
		if vh, ok := isLocal(d.srcURIs[0]); ok {
			vhost, queue = vh, d.srcQueue
		}
	}
	return m.cfg.Here("shovel\x00"+p.Vhost+"\x00"+p.Name, vhost, queue) // a static shovel of the same name runs beside it
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// RestartShovel stops a shovel and starts it again (DELETE
// /api/shovels/vhost/{vhost}/{name}/restart); false if there is none.
func (m *Manager) RestartShovel(vhost, name string) bool {
	k := key{vhost, name, false}
	m.mu.Lock()
	w, ok := m.workers[k]
	if !ok {
		k.static = true
		w, ok = m.workers[k]
	}
	if ok {
		delete(m.workers, k)
	}
	m.mu.Unlock()
	if !ok {
		return false
	}
	w.halt()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, taken := m.workers[k]; !taken && !m.closed {
		m.workers[k] = m.startWorker(w.param, k.static)
	}
	return true
}

func (m *Manager) startWorker(p Param, static bool) *worker {
	w := newWorker(m, p)
	w.static = static
	w.wg.Add(1)
	go w.run()
	return w
}
