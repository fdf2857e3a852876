package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/warrenmq/warren/cluster/replica"
	"log/slog"
	"net"
	"os"
	"runtime/metrics"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/queueindex"
)

// Server is a Warren broker node: the AMQP listener, vhosts and users.
//
// Lock order: Server.mu → Vhost.mu → Exchange.mu; Queue.mu → channel.umu →
// outbox.mu. users.mu, alarms.mu and limitsMu are leaves. See LOCKS.md.
type Server struct {
	cfg    Config
	log    *slog.Logger
	nodeID string // see NodeID (identity.go)

	ln      net.Listener
	amqpsLn net.Listener  // nil unless Config.AMQPSListen is set
	tls     *tls.Config   // from Config's TLS files; nil without a certificate
	quit    chan struct{} // closed by Close
	wg      sync.WaitGroup

	// remote serves queues homed on other cluster nodes and this node's
	// queues to them (remote.go); nil on a standalone node.
	remote *remoteQueues
	// replicas runs this node's replicas of quorum queues (quorum_replicas.go).
	replicas replica.Manager
	// commitLatency times quorum queue confirms (quorum_status.go).
	commitLatency commitLatency

	mu     sync.RWMutex
	vhosts map[string]*Vhost
	conns  map[uint64]*conn
	nextID atomic.Uint64

	meta    *metaStore // nil without a data directory
	dirLock *dirLock   // the data directory's LOCK, held until Close
	// applyMu makes Server.apply sequential, as a Raft FSM applies log
	// entries: the order of changes in memory is their order in meta.db.
	// It comes after adminState.mu and before every other lock apply takes.
	applyMu sync.Mutex
	// appliedIndex is the last Raft log index applied (ApplyCommitted),
	// kept in meta.db with the definitions; guarded by applyMu.
	appliedIndex uint64
	// seeded: the metadata log's seed entry was applied (cluster_boot.go);
	// kept in meta.db with appliedIndex; guarded by applyMu.
	seeded bool
	// cluster is the node's cluster membership; nil on a standalone node,
	// whose apply takes the direct path (cluster_node.go).
	cluster *clusterMember
	started time.Time // New's time, the node's uptime in a cluster's status
	users   *users
	alarms  alarms
	replies replyRegistry
	// admin is the management API's state: cluster name, topic permissions,
	// the channel registry and closed channels' counters (admin.go).
	admin adminState
	// churn counts connections, channels and queues as they come and go
	// (churn.go).
	churn churn

	// indexFiles holds the open files of every queue index of the node
	// (index_files.go); nil without a data directory.
	indexFiles *queueindex.FileCache

	// Limits (limits.go): sockets counts admitted AMQP sockets for
	// MaxConnections, fds every socket against the descriptor budget
	// (fdlimit.go); limitsMu guards vhostConns, the open connections per vhost.
	sockets        atomic.Int64
	fds            *fdBudget
	refusedSockets atomic.Uint64
	refusedLog     logLimiter // refused sockets
	acceptLog      logLimiter // accept errors
	limitsMu       sync.Mutex
	vhostConns     map[*Vhost]int
	// userConns and userChannels count each user's open connections and
	// channels (user_limits.go); also under limitsMu.
	userConns, userChannels map[string]int

	// failures rate-limits the log of failed logins (loginfail.go).
	failures *failureLog

	watermark atomic.Uint64
	diskLimit atomic.Uint64
	coarse    atomic.Int64 // unix ms, refreshed by tickClock
	closeOnce sync.Once
	closing   bool        // guarded by mu: Close has begun
	serving   atomic.Bool // between Start's listeners and Close (Health)
}

