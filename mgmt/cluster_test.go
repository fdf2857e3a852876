package mgmt

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/server"
)

// clusterEnvConfig is a cluster configuration with short timings for
// in-process clusters on a loaded 2-core machine.
func clusterEnvConfig(expect int, seeds ...string) *cluster.Config {
	c := cluster.DefaultConfig()
	c.BindAddr, c.Secret, c.ClusterName = "127.0.0.1:0", "a mgmt cluster test secret", "mgmt-test"
	c.BootstrapExpect, c.Seeds = expect, seeds
	c.HeartbeatTimeout, c.ElectionTimeout = 500*time.Millisecond, 500*time.Millisecond
	c.LeaderLeaseTimeout, c.CommitTimeout = 250*time.Millisecond, 10*time.Millisecond
	c.RPCTimeout, c.HandshakeTimeout = 2*time.Second, time.Second
	c.ReconnectInterval, c.PromoteAfter, c.ReconcileInterval = 500*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
	c.ProposeTimeout = 2 * time.Second
	g := memberlist.DefaultLocalConfig()
	g.ProbeInterval, g.ProbeTimeout, g.GossipInterval = 200*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	g.SuspicionMult, g.PushPullInterval, g.TCPTimeout = 2, time.Second, time.Second
	c.Gossip = g
	c.Logger = testLogger()
	return c
}

// startClusterEnvs starts three brokers with their APIs as one cluster
// and waits until each has the cluster's definitions (guest logs in).
func startClusterEnvs(t *testing.T) []*env {
	t.Helper()
	envs := make([]*env, 3)
	var seed string
	for i := range envs {
		cc := clusterEnvConfig(3)
		if i > 0 {
			cc.Seeds = []string{seed}
		}
		envs[i] = newEnv(t, func(s *server.Config, _ *Config) {
			s.NodeName, s.Cluster, s.LoopbackUsers = fmt.Sprintf("warren@m%d", i+1), cc, nil
		})
		if i == 0 {
			seed = envs[0].srv.ClusterNode().Addr()
		}
	}
	for _, e := range envs {
		waitFor(t, 20*time.Second, func() error {
			if r := e.get("/api/whoami"); r.status != 200 {
				return fmt.Errorf("whoami: %d", r.status)
			}
			return nil
		})
	}
	return envs
}

