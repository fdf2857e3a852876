// Package federation runs RabbitMQ 3.10's federation plugin: exchanges and
// queues that a policy federates (the federation-upstream,
// federation-upstream-set or federation-upstream-pattern key) get one link
// per upstream, a goroutine that consumes from the upstream broker over
// AMQP 0-9-1 (amqp091-go) and republishes into this broker. An exchange
// link declares on the upstream what the plugin declares (a queue
// "federation: X -> CLUSTER", an internal exchange bound to the upstream
// exchange with the downstream exchange's bindings) and follows the
// downstream bindings; a queue link consumes from the upstream queue, at
// consumer priority -1, only while the downstream queue is empty and has a
// consumer of its own. Like package shovel, it knows the broker only
// through Config.
package federation

import (
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// The runtime parameter components of federation.
const (
	ComponentUpstream    = "federation-upstream"
	ComponentUpstreamSet = "federation-upstream-set"
)

// Param is one stored federation-upstream or federation-upstream-set
// parameter.
type Param struct {
	Component, Vhost, Name string
	Value                  any // the JSON value, numbers as json.Number
}

// Target is an exchange or a queue of the broker with a federation key in
// its effective policy, with what the links declare of it upstream.
type Target struct {
	Vhost, Name                   string
	Queue                         bool   // a queue; else an exchange
	Type                          string // the exchange's type
	Durable, AutoDelete, Internal bool
	Args                          map[string]any // nested tables as maps too
	Policy                        map[string]any // the effective policy definition
}

// Binding is one binding whose source is a federated exchange.
type Binding struct {
	Key  string
	Args map[string]any // nested tables as maps too
}

// Local is where the broker's own AMQP listener is and how to log in.
type Local struct {
	Addr, User, Password string
}

// Config wires a Manager to its broker. Every function is required.
type Config struct {
	// Params returns the stored upstream and upstream set parameters.
	Params func() []Param
	// Targets returns the exchanges and queues whose effective policy has
	// a federation key.
	Targets func() []Target
	// Bindings returns the bindings from an exchange (none when it is
	// gone).
	Bindings func(vhost, exchange string) []Binding
	// QueueActive reports whether a queue is empty and has a consumer of
	// priority 0 or more: what makes the plugin's queue link run.
	QueueActive func(vhost, queue string) bool
	// Local returns the broker's listener, where links publish.
	Local func() (Local, error)
	// Here reports whether this node runs a link, so that in a cluster one
	// node moves each message: key names the link, and vhost and queue
	// are the downstream queue of a queue link ("" for an exchange link);
	// the broker answers from the queue's home node (where RabbitMQ runs
	// a queue link) or a stable hash of key over the alive nodes. Nil:
	// every link runs here (a standalone node).
	Here func(key, vhost, queue string) bool
	// Node is the node name reported in the status.
	Node string
	// ClusterName is this broker's cluster name, which names the upstream
	// queue and marks the messages and bindings this broker has seen.
	ClusterName func() string
	// PollInterval is how often a queue link checks its queue's consumers
	// (the broker has no queue decorator callbacks to tell it) and the
	// manager rereads everything as a backstop for changes Changed did
	// not announce (ten times the interval). Default 200 ms.
	PollInterval time.Duration
	Logger       *slog.Logger
}

// Manager runs one link per federated object and upstream. Its reconcile
// goroutine owns the set of links; Changed wakes it.
type Manager struct {
	cfg  Config
	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex // guards links and problems; a leaf
	links  map[linkKey]*link
	issues []map[string]any // objects whose policy names no upstream or set that exists
	closed bool
}

type linkKey struct {
	vhost, name, upstream string
	queue                 bool
}

// New makes a Manager; Start runs it.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	return &Manager{cfg: cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), links: make(map[linkKey]*link)}
}

// Start runs the links and follows the changes Changed announces.
func (m *Manager) Start() {
	m.wg.Add(1)
	go m.reconcileLoop()
	m.Changed()
}

// Changed tells the manager that upstreams, policies, exchanges, queues or
// bindings may have changed. It never blocks, so the broker may call it
// with its locks held.
func (m *Manager) Changed() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Close stops every link and waits for them.
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
	ls := m.links
	m.links = map[linkKey]*link{}
	m.mu.Unlock()
	for _, l := range ls {
		l.halt()
	}
}

func (m *Manager) reconcileLoop() {
	defer m.wg.Done()
	backstop := time.NewTicker(10 * m.cfg.PollInterval)
	defer backstop.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-m.kick:
		case <-backstop.C:
		}
		m.reconcile()
		// A reconcile scans every exchange and queue: under a storm of
		// declares (reply queues) the kicks coalesce into at most one scan
		// per half poll interval instead of one after another.
		rest := time.NewTimer(m.cfg.PollInterval / 2)
		select {
		case <-m.stop:
			rest.Stop()
			return
		case <-rest.C:
		}
	}
}

