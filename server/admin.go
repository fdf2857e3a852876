package server

import (
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API: exported snapshots and operations the management
// package (mgmt) builds its HTTP API on. The server knows nothing of HTTP or
// JSON here: reads return value snapshots taken under short locks, so callers
// encode them with no server lock held, and every mutation goes through the
// same internal methods AMQP clients use (declareQueue, bindQueue,
// users.put, ...), so it is validated and recorded the same way.
//
// Lock order of this file: adminState.mu is taken before every other lock
// (it serialises check-then-act administrative mutations such as "create or
// update"), then vhostAdmin.applyMu, then the core order (Server.mu →
// Vhost.mu → vhostAdmin.mu; Vhost.mu → Queue.mu; users.mu). adminState.chmu
// and adminState.pmu are leaves.

// adminState is the server-wide administrative state with no other home.
// Its zero value is ready to use.
type adminState struct {
	mu sync.Mutex // serialises administrative mutations; first in lock order

	pmu         sync.RWMutex // leaf: guards everything below up to chmu
	clusterName string       // set with SetClusterName, kept in meta.db
	// defaultClusterName is what ClusterName reports while none is set.
	defaultClusterName string
	params             map[paramKey]any
	globals            map[string]any

	chmu     sync.Mutex // leaf: guards channels and retired
	channels map[*channel]struct{}
	// retired holds, per vhost, the message counts of channels that have
	// closed and of publishes and gets made through this API, so vhost and
	// overview totals never go backwards when a channel goes.
	retired map[string]*MessageCounters
}

// channelStats are a channel's management counters and mirrors of its
// reader-owned mode, updated by the reader with atomics so any goroutine may
// read them. See the hooks in channel.go, publish.go and tx.go.
type channelStats struct {
	publish, returned, dropped           counter
	deliver, deliverNoAck, get, getNoAck counter
	getEmpty, redeliver, ack             counter

	confirmMode, txMode atomic.Bool
	prefetch            atomic.Uint32 // basic.qos global=false
}

func (st *channelStats) delivered(noAck, redelivered bool) {
	if noAck {
		st.deliverNoAck.inc()
	} else {
		st.deliver.inc()
	}
	if redelivered {
		st.redeliver.inc()
	}
}

func (st *channelStats) got(noAck, redelivered bool) {
	if noAck {
		st.getNoAck.inc()
	} else {
		st.get.inc()
	}
	if redelivered {
		st.redeliver.inc()
	}
}

// unroutable counts a publish that reached no queue: returned when mandatory,
// dropped otherwise.
func (st *channelStats) unroutable(routed, mandatory bool) {
	switch {
	case routed:
	case mandatory:
		st.returned.inc()
	default:
		st.dropped.inc()
	}
}

func (st *channelStats) settled(kind settleKind, n int) {
	if kind == settleAck {
		st.ack.add(n)
	}
}

func (st *channelStats) enterConfirm() { st.confirmMode.Store(true) }

func (st *channelStats) counters() MessageCounters {
	return MessageCounters{
		Publish:          st.publish.value(),
		ReturnUnroutable: st.returned.value(), DropUnroutable: st.dropped.value(),
		Deliver: st.deliver.value(), DeliverNoAck: st.deliverNoAck.value(),
		Get: st.get.value(), GetNoAck: st.getNoAck.value(), GetEmpty: st.getEmpty.value(),
		Redeliver: st.redeliver.value(), Ack: st.ack.value(),
	}
}

// track registers an open channel for listing. Called by the connection's
// reader when the channel opens.
func (a *adminState) track(ch *channel) {
	a.chmu.Lock()
	if a.channels == nil {
		a.channels = make(map[*channel]struct{})
	}
	a.channels[ch] = struct{}{}
	a.chmu.Unlock()
}

// untrack removes a closing channel and keeps its counts in the vhost's
// totals. Idempotent: shutdown may run twice for a channel.
func (a *adminState) untrack(ch *channel) {
	a.chmu.Lock()
	defer a.chmu.Unlock()
	if _, ok := a.channels[ch]; !ok {
		return
	}
	delete(a.channels, ch)
	a.retiredLocked(ch.conn.vhost.name).Add(ch.counters())
}

func (a *adminState) retiredLocked(vhost string) *MessageCounters {
	if a.retired == nil {
		a.retired = make(map[string]*MessageCounters)
	}
	r := a.retired[vhost]
	if r == nil {
		r = &MessageCounters{}
		a.retired[vhost] = r
	}
	return r
}

// account adds counts of an API publish or get to a vhost's totals.
func (a *adminState) account(vhost string, m MessageCounters) {
	a.chmu.Lock()
	a.retiredLocked(vhost).Add(m)
	a.chmu.Unlock()
}

// liveChannels returns the open channels.
func (a *adminState) liveChannels() []*channel {
	a.chmu.Lock()
	defer a.chmu.Unlock()
	out := make([]*channel, 0, len(a.channels))
	for ch := range a.channels {
		out = append(out, ch)
	}
	return out
}

// MessageCounters are cumulative message counts, as RabbitMQ's message_stats.
type MessageCounters struct {
	Publish          uint64 // messages published by clients
	Confirm          uint64 // publisher confirms (basic.ack) sent
	ReturnUnroutable uint64 // mandatory messages returned as unroutable
	DropUnroutable   uint64 // non-mandatory messages that reached no queue
	Deliver          uint64 // deliveries to consumers that must ack
	DeliverNoAck     uint64 // deliveries to no-ack consumers
	Get              uint64 // basic.get with acknowledgement
	GetNoAck         uint64 // basic.get without acknowledgement
	GetEmpty         uint64 // basic.get on an empty queue
	Redeliver        uint64 // deliveries and gets of redelivered messages
	Ack              uint64 // acknowledgements from clients
}

// Add adds o to m field by field.
func (m *MessageCounters) Add(o MessageCounters) {
	m.Publish += o.Publish
	m.Confirm += o.Confirm
	m.ReturnUnroutable += o.ReturnUnroutable
	m.DropUnroutable += o.DropUnroutable
	m.Deliver += o.Deliver
	m.DeliverNoAck += o.DeliverNoAck
	m.Get += o.Get
	m.GetNoAck += o.GetNoAck
	m.GetEmpty += o.GetEmpty
	m.Redeliver += o.Redeliver
	m.Ack += o.Ack
}

// VhostCounters returns the message counters of every vhost: closed
// channels' totals plus the open channels' counts.
func (s *Server) VhostCounters() map[string]MessageCounters {
	a := &s.admin
	a.chmu.Lock()
	out := make(map[string]MessageCounters, len(a.retired))
	for vh, r := range a.retired {
		out[vh] = *r
	}
	for ch := range a.channels {
		m := out[ch.conn.vhost.name]
		m.Add(ch.counters())
		out[ch.conn.vhost.name] = m
	}
	a.chmu.Unlock()
	return out
}

// Login checks a user's password for the management API. loopback says
// whether the client connected from a loopback address; users restricted to
// loopback (LoopbackUsers) fail with ErrLoopbackOnly otherwise.
func (s *Server) Login(name, password string, loopback bool) (UserInfo, error) {
	a, ok := s.users.authenticate(name, password)
	if !ok {
		return UserInfo{}, ErrLoginFailed
	}
	s.users.mu.RLock()
	info := UserInfo{Name: a.name, Tags: slices.Clone(a.tags)}
	only := a.loopbackOnly
	s.users.mu.RUnlock()
	if only && !loopback {
		return UserInfo{}, ErrLoopbackOnly
	}
	return info, nil
}

// IsLoopback reports whether addr ("host:port" or a host) is a loopback address.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Access is one of the three permissions RabbitMQ checks on resource names.
type Access int

// The three permissions.
const (
	AccessConfigure Access = Access(accessConfigure)
	AccessWrite     Access = Access(accessWrite)
	AccessRead      Access = Access(accessRead)
)

// Permitted reports whether user's permissions on vhost grant a on the
// resource name (the default exchange "" is checked as amq.default).
func (s *Server) Permitted(user, vhost string, a Access, resource string) bool {
	p := s.users.permission(user, vhost)
	return p != nil && p.allows(access(a), resource)
}

// HasVhostAccess reports whether user has any permissions on vhost.
func (s *Server) HasVhostAccess(user, vhost string) bool {
	return s.users.permission(user, vhost) != nil
}

// UserSummary describes a user without its password hash.
type UserSummary struct {
	Name             string
	Tags             []string
	HasPassword      bool
	HashingAlgorithm string
}

// Users returns every user sorted by name, without password hashes.
func (s *Server) Users() []UserSummary {
	s.users.mu.RLock()
	out := make([]UserSummary, 0, len(s.users.accounts))
	for _, a := range s.users.accounts {
		out = append(out, summarize(a))
	}
	s.users.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func summarize(a *account) UserSummary {
	return UserSummary{
		Name: a.name, Tags: slices.Clone(a.tags), HasPassword: a.passwordHash != "",
		HashingAlgorithm: HashAlgorithm(a.passwordHash),
	}
}

// User returns one user, without its password hash.
func (s *Server) User(name string) (UserSummary, error) {
	s.users.mu.RLock()
	defer s.users.mu.RUnlock()
	a := s.users.accounts[name]
	if a == nil {
		return UserSummary{}, fmt.Errorf("%w: %q", ErrNoSuchUser, name)
	}
	return summarize(a), nil
}

// userHashes returns every user with its hash; only definitions export uses it.
func (s *Server) userHashes() []UserInfo { return s.users.list() }

// UserSpec is a user to create or update. With neither Password nor
// PasswordHash set the user has no password (as RabbitMQ: it cannot log in
// with one).
type UserSpec struct {
	Name             string
	Password         *string
	PasswordHash     *string
	HashingAlgorithm string
	Tags             []string
}

// PutUser creates or replaces a user and reports whether it was created.
func (s *Server) PutUser(u UserSpec) (created bool, err error) {
	if u.Name == "" {
		return false, fmt.Errorf("%w: user name is empty", ErrInvalid)
	}
	var hash string
	switch {
	case u.Password != nil && u.PasswordHash != nil:
		return false, fmt.Errorf("%w: both_password_and_password_hash_are_provided", ErrInvalid)
	case u.Password != nil:
		hash = HashPassword(*u.Password)
	case u.PasswordHash != nil:
		if err := CheckPasswordHash(*u.PasswordHash, u.HashingAlgorithm); err != nil {
			return false, err
		}
		hash = *u.PasswordHash
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.putUserLocked(u.Name, hash, u.Tags)
}

func (s *Server) putUserLocked(name, hash string, tags []string) (bool, error) {
	s.users.mu.RLock()
	_, exists := s.users.accounts[name]
	s.users.mu.RUnlock()
	if tags == nil {
		tags = []string{}
	}
	if err := s.users.put(name, hash, tags, slices.Contains(s.cfg.LoopbackUsers, name)); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return !exists, nil
}

// DeleteUser removes a user with its permissions and topic permissions and,
// as RabbitMQ, closes its connections with 320 CONNECTION_FORCED.
func (s *Server) DeleteUser(name string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	found, err := s.users.remove(name)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrNoSuchUser, name)
	}
	s.closeUserConnections(name, fmt.Sprintf("user '%s' is deleted", name))
	return nil
}

// closeUserConnections force-closes every running connection of a user.
// A connection still in its handshake needs no closing: it finds the user
// gone when it opens its vhost.
func (s *Server) closeUserConnections(user, reason string) {
	s.mu.RLock()
	var conns []*conn
	for _, c := range s.conns {
		// isRunning orders the read of c.user after the handshake set it.
		if c.isRunning() && c.user.name == user {
			conns = append(conns, c)
		}
	}
	s.mu.RUnlock()
	for _, c := range conns {
		c.forceClose(amqp.ConnectionForced, reason)
	}
}

// PermissionInfo is a user's permission on a vhost.
type PermissionInfo struct {
	User, Vhost string
	Permission
}

// Permissions returns every permission, sorted by user then vhost.
func (s *Server) Permissions() []PermissionInfo {
	s.users.mu.RLock()
	var out []PermissionInfo
	for _, a := range s.users.accounts {
		for vh, p := range a.perms {
			out = append(out, PermissionInfo{User: a.name, Vhost: vh, Permission: p.Permission})
		}
	}
	s.users.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Vhost < out[j].Vhost
	})
	return out
}