// TestClusterNodesOverviewAndUnavailable: /api/nodes lists every member
// running, /api/overview reports the cluster's name, /api/cluster the Raft
// view; a queue declared through one node's API is listed by another with
// its home node; with two of three nodes stopped a declare answers 503
// with RabbitMQ's error body shape.
func TestClusterNodesOverviewAndUnavailable(t *testing.T) {
	envs := startClusterEnvs(t)
	e := envs[1]
	nodes := e.must(e.get("/api/nodes"), 200, "nodes").array(t)
	if len(nodes) != 3 {
		t.Fatalf("/api/nodes lists %d nodes: %v", len(nodes), nodes)
	}
	for i, n := range nodes {
		m := n.(map[string]any)
		if m["name"] != fmt.Sprintf("warren@m%d", i+1) || m["running"] != true || m["partitions"] == nil || m["uptime"] == nil {
			t.Errorf("node %d: %v", i, m)
		}
	}
	e.must(e.get("/api/nodes/warren@m3"), 200, "another member")
	ov := e.must(e.get("/api/overview"), 200, "overview").object(t)
	if ov["cluster_name"] != "mgmt-test" || ov["node"] != "warren@m2" {
		t.Errorf("overview cluster_name %v node %v", ov["cluster_name"], ov["node"])
	}
	st := e.must(e.get("/api/cluster"), 200, "cluster").object(t)
	if field(st, "raft.leader") == "" || len(st["nodes"].([]any)) != 3 || st["mode"] != "cluster" {
		t.Errorf("/api/cluster: %v", st)
	}

	// alarms is the cluster's (another member's alarm, from gossip),
	// local-alarms this node's.
	envs[0].srv.SetMemoryHighWatermark(1)
	waitFor(t, 10*time.Second, func() error {
		r := e.get("/api/health/checks/alarms")
		if want := `[{"node":"warren@m1","resource":"memory"}]`; r.status != 503 || !strings.Contains(string(r.body), want) {
			return fmt.Errorf("alarms check %d %s, want 503 with %s", r.status, r.body, want)
		}
		return nil
	})
	e.must(e.get("/api/health/checks/local-alarms"), 200, "local alarms of m2")
	envs[0].srv.SetMemoryHighWatermark(0)

	e.must(e.put("/api/queues/%2F/homed-m2", map[string]any{"durable": true}), 201, "declare")
	other := envs[2]
	waitFor(t, 10*time.Second, func() error {
		r := other.get("/api/queues/%2F/homed-m2")
		if r.status != 200 {
			return fmt.Errorf("status %d", r.status)
		}
		if n := r.object(t)["node"]; n != "warren@m2" {
			return fmt.Errorf("node %v", n)
		}
		return nil
	})

	envs[0].srv.Close()
	envs[2].srv.Close()
	start := time.Now()
	r := e.put("/api/exchanges/%2F/x-unavailable", map[string]any{"type": "fanout"})
	body := r.object(t)
	if r.status != 503 || body["error"] != "service_unavailable" ||
		!strings.Contains(fmt.Sprint(body["reason"]), "failed to declare exchange 'x-unavailable' in vhost '/' because the operation timed out") {
		t.Fatalf("declare without a majority: %d %v", r.status, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the 503 took %v", took)
	}
}

// TestClusterForgetAndLeave: forgetting a running node is refused (400)
// and an unknown one is 404; a stopped node is forgotten, a running one
// leaves gracefully, and the last node goes on changing definitions alone.
func TestClusterForgetAndLeave(t *testing.T) {
	envs := startClusterEnvs(t)
	first := envs[0]
	r := first.do("DELETE", "/api/cluster/nodes/warren@m3", nil)
	if r.status != 400 || !strings.Contains(string(r.body), "is running") {
		t.Fatalf("forget a running node: %d %s", r.status, r.body)
	}
	first.must(first.do("DELETE", "/api/cluster/nodes/warren@nobody", nil), 404, "forget an unknown node")

	envs[2].srv.Close()
	waitFor(t, 10*time.Second, func() error {
		r := first.do("DELETE", "/api/cluster/nodes/warren@m3", nil)
		if r.status != 204 {
			return fmt.Errorf("forget a stopped node: %d %s", r.status, r.body)
		}
		return nil
	})
	envs[1].must(envs[1].do("POST", "/api/cluster/leave", map[string]any{}), 204, "leave")
	waitFor(t, 10*time.Second, func() error {
		st := first.must(first.get("/api/cluster"), 200, "cluster").object(t)
		if v := fmt.Sprint(field(st, "raft.voters")); v != "[warren@m1]" {
			return fmt.Errorf("voters %s", v)
		}
		return nil
	})
	first.must(first.put("/api/queues/%2F/alone", map[string]any{"durable": true}), 201, "declare on the last node")
}

// TestClusterAlarmsInNodesAndHealth: a memory alarm on m1 shows as m1's
// mem_alarm in m2's /api/nodes, fails m2's health/checks/alarms (the
// cluster's, RabbitMQ's reason and alarm list) but not its local-alarms,
// and clears everywhere.
func TestClusterAlarmsInNodesAndHealth(t *testing.T) {
	envs := startClusterEnvs(t)
	e := envs[1]
	memAlarms := func() string {
		var s []string
		for _, n := range e.must(e.get("/api/nodes"), 200, "nodes").array(t) {
			m := n.(map[string]any)
			s = append(s, fmt.Sprintf("%v:%v/%v", m["name"], m["mem_alarm"], m["disk_free_alarm"]))
		}
		return strings.Join(s, " ")
	}
	envs[0].srv.SetMemoryHighWatermark(1) // anything is above one byte
	want := "warren@m1:true/false warren@m2:false/false warren@m3:false/false"
	waitFor(t, 10*time.Second, func() error {
		if got := memAlarms(); got != want {
			return fmt.Errorf("/api/nodes alarms %s, want %s", got, want)
		}
		return nil
	})
	r := e.get("/api/health/checks/alarms")
	body := r.object(t)
	if r.status != 503 || body["reason"] != "There are alarms in effect in the cluster" ||
		fmt.Sprint(body["alarms"]) != "[map[node:warren@m1 resource:memory]]" {
		t.Fatalf("alarms check on m2: %d %s", r.status, r.body)
	}
	e.must(e.get("/api/health/checks/local-alarms"), 200, "m2's local alarms")
	r = envs[0].get("/api/health/checks/local-alarms")
	if r.status != 503 || r.object(t)["reason"] != "There are alarms in effect on the node" {
		t.Fatalf("local-alarms check on m1: %d %s", r.status, r.body)
	}
	envs[0].srv.SetMemoryHighWatermark(0)
	waitFor(t, 10*time.Second, func() error {
		if r := e.get("/api/health/checks/alarms"); r.status != 200 {
			return fmt.Errorf("alarms check %d %s", r.status, r.body)
		}
		return nil
	})
}
