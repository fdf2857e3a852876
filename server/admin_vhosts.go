package server

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API (see admin.go): vhost snapshots, creation and
// deletion.

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

// PutVhost creates a vhost or updates its metadata, and reports whether it
// was created.
func (s *Server) PutVhost(name string, meta VhostMeta) (created bool, err error) {
	if name == "" {
		return false, fmt.Errorf("%w: vhost name is empty", ErrInvalid)
	}
	if err := checkDefaultQueueType(meta.DefaultQueueType); err != nil {
		return false, err
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
	for _, q := range vh.Queues() {
		vh.mu.Lock()
		cs, _ := vh.removeQueueAndUnlock(q)
		notifyCancelled(cs)
	}
	vh.mu.Lock()
	defer vh.mu.Unlock()
	for _, ex := range vh.exchanges {
		if ex.name != "" && !strings.HasPrefix(ex.name, "amq.") && vh.exchanges[ex.name] == ex {
			vh.removeExchangeLocked(ex)
		}
	}
}

// removeVhostFiles stops a deleted vhost's message stores and removes its
// files.
func (s *Server) removeVhostFiles(vh *Vhost) error {
	vh.delays.stop() // before the stores it fires from close
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

func (s *Server) lookupVhost(name string) (*Vhost, error) {
	vh := s.Vhost(name)
	if vh == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchVhost, name)
	}
	return vh, nil
}