// New validates cfg and builds a server with its vhosts and users. Call Start
// to listen.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: invalid config: %w", err)
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, quit: make(chan struct{}),
		vhosts: make(map[string]*Vhost), conns: make(map[uint64]*conn), users: newUsers(),
		vhostConns: make(map[*Vhost]int), userConns: make(map[string]int), userChannels: make(map[string]int), failures: newFailureLog(cfg.LoginFailureLogInterval),
		fds: newFDBudget(descriptorLimit()),
	}
	s.users.apply = s.apply
	s.started = time.Now()
	if cfg.Cluster != nil {
		s.cluster = newClusterMember(&cfg)
		s.cluster.peers = &clusterPeers{}
		s.enableRemoteQueues(s.cluster.cfg.NodeName, s.cluster.peers, s.cluster.peers)
	}
	if err := s.loadTLS(); err != nil {
		return nil, err
	}
	s.watermark.Store(cfg.MemoryHighWatermark)
	s.diskLimit.Store(cfg.DiskFreeLimit)
	if cfg.DataDir != "" {
		// First of all, so that a second broker on the directory stops
		// before it opens any of its files.
		lock, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		s.dirLock = lock
		if err := s.openIndexFiles(); err != nil {
			s.closeMeta()
			return nil, err
		}
		meta, err := openMeta(cfg.DataDir)
		if err != nil {
			s.closeMeta()
			return nil, err
		}
		s.meta = meta
		st, err := meta.loadAppliedState()
		s.appliedIndex, s.seeded = st.index, st.seeded
		if err != nil {
			s.closeMeta()
			return nil, fmt.Errorf("%w: %v", ErrMetaUnreadable, err)
		}
		if err := migrateLayout(cfg.DataDir, meta, s.log); err != nil {
			s.closeMeta()
			return nil, err
		}
	}
	// After lockDataDir, which keeps a second node off this directory.
	id, err := loadNodeID(cfg.DataDir)
	if err != nil {
		s.closeMeta()
		return nil, err
	}
	s.nodeID = id
	// Just before the definitions, which open the quorum queues' replicas:
	// no earlier return may leave the manager's goroutines running.
	if err := s.startReplicas(); err != nil {
		s.closeMeta()
		return nil, err
	}
	started := time.Now()
	firstBoot, err := s.loadDefinitions()
	switch {
	case err != nil:
	case s.cluster != nil:
		// Not applied locally: the cluster's log has them (cluster_boot.go).
		err = s.prepareClusterBoot(firstBoot)
	default:
		err = s.applyConfigDefinitions(firstBoot)
		if err == nil {
			err = s.seedClusterID()
		}
	}
	if err == nil {
		err = s.recoverStorage(started)
	}
	if err != nil {
		s.stopReplicas()
		s.shutdownStorage()
		s.closeMeta()
		return nil, err
	}
	return s, nil
}

// applyConfigDefinitions creates the configured vhosts and users. The default
// user is created only on first boot, as in RabbitMQ: deleting guest is final.
func (s *Server) applyConfigDefinitions(firstBoot bool) error {
	cfg := &s.cfg
	for _, v := range append([]string{cfg.DefaultVhost}, cfg.Vhosts...) {
		s.addConfiguredVhost(v)
	}
	loopback := make(map[string]bool)
	for _, u := range cfg.LoopbackUsers {
		loopback[u] = true
	}
	configured := make(map[string]bool)
	for _, u := range cfg.Users {
		configured[u.Name] = true
		hash := u.PasswordHash
		if hash == "" {
			hash = HashPassword(u.Password)
		}
		if err := s.users.put(u.Name, hash, u.Tags, loopback[u.Name]); err != nil {
			return fmt.Errorf("server: %w", err)
		}
		for vh, p := range u.Permissions {
			if !s.addConfiguredVhost(vh) {
				continue
			}
			if err := s.users.setPermission(u.Name, vh, p); err != nil {
				return fmt.Errorf("server: %w", err)
			}
		}
	}
	if cfg.DefaultUser != "" && !configured[cfg.DefaultUser] && firstBoot {
		if err := s.users.put(cfg.DefaultUser, HashPassword(cfg.DefaultPassword), []string{"administrator"}, loopback[cfg.DefaultUser]); err != nil {
			return fmt.Errorf("server: %w", err)
		}
		if err := s.users.setPermission(cfg.DefaultUser, cfg.DefaultVhost, Permission{".*", ".*", ".*"}); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	return nil
}

// addConfiguredVhost creates a vhost the configuration names. One that
// cannot be created (its files do not open) is logged and left out, like a
// stored definition that cannot be loaded: the broker serves the others.
func (s *Server) addConfiguredVhost(name string) bool {
	if _, err := s.addVhost(name, VhostMeta{}); err != nil {
		s.log.Error("vhost skipped: it cannot be created", "vhost", name, "err", err)
		return false
	}
	return true
}

// closeMeta closes meta.db and then releases the data directory's lock,
// the last file of the directory the node holds.
func (s *Server) closeMeta() {
	if s.meta != nil {
		if err := s.meta.close(); err != nil {
			s.log.Error("closing metadata store", "err", err)
		}
	}
	if err := s.dirLock.release(); err != nil {
		s.log.Error("releasing the data directory lock", "err", err)
	}
	s.dirLock = nil
}

// Start listens on Config.AMQPListen, and Config.AMQPSListen when set, and
// serves connections in the background. Both listeners share the connection
// code; TLS only wraps the socket.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.AMQPListen)
	if err != nil {
		return &ListenError{Field: "AMQPListen", Addr: s.cfg.AMQPListen, Err: err}
	}
	// Before clients: Raft replays what meta.db does not have yet.
	if err := s.StartCluster(); err != nil {
		ln.Close()
		return err
	}
	if s.cfg.AMQPSListen != "" {
		tln, err := net.Listen("tcp", s.cfg.AMQPSListen)
		if err != nil {
			ln.Close()
			s.stopCluster()
			return &ListenError{Field: "AMQPSListen", Addr: s.cfg.AMQPSListen, Err: err}
		}
		s.amqpsLn = tls.NewListener(tln, s.tls)
		s.log.Info("AMQPS listener started", "addr", tln.Addr().String())
	}
	s.ln = ln
	s.log.Info("AMQP listener started", "addr", ln.Addr().String())
	s.log.Info("descriptor budget", "fd_limit", s.fds.fdLimit, "sockets_limit", s.fds.sockets)
	s.coarse.Store(nowMillis())
	s.goFunc(s.tickClock)
	s.goFunc(s.releaseIdleIndexPages)
	s.serving.Store(true)
	s.goFunc(func() { s.acceptLoop(ln) })
	if s.amqpsLn != nil {
		s.goFunc(func() { s.acceptLoop(s.amqpsLn) })
	}
	s.goFunc(s.resourceMonitor)
	return nil
}

