package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/warrenmq/warren/cluster/replica"
)

// Command is one change to the broker's definitions: vhosts, users,
// permissions, topic permissions, policies, runtime and global parameters,
// exchanges, queues and bindings. A command is plain data — names, flags,
// AMQP tables in their wire encoding, no pointers to connections, channels
// or queues (an exclusive queue's owner is an OwnerRef) — so it can be
// encoded (EncodeCommand) and applied on another node. Server.applyLocked
// (apply.go) is the one place a command takes effect.
type Command interface {
	// writes adds the command's meta.db records to b. It depends on the
	// command alone, so every node writes the same records.
	writes(b *metaBatch) error
}

// OwnerRef names the connection owning an exclusive queue: the node it is
// on and its connection id there.
type OwnerRef struct {
	Node string `json:"node"`
	Conn uint64 `json:"conn"`
}

// DeclareVhost creates a vhost, or sets the metadata of an existing one.
type DeclareVhost struct {
	Name string    `json:"name"`
	Meta VhostMeta `json:"meta"`
}

// DeleteVhost deletes a vhost with every definition in it and every
// permission on it.
type DeleteVhost struct {
	Name string `json:"name"`
}

// PutUser creates or replaces a user.
type PutUser struct {
	Name         string   `json:"name"`
	PasswordHash string   `json:"password_hash"`
	Tags         []string `json:"tags"`
	LoopbackOnly bool     `json:"loopback_only"`
	// Limits are the user's max-connections and max-channels, when set.
	Limits map[string]int64 `json:"limits,omitempty"`
}

// DeleteUser deletes a user with its permissions and topic permissions.
type DeleteUser struct {
	Name string `json:"name"`
}

// SetPermission sets a user's permission on a vhost.
type SetPermission struct {
	User       string     `json:"user"`
	Vhost      string     `json:"vhost"`
	Permission Permission `json:"permission"`
}

// ClearPermission removes a user's permission on a vhost.
type ClearPermission struct {
	User  string `json:"user"`
	Vhost string `json:"vhost"`
}

// SetTopicPermission sets a user's topic permission on an exchange.
type SetTopicPermission struct {
	TopicPermission TopicPermission `json:"topic_permission"`
}

// ClearTopicPermissions removes a user's topic permissions on a vhost: the
// one for Exchange, or all of them when Exchange is "".
type ClearTopicPermissions struct {
	User     string `json:"user"`
	Vhost    string `json:"vhost"`
	Exchange string `json:"exchange"`
}

// SetPolicy sets a policy, or with Operator an operator policy.
type SetPolicy struct {
	Policy   Policy `json:"policy"`
	Operator bool   `json:"operator"`
}

// ClearPolicy removes a policy, or with Operator an operator policy.
type ClearPolicy struct {
	Vhost    string `json:"vhost"`
	Name     string `json:"name"`
	Operator bool   `json:"operator"`
}

// SetParameter sets a runtime parameter.
type SetParameter struct {
	Parameter Parameter `json:"parameter"`
}

// ClearParameter removes a runtime parameter.
type ClearParameter struct {
	Component string `json:"component"`
	Vhost     string `json:"vhost"`
	Name      string `json:"name"`
}

// SetGlobalParameter sets a global parameter; cluster_name is the cluster name.
type SetGlobalParameter struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// ClearGlobalParameter removes a global parameter.
type ClearGlobalParameter struct {
	Name string `json:"name"`
}

// DeclareExchange creates an exchange. Arguments is an AMQP field table in
// its wire encoding, so argument types survive exactly.
type DeclareExchange struct {
	Vhost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Internal   bool   `json:"internal"`
	Arguments  []byte `json:"arguments"`
}

// DeleteExchange deletes an exchange and every binding from or to it;
// with IfUnused it is refused (406) while the exchange has bindings.
type DeleteExchange struct {
	Vhost    string `json:"vhost"`
	Name     string `json:"name"`
	IfUnused bool   `json:"if_unused,omitempty"`
}

