package server

import (
	"fmt"
	"sort"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API (see admin.go): exchange snapshots, declare and
// delete.

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
	info.Policy, _, info.EffectivePolicy = e.vhost.policyNames(targetExchange, e.name)
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
