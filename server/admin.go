package server

import "sync"

// The administrative API: exported snapshots and operations the management
// package (mgmt) builds its HTTP API on. The server knows nothing of HTTP or
// JSON here: reads return value snapshots taken under short locks, so callers
// encode them with no server lock held, and every mutation goes through the
// same internal methods AMQP clients use (declareQueue, bindQueue,
// users.put, ...), so it is validated and recorded the same way.
//
// The API is split by resource: admin_users.go, admin_vhosts.go,
// admin_queues.go, admin_exchanges.go, admin_bindings.go, admin_publish.go,
// admin_channels.go and admin_node.go.
//
// Lock order of the admin*.go files: adminState.mu is taken before every
// other lock (it serialises check-then-act administrative mutations such as
// "create or update"), then vhostAdmin.applyMu, then the core order
// (Server.mu → Vhost.mu → vhostAdmin.mu; Vhost.mu → Queue.mu; users.mu).
// adminState.chmu and adminState.pmu are leaves.

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
	paramObservers     []func(component string) // OnParameterChange
	defObservers       []func()                 // OnDefinitionChange
	memberObservers    []func()                 // OnMembershipChange

	chmu     sync.Mutex // leaf: guards channels and retired
	channels map[*channel]struct{}
	// retired holds, per vhost, the message counts of channels that have
	// closed and of publishes and gets made through this API, so vhost and
	// overview totals never go backwards when a channel goes.
	retired map[string]*MessageCounters
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
	ch.conn.srv.churn.channelsOpened.Add(1)
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
	ch.conn.srv.churn.channelsClosed.Add(1)
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
