package server

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNodeNameFromConfig(t *testing.T) {
	if got, want := DefaultConfig().NodeName, defaultNodeName(); got != want || got == "" {
		t.Fatalf("default NodeName = %q, want %q", got, want)
	}
	ts := startServer(t, func(c *Config) { c.NodeName = "warren@seams-test" })
	if got := ts.NodeName(); got != "warren@seams-test" {
		t.Fatalf("NodeName() = %q", got)
	}
	cfg := DefaultConfig()
	cfg.NodeName = ""
	if _, err := New(cfg); err == nil {
		t.Fatal("New accepted an empty NodeName")
	}
}

// connection.start announces the cluster name, which until one is set is the
// node's name, as RabbitMQ 3.10 announces "warrenref@vm" for its node.
func TestStartAnnouncesClusterName(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.NodeName = "warren@seams-start" })
	announced := func() any {
		c := ts.dial(t)
		defer c.Close()
		return c.Properties["cluster_name"]
	}
	if got := announced(); got != "warren@seams-start" {
		t.Fatalf("cluster_name %v, want the node name", got)
	}
	must(t, ts.SetClusterName("seams-cluster"))
	if got := announced(); got != "seams-cluster" {
		t.Fatalf("cluster_name %v after SetClusterName, want seams-cluster", got)
	}
}

// The node id is the node's identity for a cluster: kept across restarts on
// the same data directory, new on a wiped one.
func TestNodeIDSurvivesRestartNotWipe(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	first := ts.NodeID()
	if !nodeIDPattern.MatchString(first) {
		t.Fatalf("NodeID() = %q, not a version 4 UUID", first)
	}
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	if got := ts2.NodeID(); got != first {
		t.Fatalf("NodeID after restart = %q, want %q", got, first)
	}
	must(t, ts2.Close())

	other := startServer(t) // a fresh data directory, same node name
	if got := other.NodeID(); got == first || !nodeIDPattern.MatchString(got) {
		t.Fatalf("NodeID on a new data directory = %q (first %q)", got, first)
	}

	// Wiping the data directory in place also gives a new identity.
	must(t, os.RemoveAll(dir))
	ts3 := startServer(t, withDataDir(dir))
	if got := ts3.NodeID(); got == first {
		t.Fatalf("NodeID after wiping the data directory is still %q", got)
	}
}

func TestNodeIDWithoutDataDir(t *testing.T) {
	a := startServer(t, withDataDir(""))
	b := startServer(t, withDataDir(""))
	if !nodeIDPattern.MatchString(a.NodeID()) || a.NodeID() == b.NodeID() {
		t.Fatalf("in-memory node ids %q and %q", a.NodeID(), b.NodeID())
	}
}

func TestDamagedNodeIDStopsStartup(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, nodeIDFile), []byte("half-writ"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.DataDir = dir
	if _, err := New(cfg); !errorsIs(err, ErrMetaUnreadable) {
		t.Fatalf("New with a damaged node_id: %v, want ErrMetaUnreadable", err)
	}
}

// Every vhost reaches its node, whether created now or loaded from meta.db.
func TestVhostReachesServer(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	vh := ts.addVhost(t, "seams")
	if vh.srv != ts.Server || ts.Vhost("/").srv != ts.Server {
		t.Fatal("a new vhost does not reach its server")
	}
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	for _, v := range ts2.Vhosts() {
		if v.srv != ts2.Server {
			t.Fatalf("loaded vhost %q does not reach its server", v.Name())
		}
	}
	mem := startServer(t, withDataDir(""))
	if mem.Vhost("/").srv != mem.Server {
		t.Fatal("an in-memory vhost does not reach its server")
	}
}
