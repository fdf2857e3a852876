package server

import (
	"fmt"
	"runtime"
	"sync"
)

// loadDefinitions rebuilds vhosts, users, permissions, durable exchanges,
// queues and bindings from meta.db. firstBoot is true when the store holds no
// users yet (a fresh data directory).
//
// A record that does not decode, or disagrees with its key, means meta.db is
// damaged: start-up stops (ErrMetaUnreadable). A definition that decodes but
// cannot be set up (a vhost whose files do not open, a queue whose index is
// unreadable, a binding to a queue skipped so) is logged with its name and
// skipped, and the broker serves the rest; its record stays in meta.db.
func (s *Server) loadDefinitions() (firstBoot bool, err error) {
	if s.meta == nil {
		return true, nil
	}
	fail := func(err error) (bool, error) { return false, fmt.Errorf("%w: %v", ErrMetaUnreadable, err) }
	err = loadEach(s, bucketVhosts, func(v metaVhost) error {
		vh := newVhost(v.Name, s.log.With("vhost", v.Name))
		s.resetVhostLimits(vh)
		vh.adm.meta = v.vhostMeta()
		if err := s.openVhostStorage(vh); err != nil {
			return fmt.Errorf("vhost %q: %w", v.Name, err)
		}
		s.vhosts[v.Name] = vh
		return nil
	})
	if err != nil {
		return fail(err)
	}
	users := 0
	err = metaEach(s.meta, bucketUsers, func(u metaUser) error {
		users++
		s.users.load(u)
		return nil
	})
	if err != nil {
		return fail(err)
	}
	err = loadEach(s, bucketPermissions, s.users.loadPermission)
	if err != nil {
		return fail(err)
	}
	err = loadEach(s, bucketTopicPermissions, s.users.loadTopicPermission)
	if err != nil {
		return fail(err)
	}
	if err = loadEach(s, bucketExchanges, s.loadExchange); err != nil {
		return fail(err)
	}
	var loaded []*Queue
	err = loadEach(s, bucketQueues, func(mq metaQueue) error {
		q, err := s.loadQueue(mq)
		if err == nil && (q.homedHere() || q.replicated) {
			loaded = append(loaded, q)
		}
		return err
	})
	if err != nil {
		return fail(err)
	}
	for q, err := range openQueueStorage(s, loaded) {
		s.log.Error("definition skipped: it cannot be loaded", "vhost", q.vhost.name, "queue", q.name, "err", err)
		q.stopTimers()
		delete(q.vhost.queues, q.name)
	}
	err = loadEach(s, bucketBindings, s.loadBinding)
	if err != nil {
		return fail(err)
	}
	s.rebuildHashRings()
	if err := s.loadPolicies(); err != nil {
		return fail(err)
	}
	if err := s.loadParameters(); err != nil {
		return fail(err)
	}
	return users == 0, nil
}

// loadEach is metaEach for definitions that can be skipped: an error from fn
// is logged and loading goes on; a record that does not decode stops it.
func loadEach[T any](s *Server, bucket []byte, fn func(T) error) error {
	return metaEach(s.meta, bucket, func(t T) error {
		if err := fn(t); err != nil {
			s.log.Error("definition skipped: it cannot be loaded", "kind", string(bucket), "err", err)
		}
		return nil
	})
}

// loadExchange rebuilds a durable exchange from its definition.
func (s *Server) loadExchange(e metaExchange) error {
	vh := s.vhosts[e.Vhost]
	if vh == nil {
		return fmt.Errorf("exchange %q in unknown vhost %q", e.Name, e.Vhost)
	}
	args, err := bytesTable(e.Arguments)
	if err != nil {
		return fmt.Errorf("exchange %q arguments: %w", e.Name, err)
	}
	ex, aerr := newExchange(vh, e.Name, e.Type, true, e.AutoDelete, e.Internal, args)
	if aerr != nil {
		return fmt.Errorf("exchange %q: %w", e.Name, aerr)
	}
	if aerr := configureExchange(ex, vh.name); aerr != nil {
		return fmt.Errorf("exchange %q: %w", e.Name, aerr)
	}
	vh.exchanges[e.Name] = ex
	return nil
}

// loadQueue rebuilds a durable queue from its definition; its files (an
// index, a stream's log) are opened afterwards, for all queues in parallel.
func (s *Server) loadQueue(mq metaQueue) (*Queue, error) {
	vh := s.vhosts[mq.Vhost]
	if vh == nil {
		return nil, fmt.Errorf("queue %q in unknown vhost %q", mq.Name, mq.Vhost)
	}
	args, err := bytesTable(mq.Arguments)
	if err != nil {
		return nil, fmt.Errorf("queue %q arguments: %w", mq.Name, err)
	}
	qa, aerr := parseQueueArgs(mq.Name, vh.name, storedQueueArgs(args))
	if aerr != nil {
		return nil, aerr
	}
	qa.mirrored = mq.Placement != nil && qa.quorum == nil && qa.stream == nil
	q := newQueue(vh, mq.Name, true, false, mq.AutoDelete, args, qa, nil)
	q.instance = mq.Instance
	setQuorumPlacement(q, mq.Placement)
	if h, ok := q.quorumHandle(); ok && s.cluster != nil && mq.Placement != nil &&
		mq.Placement.Leader == s.cfg.NodeName && len(mq.Placement.Replicas) > 1 {
		h.starting = true // not yet installed: no lock needed
	}
	if s.cluster != nil && mq.Node != "" && mq.Node != s.cfg.NodeName && !q.replicated {
		// Homed on another node: no files here (queueHome).
		s.makeRemote(q, mq.Node)
	}
	vh.queues[mq.Name] = q
	return q, nil
}

// openQueueStorage opens the files of recovered queues (queueHandle.openFiles)
// on a bounded pool of goroutines: after a crash each index or log is
// scanned, and queues recover in parallel rather than one after another. It
// returns the queues whose files did not open, with the error.
func openQueueStorage(srv *Server, queues []*Queue) map[*Queue]error {
	workers := min(len(queues), 2*runtime.GOMAXPROCS(0))
	next := make(chan *Queue)
	var mu sync.Mutex
	failed := make(map[*Queue]error)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range next {
				if err := q.h.openFiles(srv); err != nil {
					mu.Lock()
					failed[q] = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, q := range queues {
		next <- q
	}
	close(next)
	wg.Wait()
	return failed
}

func (s *Server) loadBinding(b metaBinding) error {
	vh := s.vhosts[b.Vhost]
	if vh == nil {
		return fmt.Errorf("binding in unknown vhost %q", b.Vhost)
	}
	src := vh.exchanges[b.Source]
	if src == nil {
		return fmt.Errorf("binding from unknown exchange %q", b.Source)
	}
	var dest destination
	if b.DestinationType == "exchange" {
		if d := vh.exchanges[b.Destination]; d != nil {
			dest = d
		}
	} else if q := vh.queues[b.Destination]; q != nil {
		dest = q
	}
	if dest == nil {
		return fmt.Errorf("binding to unknown %s %q", b.DestinationType, b.Destination)
	}
	args, err := bytesTable(b.Arguments)
	if err != nil {
		return fmt.Errorf("binding arguments: %w", err)
	}
	if aerr := validateBinding(src, dest, b.RoutingKey, args); aerr != nil {
		return aerr
	}
	vh.bindLocked(src, dest, b.RoutingKey, args)
	return nil
}