// DeclareQueue creates a queue; Owner is set for an exclusive queue. Node
// is the queue's home, the node that holds its data ("" is the node
// applying it, for commands from before queues had homes).
type DeclareQueue struct {
	Vhost      string    `json:"vhost"`
	Name       string    `json:"name"`
	Durable    bool      `json:"durable"`
	Exclusive  bool      `json:"exclusive"`
	AutoDelete bool      `json:"auto_delete"`
	Arguments  []byte    `json:"arguments"`
	Owner      *OwnerRef `json:"owner,omitempty"`
	Node       string    `json:"node,omitempty"`
	// Placement is a quorum queue's replicas, chosen by the declaring node
	// (quorumPlacement); nil for other queues, and for a quorum queue
	// declared before placements (it gets one replica, on Node).
	Placement *replica.Placement `json:"placement,omitempty"`
	// Instance identifies this incarnation of the queue: a cluster member
	// sets a random one when it proposes a new declare (an equivalent
	// redeclare keeps the existing queue's). "" on a standalone node.
	Instance string `json:"instance,omitempty"`
}

// DeleteQueue deletes a queue and every binding to it. IfUnused and
// IfEmpty refuse it (406) while the queue has consumers or ready messages.
// With Owner set it deletes only an exclusive queue of that owner (the
// cleanup of a closed connection must not delete a later queue of the
// same name).
type DeleteQueue struct {
	Vhost    string    `json:"vhost"`
	Name     string    `json:"name"`
	IfUnused bool      `json:"if_unused,omitempty"`
	IfEmpty  bool      `json:"if_empty,omitempty"`
	Owner    *OwnerRef `json:"owner,omitempty"`
	// Instance, when set, deletes only that incarnation: a delete proposed
	// by auto-delete, x-expires or a dead node's cleanup for a queue that
	// was deleted and declared again before it committed leaves the new
	// queue alone.
	Instance string `json:"instance,omitempty"`
}

// Bind adds a binding; DestinationType is "queue" or "exchange". Durable
// says both ends survive a restart; only such a binding is stored. The
// apply sets it from the ends it finds, whatever the proposer sent.
type Bind struct {
	Vhost           string `json:"vhost"`
	Source          string `json:"source"`
	Destination     string `json:"destination"`
	DestinationType string `json:"destination_type"`
	Durable         bool   `json:"durable"`
	RoutingKey      string `json:"routing_key"`
	Arguments       []byte `json:"arguments"`
}

// Unbind removes a binding.
type Unbind Bind

// commandTypes maps each command's type tag to its Go type.
var commandTypes = map[string]reflect.Type{}

func init() {
	for _, c := range []Command{
		DeclareVhost{}, DeleteVhost{}, PutUser{}, DeleteUser{}, SetPermission{}, ClearPermission{},
		SetTopicPermission{}, ClearTopicPermissions{}, SetPolicy{}, ClearPolicy{}, SetParameter{},
		ClearParameter{}, SetGlobalParameter{}, ClearGlobalParameter{}, DeclareExchange{}, DeleteExchange{},
		DeclareQueue{}, DeleteQueue{}, Bind{}, Unbind{},
	} {
		t := reflect.TypeOf(c)
		commandTypes[t.Name()] = t
	}
}

// commandType is a command's type tag: its Go type name.
func commandType(c Command) string { return reflect.TypeOf(c).Name() }

type commandEnvelope struct {
	Type    string          `json:"type"`
	Command json.RawMessage `json:"command"`
}

// EncodeCommand encodes a command as JSON tagged with its type:
// {"type":"DeclareQueue","command":{...}}.
func EncodeCommand(c Command) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("server: encoding %s: %w", commandType(c), err)
	}
	return json.Marshal(commandEnvelope{Type: commandType(c), Command: body})
}

// DecodeCommand decodes what EncodeCommand encoded. Numbers in policy
// definitions and parameter values decode as json.Number, as the management
// API decodes them.
func DecodeCommand(b []byte) (Command, error) {
	var env commandEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("server: decoding a command: %w", err)
	}
	t, ok := commandTypes[env.Type]
	if !ok {
		return nil, fmt.Errorf("server: decoding a command: unknown type %q", env.Type)
	}
	v := reflect.New(t)
	d := json.NewDecoder(bytes.NewReader(env.Command))
	d.UseNumber()
	d.DisallowUnknownFields()
	if err := d.Decode(v.Interface()); err != nil {
		return nil, fmt.Errorf("server: decoding %s: %w", env.Type, err)
	}
	return v.Elem().Interface().(Command), nil
}
