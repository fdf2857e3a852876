package server

import (
	"fmt"
	"math"
	"math/big"
	"sync/atomic"
)

// Vhost limits are RabbitMQ's: the runtime parameter vhost-limits/limits of
// the vhost, {"max-connections": N, "max-queues": N}. A limit the parameter
// sets replaces Config.MaxConnectionsPerVhost or MaxQueuesPerVhost for that
// vhost; a negative one means no limit and 0 allows nothing, as in
// RabbitMQ. The effective limits live in atomics on the vhost so the
// connection.open and queue.declare checks take no extra lock.

// noLimit is an effective limit that limits nothing.
const noLimit = -1

// vhostLimits are a vhost's effective limits.
type vhostLimits struct {
	maxConns, maxQueues atomic.Int64
}

// configLimit is a Config limit as an effective one: 0 is no limit.
func configLimit(n int) int64 {
	if n <= 0 {
		return noLimit
	}
	return int64(n)
}

// limitValue reads an integer limit from a parameter value (the API's
// int64, meta.db's json.Number). A negative limit is noLimit; one beyond
// int64 is as good as none too.
func limitValue(v any) (int64, bool) {
	n, ok := erlTermOf(v).(termInt)
	if !ok {
		return 0, false
	}
	i, ok := new(big.Int).SetString(string(n), 10)
	switch {
	case !ok:
		return 0, false
	case i.Sign() < 0:
		return noLimit, true
	case !i.IsInt64():
		return math.MaxInt64, true
	}
	return i.Int64(), true
}

// resetVhostLimits sets a new vhost's limits to the Config defaults.
func (s *Server) resetVhostLimits(vh *Vhost) {
	vh.limits.maxConns.Store(configLimit(s.cfg.MaxConnectionsPerVhost))
	vh.limits.maxQueues.Store(configLimit(s.cfg.MaxQueuesPerVhost))
}

// enforceVhostLimits makes a vhost's limits those of its vhost-limits
// value (nil when the parameter is cleared), falling back to the Config.
func (s *Server) enforceVhostLimits(vhost string, value any) {
	vh := s.Vhost(vhost)
	if vh == nil {
		return
	}
	s.resetVhostLimits(vh)
	m, _ := value.(map[string]any)
	if n, ok := limitValue(m["max-connections"]); ok {
		vh.limits.maxConns.Store(n)
	}
	if n, ok := limitValue(m["max-queues"]); ok {
		vh.limits.maxQueues.Store(n)
	}
}

// VhostLimits returns the limits set on a vhost ({} when none), as
// /api/vhost-limits/{vhost} shows them.
func (s *Server) VhostLimits(vhost string) (map[string]any, error) {
	if s.Vhost(vhost) == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchVhost, vhost)
	}
	p, err := s.GetParameter(vhostLimitsComponent, vhost, vhostLimitsName)
	if err != nil {
		return map[string]any{}, nil
	}
	m, _ := p.Value.(map[string]any)
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

// SetVhostLimit sets one limit of a vhost (max-connections, max-queues),
// validated as RabbitMQ's rabbit_vhost_limit:update_limit does.
func (s *Server) SetVhostLimit(vhost, name string, value any) error {
	return s.updateVhostLimits(vhost, func(m map[string]any) { m[name] = value })
}

// ClearVhostLimit removes one limit of a vhost; a vhost left without
// limits loses its vhost-limits parameter (RabbitMQ keeps it, empty).
func (s *Server) ClearVhostLimit(vhost, name string) error {
	return s.updateVhostLimits(vhost, func(m map[string]any) { delete(m, name) })
}

func (s *Server) updateVhostLimits(vhost string, change func(map[string]any)) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	m, err := s.VhostLimits(vhost)
	if err != nil {
		return err
	}
	change(m)
	p := Parameter{Component: vhostLimitsComponent, Vhost: vhost, Name: vhostLimitsName, Value: m}
	if len(m) == 0 {
		if _, err := s.GetParameter(p.Component, vhost, p.Name); err != nil {
			return nil
		}
		return s.clearParameter(paramKey{p.Component, vhost, p.Name})
	}
	if err := s.validateParameter(p, ""); err != nil {
		return err
	}
	return s.putParameter(p)
}
