package server

import (
	"bytes"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server/route"
)

// Checks of the exchange types that RabbitMQ ships as plugins or added in 4.0
// (x-consistent-hash, x-modulus-hash, x-random, x-local-random): what they
// accept as exchange arguments and as bindings, with RabbitMQ's reply texts.

// configureExchange validates and sets up what a new exchange's arguments
// configure beyond its binding structure (newExchange, through route.New,
// checks x-consistent-hash's): message deduplication. It runs wherever an
// exchange is created: on exchange.declare, for definitions and when meta.db
// is loaded.
func configureExchange(ex *Exchange, vhost string) *amqp.Error {
	return configureExchangeDedup(ex, vhost)
}

// validateBinding checks a binding from source as source's type does before
// it is added (RabbitMQ's validate_binding).
func validateBinding(source *Exchange, dest destination, key string, args amqp.Table) *amqp.Error {
	if err := validateBindingArgs(source.match, key, args); err != nil {
		return amqp.NewError(amqp.PreconditionFailed, methodQueueBind, "%v", err)
	}
	if source.match == kindLocalRandom {
		q, ok := dest.(*Queue)
		switch {
		case !ok:
			return amqp.NewError(amqp.PreconditionFailed, methodQueueBind, "Destination not found")
		case q.h.typeName() != "classic":
			return amqp.NewError(amqp.PreconditionFailed, methodQueueBind,
				"Queue type rabbit_%s_queue not valid for this exchange type", q.h.typeName())
		case q.args["x-queue-type"] == "quorum":
			return amqp.NewError(amqp.PreconditionFailed, methodQueueBind,
				"Queue type rabbit_quorum_queue not valid for this exchange type")
		}
	}
	return nil
}

// validateBindingArgs is the part of validateBinding that needs only the
// source's type, so definitions can be checked before anything exists.
func validateBindingArgs(kind, key string, args amqp.Table) error {
	switch kind {
	case kindHeaders:
		return route.ValidateHeadersArgs(args)
	case kindConsistentHash:
		_, err := route.ParseWeight(key)
		return err
	case kindLocalRandom:
		if key != "" {
			return &route.ArgsError{Text: "Non empty binding '" + key + "' key not permitted"}
		}
	}
	return nil
}

// routeTableLess orders bindings as RabbitMQ's route table does (an ordered
// set of #binding{} terms from one source): by binding key, then destination,
// exchanges before queues, by name. x-modulus-hash counts its bindings in this
// order and x-consistent-hash rebuilds its ring in it at boot. RabbitMQ then
// compares the argument lists as terms; Warren compares their encodings.
func routeTableLess(a, b route.Binding[destination]) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	ak, bk := destType(a.Dest), destType(b.Dest)
	if ak != bk {
		return ak < bk // "exchange" < "queue", as the atoms compare
	}
	if an, bn := a.Dest.destName(), b.Dest.destName(); an != bn {
		return an < bn
	}
	return bytes.Compare([]byte(canonicalArgs(a.Args)), []byte(canonicalArgs(b.Args))) < 0
}

// rebuildHashRings puts every durable x-consistent-hash exchange's ring in the
// order the plugin rebuilds it in when RabbitMQ boots (routeTableLess), once
// meta.db's bindings are loaded, so a restarted Warren routes as a restarted
// RabbitMQ does.
func (s *Server) rebuildHashRings() {
	for _, vh := range s.vhosts {
		for _, ex := range vh.exchanges {
			ex.mu.Lock()
			if ch, ok := ex.bindings.(*route.ConsistentHash[destination]); ok {
				ch.Rebuild(routeTableLess)
			}
			ex.mu.Unlock()
		}
	}
}