// SetPermission grants a user permissions on a vhost and reports whether the
// user had none there before. Both must exist.
func (s *Server) SetPermission(user, vhost string, p Permission) (created bool, err error) {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.setPermissionLocked(user, vhost, p)
}

func (s *Server) setPermissionLocked(user, vhost string, p Permission) (bool, error) {
	if s.Vhost(vhost) == nil {
		return false, fmt.Errorf("%w: %q", ErrNoSuchVhost, vhost)
	}
	if _, err := s.User(user); err != nil {
		return false, err
	}
	created := s.users.permission(user, vhost) == nil
	if err := s.users.setPermission(user, vhost, p); err != nil {
		if _, bad := compilePermission(p); bad != nil {
			return false, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return false, err
	}
	return created, nil
}

// ClearPermission removes a user's permissions on a vhost.
func (s *Server) ClearPermission(user, vhost string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	if s.users.permission(user, vhost) == nil {
		return fmt.Errorf("%w: no permissions of %q on vhost %q", ErrNotFound, user, vhost)
	}
	if err := s.users.clearPermission(user, vhost); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// TopicPermissions returns every topic permission, sorted by user, vhost and exchange.
func (s *Server) TopicPermissions() []TopicPermission {
	out := s.users.topicPermissions()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.User != b.User {
			return a.User < b.User
		}
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		return a.Exchange < b.Exchange
	})
	return out
}

