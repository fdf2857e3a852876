package main

import (
	"log/slog"
	"slices"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/federation"
	"github.com/warrenmq/warren/server"
)

// startFederation runs the federation links the policies call for and
// follows changes to upstreams (OnParameterChange) and to exchanges,
// queues, bindings and policies (OnDefinitionChange); the returned Manager
// is also the management API's view of the links. Close it before the
// server.
func startFederation(srv *server.Server, logger *slog.Logger) *federation.Manager {
	m := federation.New(federationConfig(srv, logger))
	srv.OnParameterChange(func(component string) {
		if component == federation.ComponentUpstream || component == federation.ComponentUpstreamSet {
			m.Changed()
		}
	})
	srv.OnDefinitionChange(m.Changed)
	srv.OnMembershipChange(m.Changed) // a lost node's links move
	m.Start()
	return m
}

// federationConfig is the federation runner's view of srv.
func federationConfig(srv *server.Server, logger *slog.Logger) federation.Config {
	return federation.Config{
		Params:      func() []federation.Param { return federationParams(srv) },
		Targets:     func() []federation.Target { return federationTargets(srv) },
		Bindings:    func(vhost, exchange string) []federation.Binding { return exchangeBindings(srv, vhost, exchange) },
		QueueActive: func(vhost, queue string) bool { return queueActive(srv, vhost, queue) },
		Local: func() (federation.Local, error) {
			l, err := localBroker(srv)
			return federation.Local{Addr: l.Addr, User: l.User, Password: l.Password}, err
		},
		Here: func(key, vhost, queue string) bool { return runsHere(srv, key, vhost, queue) },
		Node: srv.NodeName(), ClusterName: srv.ClusterName, Logger: logger,
	}
}

func federationParams(srv *server.Server) []federation.Param {
	var out []federation.Param
	for _, p := range srv.Parameters() {
		if p.Component == federation.ComponentUpstream || p.Component == federation.ComponentUpstreamSet {
			out = append(out, federation.Param{Component: p.Component, Vhost: p.Vhost, Name: p.Name, Value: p.Value})
		}
	}
	return out
}

// federated reports whether a policy definition federates its object.
func federated(def map[string]any) bool {
	for _, k := range []string{"federation-upstream", "federation-upstream-set", "federation-upstream-pattern"} {
		if _, ok := def[k]; ok {
			return true
		}
	}
	return false
}

// federationTargets are the exchanges and queues a policy federates; the
// rest are skipped on the policy alone, so a scan of many objects stays
// cheap.
func federationTargets(srv *server.Server) []federation.Target {
	var out []federation.Target
	for _, vh := range srv.Vhosts() {
		for _, x := range vh.Exchanges() {
			info := x.Info()
			if federated(info.EffectivePolicy) {
				out = append(out, federation.Target{Vhost: vh.Name(), Name: info.Name, Type: info.Type,
					Durable: info.Durable, AutoDelete: info.AutoDelete, Internal: info.Internal,
					Args: clientTable(info.Arguments), Policy: info.EffectivePolicy})
			}
		}
		for _, q := range vh.Queues() {
			def := q.EffectivePolicy()
			if !federated(def) {
				continue
			}
			info := q.Info()
			if info.Exclusive {
				continue // RabbitMQ federates no exclusive queue
			}
			out = append(out, federation.Target{Vhost: vh.Name(), Name: info.Name, Queue: true,
				Durable: info.Durable, AutoDelete: info.AutoDelete, Args: clientTable(info.Arguments), Policy: def})
		}
	}
	return out
}

func exchangeBindings(srv *server.Server, vhost, exchange string) []federation.Binding {
	vh := srv.Vhost(vhost)
	if vh == nil {
		return nil
	}
	x := vh.LookupExchange(exchange)
	if x == nil {
		return nil
	}
	var out []federation.Binding
	for _, b := range x.SourceBindings() {
		out = append(out, federation.Binding{Key: b.RoutingKey, Args: clientTable(b.Arguments)})
	}
	return out
}

// queueActive is what makes RabbitMQ's queue link run: the queue is empty
// and has an active consumer of priority 0 or more (a federation link's
// own consumers, at -1, do not count).
func queueActive(srv *server.Server, vhost, queue string) bool {
	vh := srv.Vhost(vhost)
	if vh == nil {
		return false
	}
	q := vh.LookupQueue(queue)
	if q == nil || q.Info().Ready > 0 {
		return false
	}
	return slices.ContainsFunc(q.Consumers(), func(c server.ConsumerInfo) bool { return c.Active && c.Priority >= 0 })
}

// clientTable converts the broker's field table to the plain maps the
// federation package takes.
func clientTable(t amqp.Table) map[string]any {
	if t == nil {
		return nil
	}
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = clientValue(v)
	}
	return out
}

func clientValue(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		return clientTable(x)
	case map[string]any:
		return clientTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clientValue(e)
		}
		return out
	case amqp.Decimal:
		// The federation package has no decimal type; a decimal argument
		// goes upstream as its value.
		f := float64(x.Value)
		for range x.Scale {
			f /= 10
		}
		return f
	}
	return v
}