// ListenError is a listener Start could not open (the address is taken, or
// not this host's); Field names the Config field that gave the address.
type ListenError struct {
	Field, Addr string
	Err         error
}

func (e *ListenError) Error() string { return fmt.Sprintf("server: %s %s: %v", e.Field, e.Addr, e.Err) }

func (e *ListenError) Unwrap() error { return e.Err }

// Addr returns the listener's address (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// AMQPSAddr returns the TLS listener's address, or nil when it is off.
func (s *Server) AMQPSAddr() net.Addr {
	if s.amqpsLn == nil {
		return nil
	}
	return s.amqpsLn.Addr()
}

// goFunc runs f on a goroutine tracked by the server's WaitGroup.
func (s *Server) goFunc(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// acceptLoop serves ln until it is closed. Sockets beyond the node's limits
// are closed at once (limits.go). Any other accept error (EMFILE, ENFILE,
// ECONNABORTED, ...) pauses the loop with net/http's back-off, 5 ms doubling
// to 1 s, and is logged at most once a second: running out of descriptors
// must not end the listener.
func (s *Server) acceptLoop(ln net.Listener) {
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			if s.acceptLog.allow() {
				s.log.Warn("accept failed; retrying", "addr", ln.Addr().String(), "err", err, "backoff", backoff)
			}
			select {
			case <-s.quit:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true) // best effort: the default is already on
		}
		if ok, why := s.admitSocket(); !ok {
			s.refuseSocket(nc, why)
			continue
		}
		c := newConn(s, nc, s.nextID.Add(1))
		s.goFunc(func() {
			defer s.releaseSocket()
			c.serve()
			s.churn.connectionsClosed.Add(1)
		})
	}
}

// registerConn records a new connection; it refuses once Close has begun, so
// Close sees every connection it must wait for.
func (s *Server) registerConn(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c.id] = c
	return true
}

func (s *Server) unregisterConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c.id)
	s.mu.Unlock()
}

// Close stops the listener, closes every connection with 320
// CONNECTION_FORCED and waits for all goroutines to finish.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.log.Info("stopping: closing the AMQP listeners")
		close(s.quit)
		s.serving.Store(false)
		if s.ln != nil {
			err = s.ln.Close()
		}
		if s.amqpsLn != nil {
			err = errors.Join(err, s.amqpsLn.Close())
		}
		s.mu.Lock()
		s.closing = true
		conns := make([]*conn, 0, len(s.conns))
		for _, c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		s.log.Info("stopping: closing connections", "connections", len(conns))
		for _, c := range conns {
			c.forceClose(amqp.ConnectionForced, "broker forced connection closure with reason 'shutdown'")
		}
		s.wg.Wait()
		if s.remote != nil {
			s.remote.close()
		}
		// After the connections, whose exclusive queues are deleted
		// through the cluster; before storage, which the FSM writes.
		s.drainQuorumQueues() // while the lease holds: before the cluster stops
		s.stopCluster()
		s.stopReplicas()
		s.log.Info("stopping: checkpointing message stores and queue indexes")
		s.shutdownStorage()
		s.closeMeta()
		s.log.Info("stopped")
	})
	return err
}

// forceClose closes the connection from outside its reader: the close frame
// is flushed, then the socket is shut so the reader cleans up. Any goroutine.
func (c *conn) forceClose(code uint16, text string) {
	c.stateMu.Lock()
	if c.forcedWith.by == "" {
		c.forcedWith = connClose{by: closedByBroker, code: code, text: text}
	}
	if !c.running {
		// Still in the handshake: there is no writer to flush a close frame.
		c.forcedClose = true
		c.stateMu.Unlock()
		c.nc.Close()
		return
	}
	c.stateMu.Unlock()
	e := amqp.NewError(code, 0, "%s", text)
	c.out.sendMethod(0, c.wire(&amqp.ConnectionClose{ReplyCode: code, ReplyText: e.ReplyText()}))
	c.closeAfterFlush.Store(true)
	c.out.signal()
}