// SetTopicPermission stores a topic permission and reports whether it is
// new. It applies to the user's next publish or bind on open channels too.
func (s *Server) SetTopicPermission(tp TopicPermission) (created bool, err error) {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.setTopicPermissionLocked(tp)
}

func (s *Server) setTopicPermissionLocked(tp TopicPermission) (bool, error) {
	if s.Vhost(tp.Vhost) == nil {
		return false, fmt.Errorf("%w: %q", ErrNoSuchVhost, tp.Vhost)
	}
	if _, err := s.User(tp.User); err != nil {
		return false, err
	}
	if tp.Exchange == "" {
		return false, fmt.Errorf("%w: topic permission without an exchange", ErrInvalid)
	}
	return s.users.setTopicPermission(tp)
}

// ClearTopicPermissions removes a user's topic permissions on a vhost: all
// of them, or the one for exchange when it is not "".
func (s *Server) ClearTopicPermissions(user, vhost, exchange string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	n, err := s.users.clearTopicPermissions(user, vhost, exchange)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no topic permissions of %q on vhost %q", ErrNotFound, user, vhost)
	}
	return nil
}

// VhostMeta is a vhost's descriptive metadata.
type VhostMeta struct {
	Description      string
	Tags             []string
	DefaultQueueType string
	Tracing          bool
}

// VhostInfo is a snapshot of a vhost with its message totals.
type VhostInfo struct {
	Name string
	VhostMeta
	Messages, Ready, Unacked int
	RecvOct, SendOct         uint64
}

// Meta returns the vhost's metadata. The default vhost created at start is
// described as RabbitMQ describes its own.
func (vh *Vhost) Meta() VhostMeta {
	vh.adm.mu.RLock()
	m := vh.adm.meta
	vh.adm.mu.RUnlock()
	m.Tags = slices.Clone(m.Tags)
	if m.Tags == nil {
		m.Tags = []string{}
	}
	return m
}

// VhostInfos returns a snapshot of every vhost sorted by name, with the
// message totals of its queues and the traffic of its connections.
func (s *Server) VhostInfos() []VhostInfo {
	vhs := s.Vhosts()
	out := make([]VhostInfo, len(vhs))
	idx := make(map[string]int, len(vhs))
	for i, vh := range vhs {
		out[i] = VhostInfo{Name: vh.name, VhostMeta: vh.Meta()}
		idx[vh.name] = i
		for _, q := range vh.Queues() {
			ready, unacked := q.depth()
			out[i].Ready += ready
			out[i].Unacked += unacked
		}
		out[i].Messages = out[i].Ready + out[i].Unacked
	}
	for _, c := range s.Connections() {
		if i, ok := idx[c.Vhost]; ok {
			out[i].RecvOct += c.RecvOct
			out[i].SendOct += c.SendOct
		}
	}
	return out
}

// depth returns the queue's ready and unacknowledged message counts.
func (q *Queue) depth() (ready, unacked int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lengthLocked(), q.unacked
}

// PutVhost creates a vhost or updates its metadata, and reports whether it
// was created.
func (s *Server) PutVhost(name string, meta VhostMeta) (created bool, err error) {
	if name == "" {
		return false, fmt.Errorf("%w: vhost name is empty", ErrInvalid)
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.putVhostLocked(name, meta)
}

func (s *Server) putVhostLocked(name string, meta VhostMeta) (bool, error) {
	meta.Tags = slices.Clone(meta.Tags)
	if s.Vhost(name) == nil {
		_, err := s.addVhost(name, meta)
		return err == nil, err
	}
	return false, s.apply(DeclareVhost{Name: name, Meta: meta})
}

// DeleteVhost deletes a vhost: its connections are closed with 320
// CONNECTION_FORCED, its queues and exchanges deleted, and every permission
// on it removed.
func (s *Server) DeleteVhost(name string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.deleteVhostLocked(name)
}

func (s *Server) deleteVhostLocked(name string) error {
	if s.Vhost(name) == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchVhost, name)
	}
	// The vhost's definitions leave meta.db in one transaction, before
	// memory: a crash leaves the vhost whole or gone.
	return s.apply(DeleteVhost{Name: name})
}

