package server

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// loadDefinitions rebuilds vhosts, users, permissions, durable exchanges,
// queues and bindings from meta.db. firstBoot is true when the store holds no
// users yet (a fresh data directory).
func (s *Server) loadDefinitions() (firstBoot bool, err error) {
	if s.meta == nil {
		return true, nil
	}
	fail := func(err error) (bool, error) { return false, fmt.Errorf("%w: %v", ErrMetaUnreadable, err) }
	err = metaEach(s.meta, bucketVhosts, func(v metaVhost) error {
		vh := newVhost(v.Name, s.meta, s.log.With("vhost", v.Name))
		vh.maxQueues = s.cfg.MaxQueuesPerVhost
		if err := s.openVhostStorage(vh); err != nil {
			return err
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
	err = metaEach(s.meta, bucketPermissions, func(p metaPermission) error {
		return s.users.loadPermission(p)
	})
	if err != nil {
		return fail(err)
	}
	err = metaEach(s.meta, bucketTopicPermissions, s.users.loadTopicPermission)
	if err != nil {
		return fail(err)
	}
	err = metaEach(s.meta, bucketExchanges, func(e metaExchange) error {
		vh := s.vhosts[e.Vhost]
		if vh == nil {
			return fmt.Errorf("exchange %q in unknown vhost %q", e.Name, e.Vhost)
		}
		args, err := bytesTable(e.Arguments)
		if err != nil {
			return fmt.Errorf("exchange %q arguments: %w", e.Name, err)
		}
		ex, ok := newExchange(vh, e.Name, e.Type, true, e.AutoDelete, e.Internal, args)
		if !ok {
			return fmt.Errorf("exchange %q has unknown type %q", e.Name, e.Type)
		}
		if aerr := configureExchangeDedup(ex, vh.name); aerr != nil {
			return aerr
		}
		vh.exchanges[e.Name] = ex
		return nil
	})
	if err != nil {
		return fail(err)
	}
	var loaded []*Queue
	err = metaEach(s.meta, bucketQueues, func(mq metaQueue) error {
		q, err := s.loadQueue(mq)
		if err == nil && q.qa.stream == nil { // a stream opened its log already
			loaded = append(loaded, q)
		}
		return err
	})
	if err == nil {
		err = openQueueStorage(loaded)
	}
	if err != nil {
		return fail(err)
	}
	err = metaEach(s.meta, bucketBindings, func(b metaBinding) error {
		return s.loadBinding(b)
	})
	if err != nil {
		return fail(err)
	}
	if err := s.loadPolicies(); err != nil {
		return fail(err)
	}
	return users == 0, nil
}

// loadQueue rebuilds a durable queue from its definition; its index is
// opened afterwards, for all queues in parallel.
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
	q := newQueue(vh, mq.Name, true, false, mq.AutoDelete, args, qa, nil)
	if qa.stream != nil {
		if err := openStream(s, q); err != nil {
			return nil, fmt.Errorf("queue %q: %w", mq.Name, err)
		}
	}
	vh.queues[mq.Name] = q
	return q, nil
}

// openQueueStorage opens the indexes of recovered queues on a bounded pool
// of goroutines: after a crash each index is scanned, and queues recover in
// parallel rather than one after another.
func openQueueStorage(queues []*Queue) error {
	workers := min(len(queues), 2*runtime.GOMAXPROCS(0))
	next := make(chan *Queue)
	errs := make(chan error, len(queues))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range next {
				if err := q.openStorage(); err != nil {
					errs <- fmt.Errorf("queue %q: %w", q.name, err)
				}
			}
		}()
	}
	for _, q := range queues {
		next <- q
	}
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
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
	// Re-adding is idempotent in the matcher; the meta write is skipped
	// because the binding is already stored.
	saved := vh.meta
	vh.meta = nil
	aerr := vh.bindLocked(src, dest, b.RoutingKey, args)
	vh.meta = saved
	if aerr != nil {
		return aerr
	}
	return nil
}
