package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/cluster/replica"
)

// TestCommandRoundTrip encodes one command of every type, with every field
// set, and decodes it back to the same value.
func TestCommandRoundTrip(t *testing.T) {
	args := tableBytes(amqp.Table{"x-max-length": int32(5), "x-message-ttl": int64(60000), "s": "v"})
	cmds := []Command{
		DeclareVhost{Name: "v", Meta: VhostMeta{Description: "d", Tags: []string{"a"}, DefaultQueueType: "quorum", Tracing: true}},
		DeleteVhost{Name: "v"},
		PutUser{Name: "u", PasswordHash: "h", Tags: []string{"administrator"}, LoopbackOnly: true},
		DeleteUser{Name: "u"},
		SetPermission{User: "u", Vhost: "v", Permission: Permission{Configure: "c", Write: "w", Read: "r"}},
		ClearPermission{User: "u", Vhost: "v"},
		SetTopicPermission{TopicPermission: TopicPermission{User: "u", Vhost: "v", Exchange: "x", Write: "w", Read: "r"}},
		ClearTopicPermissions{User: "u", Vhost: "v", Exchange: "x"},
		SetPolicy{Policy: Policy{Vhost: "v", Name: "p", Pattern: "^q", ApplyTo: "queues", Priority: 3,
			Definition: map[string]any{"max-length": json.Number("10"), "ha-mode": "all"}}, Operator: true},
		ClearPolicy{Vhost: "v", Name: "p", Operator: true},
		SetParameter{Parameter: Parameter{Component: "shovel", Vhost: "v", Name: "s", Value: map[string]any{"n": json.Number("1.5")}}},
		ClearParameter{Component: "shovel", Vhost: "v", Name: "s"},
		SetGlobalParameter{Name: "g", Value: []any{"x", json.Number("2")}},
		ClearGlobalParameter{Name: "g"},
		DeclareExchange{Vhost: "v", Name: "x", Type: "topic", Durable: true, AutoDelete: true, Internal: true, Arguments: args},
		DeleteExchange{Vhost: "v", Name: "x"},
		DeclareQueue{Vhost: "v", Name: "q", Durable: true, Exclusive: true, AutoDelete: true, Arguments: args,
			Owner: &OwnerRef{Node: "warren@h", Conn: 7}, Node: "warren@h", Placement: &replica.Placement{Replicas: []string{"warren@h", "warren@i"},
				Leader: "warren@h", Epoch: 2, ISR: []string{"warren@h"}, MinISR: 1, Version: 3}},
		AlterQueueISR{Vhost: "v", Name: "q", Epoch: 2, Version: 3, ISR: []string{"warren@h", "warren@i"}},
		ElectQueueLeader{Vhost: "v", Name: "q", Placement: replica.Placement{Replicas: []string{"warren@h", "warren@i"},
			Leader: "warren@i", Epoch: 3, ISR: []string{"warren@i"}, MinISR: 1, Version: 4}},
		ChangeQueueReplicas{Vhost: "v", Name: "q", Version: 4, Replicas: []string{"warren@i", "warren@j"}, MinISR: 1},
		DeleteQueue{Vhost: "v", Name: "q"},
		Bind{Vhost: "v", Source: "x", Destination: "q", DestinationType: "queue", Durable: true, RoutingKey: "k", Arguments: args},
		Unbind{Vhost: "v", Source: "x", Destination: "q", DestinationType: "queue", Durable: true, RoutingKey: "k", Arguments: args},
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		seen[commandType(c)] = true
		b, err := EncodeCommand(c)
		must(t, err)
		got, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("round trip of %s:\n got %#v\nwant %#v", b, got, c)
		}
	}
	for name := range commandTypes {
		if !seen[name] {
			t.Errorf("command type %s is not round-trip tested", name)
		}
	}
	if _, err := DecodeCommand([]byte(`{"type":"Nope","command":{}}`)); err == nil {
		t.Error("an unknown command type decoded")
	}
}

// TestApplyWritesMetaFirst makes definition changes through the broker's
// API and checks each is one meta.db transaction, made while memory does
// not have the change yet.
func TestApplyWritesMetaFirst(t *testing.T) {
	ts := startServer(t, withDataDir(t.TempDir()))
	_, err := ts.PutVhost("defs-a", VhostMeta{})
	must(t, err)
	steps := []struct {
		what    string
		change  func() error
		visible func() bool
	}{
		{"put user", func() error { pw := "pw"; _, err := ts.PutUser(UserSpec{Name: "defs-au", Password: &pw}); return err }, func() bool { _, err := ts.User("defs-au"); return err == nil }},
		{"set permission", func() error {
			_, err := ts.SetPermission("defs-au", "defs-a", Permission{".*", ".*", ".*"})
			return err
		},
			func() bool { return ts.users.permission("defs-au", "defs-a") != nil }},
		{"set topic permission", func() error {
			_, err := ts.SetTopicPermission(TopicPermission{User: "defs-au", Vhost: "defs-a", Exchange: "amq.topic", Write: ".*", Read: ".*"})
			return err
		}, func() bool { return ts.users.topicPermission("defs-au", "defs-a", "amq.topic") != nil }},
		{"set policy", func() error {
			_, err := ts.PutPolicy(Policy{Vhost: "defs-a", Name: "p", Pattern: ".*", ApplyTo: "queues", Definition: map[string]any{"max-length": int64(1)}}, false)
			return err
		}, func() bool { _, err := ts.GetPolicy("defs-a", "p", false); return err == nil }},
		{"set vhost metadata", func() error { _, err := ts.PutVhost("defs-a", VhostMeta{Description: "d"}); return err },
			func() bool { return ts.Vhost("defs-a").Meta().Description == "d" }},
		{"set cluster name", func() error { return ts.SetClusterName("defs-c") }, func() bool { return ts.ClusterName() == "defs-c" }},
		{"clear policy", func() error { return ts.DeletePolicy("defs-a", "p", false) },
			func() bool { _, err := ts.GetPolicy("defs-a", "p", false); return err != nil }},
		{"clear topic permissions", func() error { return ts.ClearTopicPermissions("defs-au", "defs-a", "") },
			func() bool { return ts.users.topicPermission("defs-au", "defs-a", "amq.topic") == nil }},
		{"clear permission", func() error { return ts.ClearPermission("defs-au", "defs-a") },
			func() bool { return ts.users.permission("defs-au", "defs-a") == nil }},
		{"delete user", func() error { return ts.DeleteUser("defs-au") }, func() bool { _, err := ts.User("defs-au"); return err != nil }},
		{"delete vhost", func() error { return ts.DeleteVhost("defs-a") }, func() bool { return ts.Vhost("defs-a") == nil }},
	}
	defer func() { metaCommitHook = nil }()
	for _, st := range steps {
		commits, early := 0, false
		metaCommitHook = func() {
			commits++
			early = early || st.visible()
		}
		must(t, st.change())
		metaCommitHook = nil
		if commits != 1 || early || !st.visible() {
			t.Errorf("%s: %d meta.db transactions, change visible before the write: %t, after: %t", st.what, commits, early, st.visible())
		}
	}
}