// dropVhost removes a deleted vhost from memory (Server.apply): its
// connections are closed, its queues and exchanges dropped, the
// permissions and parameters on it forgotten and its files removed.
func (s *Server) dropVhost(name string) error {
	s.mu.Lock()
	vh := s.vhosts[name]
	if vh == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNoSuchVhost, name)
	}
	delete(s.vhosts, name)
	var conns []*conn
	for _, c := range s.conns {
		if c.isRunning() && c.vhost == vh {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.forceClose(amqp.ConnectionForced, fmt.Sprintf("vhost '%s' is deleted", name))
	}
	vh.dropTopology()
	s.users.dropVhost(name)
	if err := s.removeVhostFiles(vh); err != nil {
		return err
	}
	s.admin.pmu.Lock()
	for k := range s.admin.params {
		if k.vhost == name {
			delete(s.admin.params, k)
		}
	}
	s.admin.pmu.Unlock()
	s.admin.chmu.Lock()
	delete(s.admin.retired, name)
	s.admin.chmu.Unlock()
	return nil
}

// dropTopology removes every queue and every exchange but the built-in ones
// from a deleted vhost's memory; their definitions are already gone from
// meta.db (DeleteVhost.writes).
func (vh *Vhost) dropTopology() {
	vh.mu.Lock()
	vh.gone = true // a declare still writing its files undoes them
	vh.mu.Unlock()
	for _, q := range vh.Queues() {
		vh.mu.Lock()
		var done metaBatch // already committed by DeleteVhost.writes
		cs, _ := vh.removeQueueAndUnlock(q, &done, false)
		notifyCancelled(cs)
	}
	vh.mu.Lock()
	defer vh.mu.Unlock()
	var done metaBatch // already committed by DeleteVhost.writes
	for _, ex := range vh.exchanges {
		if ex.name != "" && !strings.HasPrefix(ex.name, "amq.") && vh.exchanges[ex.name] == ex {
			vh.removeExchangeLocked(ex, &done)
		}
	}
}

// removeVhostFiles stops a deleted vhost's message stores and removes its
// files.
func (s *Server) removeVhostFiles(vh *Vhost) error {
	// The transient store lives inside the vhost's directory, removed below.
	if tr := vh.transient; tr != nil {
		tr.stop()
		if err := tr.store.Close(); err != nil {
			vh.log.Error("closing the transient store of a deleted vhost", "err", err)
		}
	}
	if st := vh.storage; st != nil {
		st.stop()
		if err := st.store.Close(); err != nil {
			vh.log.Error("closing the message store of a deleted vhost", "err", err)
		}
		if err := os.RemoveAll(st.dir); err != nil {
			return fmt.Errorf("server: removing the files of vhost %q: %w", vh.name, err)
		}
	}
	return nil
}

// LookupQueue returns the named queue or nil.
func (vh *Vhost) LookupQueue(name string) *Queue { return vh.queue(name) }

// LookupExchange returns the named exchange ("" is the default) or nil.
func (vh *Vhost) LookupExchange(name string) *Exchange { return vh.exchange(name) }

// Exchanges returns the vhost's exchanges sorted by name.
func (vh *Vhost) Exchanges() []*Exchange {
	vh.mu.RLock()
	out := make([]*Exchange, 0, len(vh.exchanges))
	for _, ex := range vh.exchanges {
		out = append(out, ex)
	}
	vh.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// QueueStatus is a queue snapshot with everything the management API lists.
type QueueStatus struct {
	QueueInfo
	Type                    string // "classic", or the declared x-queue-type
	Policy, OperatorPolicy  string
	EffectivePolicy         map[string]any
	ExclusiveConsumerTag    string
	SingleActiveConsumerTag string
	// Owner is the name of the connection owning an exclusive queue.
	Owner string
	// IdleSince is when the queue was last used while it has no consumers;
	// zero while it has consumers.
	IdleSince time.Time
	// ConsumerCapacity is the fraction of consumers able to take a message
	// now: 1 when the queue has consumers and nothing waits, 0 without
	// consumers, else the share of consumers with prefetch credit left. It is
	// an instantaneous stand-in for RabbitMQ's time-averaged figure.
	ConsumerCapacity float64
}

// Status returns a snapshot of the queue for the management API.
func (q *Queue) Status() QueueStatus {
	st := QueueStatus{QueueInfo: q.Info(), Type: "classic"}
	if t, ok := q.args["x-queue-type"].(string); ok && t != "" {
		st.Type = t
	}
	q.mu.Lock()
	if q.exclusiveConsumer != nil {
		st.ExclusiveConsumerTag = q.exclusiveConsumer.tag
	}
	if q.qa.singleActive && len(q.consumers) > 0 {
		st.SingleActiveConsumerTag = q.consumers[0].tag
	}
	if len(q.consumers) == 0 {
		st.IdleSince = q.lastUsed
	}
	st.ConsumerCapacity = q.consumerCapacityLocked()
	q.mu.Unlock()
	if q.owner != nil {
		st.Owner = q.owner.name
	}
	st.Policy, st.OperatorPolicy, st.EffectivePolicy = q.vhost.PolicyNames(false, q.name)
	return st
}

func (q *Queue) consumerCapacityLocked() float64 {
	switch {
	case len(q.consumers) == 0:
		return 0
	case q.lengthLocked() == 0:
		return 1
	}
	free := 0
	for _, c := range q.consumers {
		if c.noAck || c.prefetch == 0 || c.unacked < int(c.prefetch) {
			free++
		}
	}
	return float64(free) / float64(len(q.consumers))
}

// QueueSpec is a queue to declare through the management API.
type QueueSpec struct {
	Name       string
	Durable    bool
	AutoDelete bool
	Arguments  amqp.Table
}

// DeclareQueue declares a queue as queue.declare does (the same validation
// and equivalence checks) and reports whether it was created. AMQP failures
// are returned as *amqp.Error.
func (s *Server) DeclareQueue(vhost string, q QueueSpec) (created bool, err error) {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return false, err
	}
	if q.Name == "" {
		return false, fmt.Errorf("%w: queue name is empty", ErrInvalid)
	}
	vh.streams.bind(s) // a stream declared here is opened with this server
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return vh.declareQueueAdmin(q)
}