// reconcile starts a link for each federated object and upstream, restarts
// those whose upstream or object changed, stops those no longer wanted and
// tells the rest that bindings may have changed.
func (m *Manager) reconcile() {
	want, issues := m.wanted()
	m.mu.Lock()
	m.issues = issues
	var stale []*link
	for k, l := range m.links {
		s, ok := want[k]
		if !ok || !s.here || s.raw != l.spec.raw {
			// Wanted nowhere: the link is removed, and cleans up
			// upstream; moved to another node or changed: restarted.
			l.removed.Store(!ok)
			stale = append(stale, l)
			delete(m.links, k)
		}
	}
	m.mu.Unlock()
	for _, l := range stale {
		l.halt() // outside m.mu: a link may take a moment to let go
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range want {
		if !s.here {
			continue
		}
		if l, ok := m.links[k]; ok {
			l.bindingsChanged()
		} else if !m.closed {
			m.links[k] = m.startLink(s)
		}
	}
}

// wanted is the links the policies and upstreams call for on any node
// (here set on those this node runs), and the federated objects whose
// policy names nothing that exists.
func (m *Manager) wanted() (map[linkKey]linkSpec, []map[string]any) {
	params := indexParams(m.cfg.Params())
	want := make(map[linkKey]linkSpec)
	var issues []map[string]any
	for _, t := range m.cfg.Targets() {
		if !federable(t) {
			continue
		}
		ups, reason := resolve(params[t.Vhost], t.Policy)
		if reason != "" {
			issues = append(issues, issueStatus(m.cfg.Node, t, reason))
			continue
		}
		for _, u := range ups {
			s := linkSpec{target: t, up: u, here: m.runsHere(t, u.name)}
			s.raw = encode([]any{t.Type, t.Durable, t.AutoDelete, t.Args, u.name, params[t.Vhost].upstreams[u.name], memberOf(t.Policy, params[t.Vhost], u.name)})
			want[linkKey{t.Vhost, t.Name, u.name, t.Queue}] = s
		}
	}
	return want, issues
}

// runsHere asks Config.Here whether this node runs the link of t from
// upstream.
func (m *Manager) runsHere(t Target, upstream string) bool {
	if m.cfg.Here == nil {
		return true
	}
	kind, queue := "exchange", ""
	if t.Queue {
		kind, queue = "queue", t.Name
	}
	return m.cfg.Here("federation\x00"+kind+"\x00"+t.Vhost+"\x00"+t.Name+"\x00"+upstream, t.Vhost, queue)
}

// federable leaves out what the plugin does not federate: the default
// exchange, internal exchanges (the upstream side's own), exclusive-like
// federation queues (x-internal-purpose).
func federable(t Target) bool {
	if !t.Queue && (t.Name == "" || t.Internal) {
		return false
	}
	_, internal := t.Args["x-internal-purpose"]
	return !internal
}

// memberOf is the set member's overrides for upstream name, so a change to
// the set restarts the links it shapes.
func memberOf(policy map[string]any, vp *vhostParams, name string) any {
	set, _ := policy["federation-upstream-set"].(string)
	if vp == nil || set == "" || set == "all" {
		return nil
	}
	var out []any
	for _, mm := range vp.sets[set] {
		if x, _ := mm.(map[string]any); x["upstream"] == name {
			out = append(out, x)
		}
	}
	return out
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func (m *Manager) startLink(s linkSpec) *link {
	l := newLink(m, s)
	l.wg.Add(1)
	go l.run()
	return l
}

// Links returns every link's status as /api/federation-links shows it,
// with an error entry for each federated object whose policy names an
// upstream or a set that does not exist, sorted by vhost, object and
// upstream.
func (m *Manager) Links() []map[string]any {
	m.mu.Lock()
	ls := make([]*link, 0, len(m.links))
	for _, l := range m.links {
		ls = append(ls, l)
	}
	out := append([]map[string]any(nil), m.issues...)
	m.mu.Unlock()
	for _, l := range ls {
		out = append(out, l.status())
	}
	sort.SliceStable(out, func(i, j int) bool {
		for _, k := range []string{"vhost", "type", "exchange", "queue", "upstream"} {
			a, _ := out[i][k].(string)
			b, _ := out[j][k].(string)
			if a != b {
				return a < b
			}
		}
		return false
	})
	return out
}

// RestartLink restarts the link with status id id in vhost; false if
// there is none.
func (m *Manager) RestartLink(vhost, id string) bool {
	m.mu.Lock()
	var found *link
	var k linkKey
	for key, l := range m.links {
		if key.vhost == vhost && l.id == id {
			found, k = l, key
			delete(m.links, key)
			break
		}
	}
	m.mu.Unlock()
	if found == nil {
		return false
	}
	found.halt()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, taken := m.links[k]; !taken && !m.closed {
		m.links[k] = m.startLink(found.spec)
	}
	return true
}