// openVhostStorage gives a vhost its message store when the server has a
// data directory.
func (s *Server) openVhostStorage(vh *Vhost) error {
	vh.srv = s
	vh.streams.bind(s) // streams declared by any path (AMQP, API, definitions) open with this server
	if s.cfg.DataDir == "" {
		return nil
	}
	st, err := openVhostStorage(s.cfg.DataDir, vh.name, &s.cfg, vh.log)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	tr, err := openTransientStorage(s.cfg.DataDir, vh.name, &s.cfg, vh.log)
	if err != nil {
		st.stop()
		return errors.Join(fmt.Errorf("server: %w", err), st.store.Close())
	}
	st.files, tr.files = s.indexFiles, s.indexFiles
	vh.storage, vh.transient = st, tr
	return nil
}

// closeVhostStorage stops and closes the stores of a vhost that holds no
// queues yet (one whose creation failed).
func (s *Server) closeVhostStorage(vh *Vhost) {
	for _, st := range []*vhostStorage{vh.transient, vh.storage} {
		if st == nil {
			continue
		}
		st.stop()
		if err := st.store.Close(); err != nil {
			vh.log.Error("closing the message store of a vhost that could not be created", "err", err)
		}
	}
	vh.storage, vh.transient = nil, nil
}

// clock returns the time in unix milliseconds from a coarse clock ticking
// every clockTick, so stamping each delivery costs no time.Now call.
func (s *Server) clock() int64 {
	if t := s.coarse.Load(); t != 0 {
		return t
	}
	return nowMillis()
}

// clockTick is the coarse clock's resolution, ample for consumer timeouts.
const clockTick = 50 * time.Millisecond

// tickClock keeps the coarse clock current until the server closes.
func (s *Server) tickClock() {
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		s.coarse.Store(nowMillis())
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// addVhost creates a vhost with metadata m through the apply
// (prepareDeclareVhost: its files first, then its record), or returns the
// existing one unchanged.
func (s *Server) addVhost(name string, m VhostMeta) (*Vhost, error) {
	if s.cluster != nil {
		if vh := s.Vhost(name); vh != nil {
			return vh, nil
		}
		if _, err := s.propose(DeclareVhost{Name: name, Meta: m}); err != nil {
			return nil, err
		}
		return s.Vhost(name), nil
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if vh := s.Vhost(name); vh != nil {
		return vh, nil
	}
	if _, err := s.applyOneLocked(DeclareVhost{Name: name, Meta: m}); err != nil {
		return nil, err
	}
	return s.Vhost(name), nil
}

// undoVhostFiles removes the directory a failed vhost create made. A
// directory that was there before is left alone: it may hold the files of a
// vhost meta.db has and this start skipped.
func (s *Server) undoVhostFiles(vh *Vhost, existed bool) error {
	if s.cfg.DataDir == "" || existed {
		return nil
	}
	if err := os.RemoveAll(vhostDir(s.cfg.DataDir, vh.name)); err != nil {
		return fmt.Errorf("server: removing the files of vhost %q that could not be created: %w", vh.name, err)
	}
	return nil
}

// Vhost returns the named vhost or nil.
func (s *Server) Vhost(name string) *Vhost {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.vhosts[name]
}

// Vhosts returns all vhosts sorted by name.
func (s *Server) Vhosts() []*Vhost {
	s.mu.RLock()
	out := make([]*Vhost, 0, len(s.vhosts))
	for _, v := range s.vhosts {
		out = append(out, v)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Connections returns snapshots of the connections past their handshake,
// ordered by id.
func (s *Server) Connections() []ConnInfo {
	// Info formats addresses: done after s.mu, which connections opening
	// and closing wait for, is released.
	s.mu.RLock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		if c.isRunning() {
			conns = append(conns, c)
		}
	}
	s.mu.RUnlock()
	out := make([]ConnInfo, len(conns))
	for i, c := range conns {
		out[i] = c.Info()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CloseConnection closes a connection with 320 CONNECTION_FORCED and reason.
func (s *Server) CloseConnection(id uint64, reason string) bool {
	s.mu.RLock()
	c := s.conns[id]
	s.mu.RUnlock()
	if c == nil {
		return false
	}
	c.forceClose(amqp.ConnectionForced, reason)
	return true
}

var memSamples = []metrics.Sample{
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
}

// MemoryUsed returns the bytes of memory the Go runtime holds from the OS.
func MemoryUsed() uint64 {
	s := make([]metrics.Sample, len(memSamples))
	copy(s, memSamples)
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}