func (vh *Vhost) declareQueueAdmin(q QueueSpec) (bool, error) {
	created := vh.queue(q.Name) == nil
	_, aerr := vh.declareQueue(nil, &amqp.QueueDeclare{
		Queue: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: q.Arguments,
	})
	if aerr != nil {
		return false, aerr
	}
	return created, nil
}

func (s *Server) lookupVhost(name string) (*Vhost, error) {
	vh := s.Vhost(name)
	if vh == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchVhost, name)
	}
	return vh, nil
}

func (s *Server) lookupQueue(vhost, name string) (*Vhost, *Queue, error) {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return nil, nil, err
	}
	q := vh.queue(name)
	if q == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, describeQueue(name, vhost))
	}
	return vh, q, nil
}

// DeleteQueue deletes a queue as queue.delete does, with if-unused and
// if-empty; a missing queue is ErrNotFound.
func (s *Server) DeleteQueue(vhost, name string, ifUnused, ifEmpty bool) error {
	vh, _, err := s.lookupQueue(vhost, name)
	if err != nil {
		return err
	}
	if _, aerr := vh.deleteQueue(nil, name, ifUnused, ifEmpty); aerr != nil {
		return aerr
	}
	return nil
}

// PurgeQueue drops a queue's ready messages and returns how many there were.
func (s *Server) PurgeQueue(vhost, name string) (int, error) {
	vh, _, err := s.lookupQueue(vhost, name)
	if err != nil {
		return 0, err
	}
	q, aerr := vh.lookupQueue(nil, name, methodQueuePurge)
	if aerr != nil {
		return 0, aerr
	}
	if aerr := checkPurgeable(q, methodQueuePurge); aerr != nil {
		return 0, aerr
	}
	return q.purge(), nil
}

// GetMode says what happens to messages fetched with GetMessages.
type GetMode int

// Get modes, as the management API's ackmode values.
const (
	GetAckRequeue    GetMode = iota // ack_requeue_true: returned to the queue, marked redelivered
	GetAck                          // ack_requeue_false: acknowledged, gone
	GetRejectRequeue                // reject_requeue_true: rejected with requeue
	GetReject                       // reject_requeue_false: rejected, dead-lettered if configured
)

// GotMessage is a message fetched with GetMessages.
type GotMessage struct {
	Exchange, RoutingKey string
	Redelivered          bool
	// MessageCount is the number of ready messages left after this one.
	MessageCount int
	Properties   amqp.Properties
	Body         []byte
}

// maxGetCount bounds one GetMessages call.
const maxGetCount = 10000

// GetMessages fetches up to count messages from a queue, as basic.get would,
// and then settles them all according to mode.
func (s *Server) GetMessages(vhost, name string, count int, mode GetMode) ([]GotMessage, error) {
	vh, _, err := s.lookupQueue(vhost, name)
	if err != nil {
		return nil, err
	}
	q, aerr := vh.lookupQueue(nil, name, methodBasicGet)
	if aerr != nil {
		return nil, aerr
	}
	count = min(max(count, 0), maxGetCount)
	now := nowMillis()
	var ds []delivery
	var out []GotMessage
	var raw [][]byte
	var stats MessageCounters
	_, aerr = q.typ.get(q, count, false, func(g gotMessage) {
		if g.m.redelivered {
			stats.Redeliver++
		}
		ds = append(ds, delivery{q: q, m: g.m, at: now})
		raw = append(raw, g.props)
		out = append(out, GotMessage{
			Exchange: g.m.msg.Exchange, RoutingKey: g.m.msg.RoutingKey, Redelivered: g.m.redelivered,
			MessageCount: g.remaining, Body: g.m.msg.Body,
		})
	})
	if aerr != nil {
		return nil, aerr
	}
	if len(ds) > 0 {
		switch mode {
		case GetAckRequeue, GetRejectRequeue:
			q.requeue(ds)
		case GetAck:
			q.settle(ds, false)
			stats.Ack = uint64(len(ds))
		default:
			q.settle(ds, true)
		}
	}
	stats.Get = uint64(len(ds))
	if len(ds) < count {
		stats.GetEmpty = 1
	}
	s.admin.account(vhost, stats)
	for i := range out {
		if err := out[i].Properties.Decode(raw[i]); err != nil {
			return nil, fmt.Errorf("server: properties of a message in %s: %w", describeQueue(name, vhost), err)
		}
	}
	return out, nil
}

// ExchangeInfo is a snapshot of an exchange.
type ExchangeInfo struct {
	Name, Vhost, Type             string
	Durable, AutoDelete, Internal bool
	Arguments                     amqp.Table
	PublishIn, PublishOut         uint64
	Policy                        string
	EffectivePolicy               map[string]any
}

// Info returns a snapshot of the exchange.
func (e *Exchange) Info() ExchangeInfo {
	info := ExchangeInfo{
		Name: e.name, Vhost: e.vhost.name, Type: e.kind, Durable: e.durable, AutoDelete: e.autoDelete,
		Internal: e.internal, Arguments: e.args,
		PublishIn: e.stats.publishIn.value(), PublishOut: e.stats.publishOut.value(),
	}
	info.Policy, _, info.EffectivePolicy = e.vhost.PolicyNames(true, e.name)
	return info
}

