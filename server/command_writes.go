package server

import (
	"encoding/json"
	"fmt"
)

// The meta.db records of each command (Command.writes). A record is the
// same whether the command was made here or decoded from another node.

func (c DeclareVhost) writes(b *metaBatch) error {
	return b.put(bucketVhosts, metaKey(c.Name), newMetaVhost(c.Name, c.Meta))
}

func (c DeleteVhost) writes(b *metaBatch) error {
	b.delete(bucketVhosts, metaKey(c.Name))
	prefix := metaKeyPrefix(c.Name)
	for _, bucket := range [][]byte{bucketExchanges, bucketQueues, bucketBindings, bucketPolicies, bucketParameters} {
		b.deletePrefix(bucket, prefix)
	}
	// Permission keys are (user, vhost); topic permission keys (user, vhost, exchange).
	onVhost := func(k []byte) bool {
		parts, err := splitMetaKey(k)
		return err == nil && len(parts) > 1 && parts[1] == c.Name
	}
	b.deleteMatching(bucketPermissions, nil, onVhost)
	b.deleteMatching(bucketTopicPermissions, nil, onVhost)
	return nil
}

func (c PutUser) writes(b *metaBatch) error {
	return b.put(bucketUsers, metaKey(c.Name), metaUser{Name: c.Name, PasswordHash: c.PasswordHash, Tags: c.Tags, LoopbackOnly: c.LoopbackOnly, Limits: c.Limits})
}

func (c DeleteUser) writes(b *metaBatch) error {
	b.delete(bucketUsers, metaKey(c.Name))
	b.deletePrefix(bucketPermissions, metaKeyPrefix(c.Name))
	b.deletePrefix(bucketTopicPermissions, metaKeyPrefix(c.Name))
	return nil
}

func (c SetPermission) writes(b *metaBatch) error {
	return b.put(bucketPermissions, metaKey(c.User, c.Vhost), metaPermission{User: c.User, Vhost: c.Vhost, Permission: c.Permission})
}

func (c ClearPermission) writes(b *metaBatch) error {
	b.delete(bucketPermissions, metaKey(c.User, c.Vhost))
	return nil
}

func (c SetTopicPermission) writes(b *metaBatch) error {
	tp := c.TopicPermission
	return b.put(bucketTopicPermissions, metaKey(tp.User, tp.Vhost, tp.Exchange), tp)
}

func (c ClearTopicPermissions) writes(b *metaBatch) error {
	if c.Exchange != "" {
		b.delete(bucketTopicPermissions, metaKey(c.User, c.Vhost, c.Exchange))
	} else {
		b.deletePrefix(bucketTopicPermissions, metaKeyPrefix(c.User, c.Vhost))
	}
	return nil
}

func (c SetPolicy) writes(b *metaBatch) error {
	p := c.Policy
	def, err := json.Marshal(p.Definition)
	if err != nil {
		return fmt.Errorf("server: encoding policy %q: %w", p.Name, err)
	}
	mp := metaPolicy{Vhost: p.Vhost, Name: p.Name, Operator: c.Operator, Pattern: p.Pattern,
		ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: def}
	return b.put(bucketPolicies, policyMetaKey(p.Vhost, p.Name, c.Operator), mp)
}

func (c ClearPolicy) writes(b *metaBatch) error {
	b.delete(bucketPolicies, policyMetaKey(c.Vhost, c.Name, c.Operator))
	return nil
}

func (c SetParameter) writes(b *metaBatch) error {
	p := c.Parameter
	raw, err := json.Marshal(p.Value)
	if err != nil {
		return fmt.Errorf("%w: parameter %q of %q: %v", ErrInvalid, p.Name, p.Component, err)
	}
	k := paramKey{p.Component, p.Vhost, p.Name}
	return b.put(bucketParameters, k.metaKey(), metaParameter{Vhost: p.Vhost, Component: p.Component, Name: p.Name, Value: raw})
}

func (c ClearParameter) writes(b *metaBatch) error {
	b.delete(bucketParameters, paramKey{c.Component, c.Vhost, c.Name}.metaKey())
	return nil
}

func (c SetGlobalParameter) writes(b *metaBatch) error {
	raw, err := json.Marshal(c.Value)
	if err != nil {
		return fmt.Errorf("%w: global parameter %q: %v", ErrInvalid, c.Name, err)
	}
	return b.put(bucketGlobals, metaKey(c.Name), metaParameter{Name: c.Name, Value: raw})
}

func (c ClearGlobalParameter) writes(b *metaBatch) error {
	b.delete(bucketGlobals, metaKey(c.Name))
	return nil
}

func (c DeclareExchange) writes(b *metaBatch) error {
	if !c.Durable {
		return nil
	}
	return b.put(bucketExchanges, metaKey(c.Vhost, c.Name), metaExchange{
		Vhost: c.Vhost, Name: c.Name, Type: c.Type, AutoDelete: c.AutoDelete, Internal: c.Internal, Arguments: c.Arguments,
	})
}

func (c DeleteExchange) writes(b *metaBatch) error {
	b.delete(bucketExchanges, metaKey(c.Vhost, c.Name))
	// Bindings from it, then bindings to it.
	b.deletePrefix(bucketBindings, metaKeyPrefix(c.Vhost, c.Name))
	b.deleteMatching(bucketBindings, metaKeyPrefix(c.Vhost), bindingTo("exchange", c.Name))
	return nil
}

func (c DeclareQueue) writes(b *metaBatch) error {
	if !c.Durable || c.Exclusive {
		return nil
	}
	return b.put(bucketQueues, metaKey(c.Vhost, c.Name), metaQueue{Vhost: c.Vhost, Name: c.Name, AutoDelete: c.AutoDelete, Arguments: c.Arguments, Node: c.Node, Placement: c.Placement, Instance: c.Instance})
}

func (c DeleteQueue) writes(b *metaBatch) error {
	b.delete(bucketQueues, metaKey(c.Vhost, c.Name))
	b.deleteMatching(bucketBindings, metaKeyPrefix(c.Vhost), bindingTo("queue", c.Name))
	return nil
}

// bindingTo matches the binding keys of a vhost (after its prefix: source,
// kind, destination, routing key, arguments) whose destination is kind name.
func bindingTo(kind, name string) func([]byte) bool {
	return func(k []byte) bool {
		parts, err := splitMetaKey(k)
		return err == nil && len(parts) == 5 && parts[1] == kind && parts[2] == name
	}
}

func (c Bind) metaKey() ([]byte, error) {
	args, err := bytesTable(c.Arguments)
	if err != nil {
		return nil, fmt.Errorf("binding arguments: %w", err)
	}
	return metaKey(c.Vhost, c.Source, c.DestinationType, c.Destination, c.RoutingKey, canonicalArgs(args)), nil
}

func (c Bind) writes(b *metaBatch) error {
	if !c.Durable {
		return nil
	}
	k, err := c.metaKey()
	if err != nil {
		return err
	}
	return b.put(bucketBindings, k, metaBinding{Vhost: c.Vhost, Source: c.Source, Destination: c.Destination,
		DestinationType: c.DestinationType, RoutingKey: c.RoutingKey, Arguments: c.Arguments})
}

func (c Unbind) writes(b *metaBatch) error {
	if !c.Durable {
		return nil
	}
	k, err := Bind(c).metaKey()
	if err != nil {
		return err
	}
	b.delete(bucketBindings, k)
	return nil
}