// ExchangeSpec is an exchange to declare through the management API.
type ExchangeSpec struct {
	Name, Type                    string
	Durable, AutoDelete, Internal bool
	Arguments                     amqp.Table
}

// DeclareExchange declares an exchange as exchange.declare does and reports
// whether it was created. AMQP failures are returned as *amqp.Error.
func (s *Server) DeclareExchange(vhost string, x ExchangeSpec) (created bool, err error) {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return false, err
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return vh.declareExchangeAdmin(x)
}

func (vh *Vhost) declareExchangeAdmin(x ExchangeSpec) (bool, error) {
	created := vh.exchange(x.Name) == nil
	aerr := vh.declareExchange(&amqp.ExchangeDeclare{
		Exchange: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete,
		Internal: x.Internal, Arguments: x.Arguments,
	})
	if aerr != nil {
		return false, aerr
	}
	return created, nil
}

// DeleteExchange deletes an exchange as exchange.delete does; a missing
// exchange is ErrNotFound.
func (s *Server) DeleteExchange(vhost, name string, ifUnused bool) error {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return err
	}
	if name != "" && vh.exchange(name) == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, describeExchange(name, vhost))
	}
	if aerr := vh.deleteExchange(name, ifUnused); aerr != nil {
		return aerr
	}
	return nil
}

// Publishing is a message published through the management API.
type Publishing struct {
	Exchange, RoutingKey string
	Properties           amqp.Properties
	Body                 []byte
}

// Publish routes a message as a mandatory basic.publish would and reports
// whether it reached a queue. AMQP failures are returned as *amqp.Error.
func (s *Server) Publish(vhost string, p Publishing) (routed bool, err error) {
	vh, err := s.lookupVhost(vhost)
	if err != nil {
		return false, err
	}
	ex := vh.exchange(p.Exchange)
	if ex == nil {
		return false, amqp.NewError(amqp.NotFound, methodBasicPublish, "no %s", describeExchange(p.Exchange, vhost))
	}
	if ex.internal {
		return false, amqp.NewError(amqp.AccessRefused, methodBasicPublish, "cannot publish to internal %s", describeExchange(p.Exchange, vhost))
	}
	m, aerr := newAdminMessage(p)
	if aerr != nil {
		return false, aerr
	}
	stats := MessageCounters{Publish: 1}
	defer func() { s.admin.account(vhost, stats) }()
	res := vh.publish(&publishing{r: newRouter(), ex: ex, m: m, ttl: m.ttl, srv: s})
	if res.duplicate {
		return false, nil
	}
	routed = res.routed
	if routed {
		ex.stats.publishOut.inc()
	} else {
		stats.ReturnUnroutable = 1
	}
	return routed, nil
}

// newAdminMessage builds a message from an API publish, applying what
// prepareMessage applies to AMQP publishes: the expiration and CC/BCC.
func newAdminMessage(p Publishing) (*Message, *amqp.Error) {
	props := p.Properties
	m := &Message{Exchange: p.Exchange, RoutingKey: p.RoutingKey, Body: p.Body, ttl: -1}
	if props.Flags&amqp.FlagExpiration != 0 {
		ttl, perr := parseExpiration(props.Expiration)
		if perr != "" {
			return nil, amqp.NewError(amqp.PreconditionFailed, methodBasicPublish, "invalid expiration '%s': %s", props.Expiration, perr)
		}
		m.ttl = ttl
	}
	if cc, ok := props.Headers["CC"].([]any); ok {
		m.ccKeys = appendKeys(m.ccKeys, cc)
	}
	if bcc, ok := props.Headers["BCC"].([]any); ok {
		m.ccKeys = appendKeys(m.ccKeys, bcc)
		props.Headers = maps.Clone(props.Headers)
		delete(props.Headers, "BCC")
	}
	m.RawProps = props.AppendTo(nil)
	m.props = &props
	return m, nil
}

// BindingInfo is a binding from an exchange to a queue or exchange.
type BindingInfo struct {
	Vhost, Source, Destination string
	// DestinationType is "queue" or "exchange".
	DestinationType string
	RoutingKey      string
	Arguments       amqp.Table
}

// Destination types of a binding.
const (
	DestQueue    = "queue"
	DestExchange = "exchange"
)

// Bindings returns the vhost's bindings, with the implicit binding of the
// default exchange to every queue, sorted by source, destination type,
// destination and routing key.
func (vh *Vhost) Bindings() []BindingInfo {
	var out []BindingInfo
	for _, q := range vh.Queues() {
		out = append(out, BindingInfo{Vhost: vh.name, Destination: q.name, DestinationType: DestQueue, RoutingKey: q.name})
	}
	for _, ex := range vh.Exchanges() {
		if ex.name != "" {
			out = append(out, ex.SourceBindings()...)
		}
	}
	sortBindings(out)
	return out
}

// SourceBindings returns the bindings from this exchange.
func (e *Exchange) SourceBindings() []BindingInfo {
	if e.name == "" {
		var out []BindingInfo
		for _, q := range e.vhost.Queues() {
			out = append(out, BindingInfo{Vhost: e.vhost.name, Destination: q.name, DestinationType: DestQueue, RoutingKey: q.name})
		}
		return out
	}
	e.mu.RLock()
	bs := e.bindings.Bindings()
	e.mu.RUnlock()
	out := make([]BindingInfo, 0, len(bs))
	for _, b := range bs {
		bi := BindingInfo{Vhost: e.vhost.name, Source: e.name, Destination: b.Dest.destName(), RoutingKey: b.Key, Arguments: b.Args}
		bi.DestinationType = DestQueue
		if _, ok := b.Dest.(*Exchange); ok {
			bi.DestinationType = DestExchange
		}
		out = append(out, bi)
	}
	sortBindings(out)
	return out
}

// DestinationBindings returns the bindings to this exchange.
func (e *Exchange) DestinationBindings() []BindingInfo {
	e.vhost.mu.RLock()
	keys := slices.Collect(maps.Keys(e.incoming))
	e.vhost.mu.RUnlock()
	return bindingsFromKeys(e.vhost.name, e.name, DestExchange, keys)
}

// Bindings returns the bindings to this queue, the default exchange's first.
func (q *Queue) Bindings() []BindingInfo {
	q.vhost.mu.RLock()
	keys := slices.Collect(maps.Keys(q.bindings))
	q.vhost.mu.RUnlock()
	out := bindingsFromKeys(q.vhost.name, q.name, DestQueue, keys)
	return append([]BindingInfo{{Vhost: q.vhost.name, Destination: q.name, DestinationType: DestQueue, RoutingKey: q.name}}, out...)
}

func bindingsFromKeys(vhost, dest, destType string, keys []bindingKey) []BindingInfo {
	out := make([]BindingInfo, 0, len(keys))
	for _, k := range keys {
		bi := BindingInfo{Vhost: vhost, Source: k.source.name, Destination: dest, DestinationType: destType, RoutingKey: k.key}
		if k.args != "" {
			// canonicalArgs is a length-prefixed encoded table.
			if t, err := amqp.DecodeTable([]byte(k.args)); err == nil {
				bi.Arguments = t
			}
		}
		out = append(out, bi)
	}
	sortBindings(out)
	return out
}

func sortBindings(bs []BindingInfo) {
	sort.SliceStable(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		switch {
		case a.Source != b.Source:
			return a.Source < b.Source
		case a.DestinationType != b.DestinationType:
			return a.DestinationType < b.DestinationType
		case a.Destination != b.Destination:
			return a.Destination < b.Destination
		case a.RoutingKey != b.RoutingKey:
			return a.RoutingKey < b.RoutingKey
		}
		return canonicalArgs(a.Arguments) < canonicalArgs(b.Arguments)
	})
}

// Bind adds a binding as queue.bind or exchange.bind does. AMQP failures are
// returned as *amqp.Error.
func (s *Server) Bind(b BindingInfo) error {
	vh, err := s.lookupVhost(b.Vhost)
	if err != nil {
		return err
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return vh.bindAdmin(b)
}

func (vh *Vhost) bindAdmin(b BindingInfo) error {
	var aerr *amqp.Error
	switch b.DestinationType {
	case DestQueue:
		aerr = vh.bindQueue(nil, &amqp.QueueBind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: b.Arguments})
	case DestExchange:
		aerr = vh.bindExchange(b.Destination, b.Source, b.RoutingKey, b.Arguments, false)
	default:
		return fmt.Errorf("%w: destination type %q", ErrInvalid, b.DestinationType)
	}
	if aerr != nil {
		return aerr
	}
	return nil
}

// Unbind removes a binding; one that does not exist is ErrNotFound.
func (s *Server) Unbind(b BindingInfo) error {
	vh, err := s.lookupVhost(b.Vhost)
	if err != nil {
		return err
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	src := vh.exchange(b.Source)
	if src == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, describeExchange(b.Source, b.Vhost))
	}
	want := canonicalArgs(b.Arguments)
	found := false
	for _, have := range src.SourceBindings() {
		if have.Destination == b.Destination && have.DestinationType == b.DestinationType &&
			have.RoutingKey == b.RoutingKey && canonicalArgs(have.Arguments) == want {
			found = true
			break
		}
	}
	if !found {
		return fmt.Errorf("%w: binding from %s", ErrNotFound, describeExchange(b.Source, b.Vhost))
	}
	var aerr *amqp.Error
	if b.DestinationType == DestQueue {
		aerr = vh.unbindQueue(nil, &amqp.QueueUnbind{Queue: b.Destination, Exchange: b.Source, RoutingKey: b.RoutingKey, Arguments: b.Arguments})
	} else {
		aerr = vh.bindExchange(b.Destination, b.Source, b.RoutingKey, b.Arguments, true)
	}
	if aerr != nil {
		return aerr
	}
	return nil
}

// ConnDetail is a connection snapshot with its channel count and traffic.
type ConnDetail struct {
	ConnInfo
	RecvCnt     uint64
	SendPending int // bytes waiting in the connection's write buffer
}

// ConnectionDetails returns every connection past its handshake, by id.
func (s *Server) ConnectionDetails() []ConnDetail {
	s.mu.RLock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		if c.isRunning() {
			conns = append(conns, c)
		}
	}
	s.mu.RUnlock()
	perConn := make(map[*conn]int)
	for _, ch := range s.admin.liveChannels() {
		perConn[ch.conn]++
	}
	out := make([]ConnDetail, 0, len(conns))
	for _, c := range conns {
		d := ConnDetail{ConnInfo: c.Info(), RecvCnt: c.stats.recvCnt.value()}
		d.Channels = perConn[c]
		c.out.mu.Lock()
		d.SendPending = len(c.out.buf)
		c.out.mu.Unlock()
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ChannelInfo is a snapshot of an open channel.
type ChannelInfo struct {
	ConnID                 uint64
	ConnName               string
	Number                 uint16
	User, Vhost, Peer      string
	Confirm, Transactional bool
	Prefetch               uint16 // basic.qos global=false
	GlobalPrefetch         uint32 // basic.qos global=true
	Consumers, Unacked     int
	Unconfirmed            uint64
	Stats                  MessageCounters
}

// Channels returns every open channel, by connection id and channel number.
func (s *Server) Channels() []ChannelInfo {
	chs := s.admin.liveChannels()
	out := make([]ChannelInfo, 0, len(chs))
	for _, ch := range chs {
		out = append(out, ch.info())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ConnID != out[j].ConnID {
			return out[i].ConnID < out[j].ConnID
		}
		return out[i].Number < out[j].Number
	})
	return out
}

func (ch *channel) info() ChannelInfo {
	c := ch.conn
	st := &ch.stats
	info := ChannelInfo{
		ConnID: c.id, ConnName: c.name, Number: ch.id, User: c.user.name, Vhost: c.vhost.name,
		Peer: c.nc.RemoteAddr().String(), Confirm: st.confirmMode.Load(), Transactional: st.txMode.Load(),
		Prefetch: uint16(st.prefetch.Load()), GlobalPrefetch: ch.globalPrefetch.Load(), Stats: st.counters(),
	}
	ch.cmu.Lock()
	info.Consumers = len(ch.consumers)
	ch.cmu.Unlock()
	ch.umu.Lock()
	info.Unacked = ch.unacked.len()
	ch.umu.Unlock()
	info.Stats.Confirm, info.Unconfirmed = ch.confirmState()
	return info
}

// confirmState returns the publisher confirms the channel has sent and the
// publishes still waiting for theirs.
func (ch *channel) confirmState() (acked, pending uint64) {
	t := &ch.confirms
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acked, uint64(len(t.entries) - t.head)
}

// counters returns the channel's message counters, confirms included.
func (ch *channel) counters() MessageCounters {
	m := ch.stats.counters()
	m.Confirm, _ = ch.confirmState()
	return m
}

// ConsumerInfo is a snapshot of one consumer.
type ConsumerInfo struct {
	Tag                string
	Queue, Vhost       string
	ConnID             uint64
	ConnName           string
	Channel            uint16
	User, Peer         string
	AckRequired        bool
	Exclusive, Active  bool
	Prefetch           uint16
	Priority           int64
	Arguments          amqp.Table
	Timeout            time.Duration // 0 = none
	SingleActiveWaiter bool          // waiting for its turn as single active consumer
}

// Consumers returns the queue's consumers in delivery-priority order.
func (q *Queue) Consumers() []ConsumerInfo {
	q.mu.Lock()
	cs := slices.Clone(q.consumers)
	sac := q.qa.singleActive
	timeout := q.qa.consumerTimeout
	q.mu.Unlock()
	if timeout == 0 && len(cs) > 0 {
		timeout = cs[0].ch.conn.srv.cfg.ConsumerTimeout
	}
	out := make([]ConsumerInfo, len(cs))
	for i, c := range cs {
		conn := c.ch.conn
		out[i] = ConsumerInfo{
			Tag: c.tag, Queue: q.name, Vhost: q.vhost.name, ConnID: conn.id, ConnName: conn.name,
			Channel: c.ch.id, User: conn.user.name, Peer: conn.nc.RemoteAddr().String(),
			AckRequired: !c.noAck, Exclusive: c.exclusive, Active: !sac || i == 0,
			Prefetch: c.prefetch, Priority: c.priority, Arguments: c.args, Timeout: timeout,
			SingleActiveWaiter: sac && i > 0,
		}
	}
	return out
}

// Consumers returns every consumer of every vhost, sorted by vhost, queue and tag.
func (s *Server) Consumers() []ConsumerInfo {
	var out []ConsumerInfo
	for _, vh := range s.Vhosts() {
		for _, q := range vh.Queues() {
			out = append(out, q.Consumers()...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		return a.Tag < b.Tag
	})
	return out
}

// CloseConnectionNamed closes the connection with the given name with 320
// CONNECTION_FORCED and reason; a missing connection is ErrNotFound.
func (s *Server) CloseConnectionNamed(name, reason string) error {
	for _, c := range s.Connections() {
		if c.Name == name {
			if s.CloseConnection(c.ID, reason) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: connection %q", ErrNotFound, name)
}

// Totals are the node's object and message totals.
type Totals struct {
	Connections, Channels, Consumers, Exchanges, Queues int
	Messages, Ready, Unacked                            int
}

// Totals counts the node's objects and messages.
func (s *Server) Totals() Totals {
	var t Totals
	t.Connections = len(s.Connections())
	t.Channels = len(s.admin.liveChannels())
	for _, vh := range s.Vhosts() {
		vh.mu.RLock()
		t.Exchanges += len(vh.exchanges)
		t.Queues += len(vh.queues)
		vh.mu.RUnlock()
		for _, q := range vh.Queues() {
			q.mu.Lock()
			t.Ready += q.lengthLocked()
			t.Unacked += q.unacked
			t.Consumers += len(q.consumers)
			q.mu.Unlock()
		}
	}
	t.Messages = t.Ready + t.Unacked
	return t
}

// NodeInfo describes this node's settings and resource use.
type NodeInfo struct {
	AMQPAddr        string // the listener's address
	DataDir         string
	DefaultVhost    string
	ProductVersion  string
	MemoryUsed      uint64
	MemoryLimit     uint64 // the memory high watermark in bytes; 0 = off
	MemoryAlarm     bool
	DiskFreeLimit   uint64 // bytes; 0 = off
	DiskAlarm       bool
	FrameMax        uint32
	ChannelMax      uint16
	Heartbeat       time.Duration
	ConsumerTimeout time.Duration
}

// Node returns this node's settings and resource use.
func (s *Server) Node() NodeInfo {
	n := NodeInfo{
		DataDir: s.cfg.DataDir, DefaultVhost: s.cfg.DefaultVhost, ProductVersion: s.cfg.ProductVersion,
		MemoryUsed: MemoryUsed(), MemoryLimit: s.watermark.Load(), MemoryAlarm: s.MemoryAlarm(),
		DiskFreeLimit: s.diskLimit.Load(), DiskAlarm: s.DiskAlarm(),
		FrameMax: s.cfg.FrameMax, ChannelMax: s.cfg.ChannelMax, Heartbeat: s.cfg.Heartbeat,
		ConsumerTimeout: s.cfg.ConsumerTimeout,
	}
	if s.ln != nil {
		n.AMQPAddr = s.ln.Addr().String()
	}
	return n
}

// SplitHostPort splits a "host:port" address into host and numeric port
// (0 when there is none).
func SplitHostPort(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(port)
	return host, n
}
