package cluster

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	valid := func() *Config {
		c := DefaultConfig()
		c.NodeName, c.DataDir, c.BindAddr, c.Secret = "n1", t.TempDir(), "127.0.0.1:25672", testSecret
		return c
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no name", func(c *Config) { c.NodeName = "" }, "NodeName is required"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir is required"},
		{"short secret", func(c *Config) { c.Secret = "fifteen chars.." }, "at least 16 characters"},
		{"no secret", func(c *Config) { c.Secret = "" }, "Secret must be"},
		{"bad bind", func(c *Config) { c.BindAddr = "localhost" }, "BindAddr"},
		{"bad seed", func(c *Config) { c.Seeds = []string{"host:0"} }, "Seeds"},
		{"seed without host", func(c *Config) { c.Seeds = []string{":25672"} }, "host is required"},
		{"negative expect", func(c *Config) { c.BootstrapExpect = -1 }, "BootstrapExpect"},
		{"no cluster name", func(c *Config) { c.ClusterName = "" }, "ClusterName"},
		{"zero timing", func(c *Config) { c.ElectionTimeout = 0 }, "ElectionTimeout must be positive"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = 2 * time.Second }, "LeaderLeaseTimeout"},
		{"no snapshots kept", func(c *Config) { c.SnapshotRetain = 0 }, "SnapshotRetain"},
	} {
		c := valid()
		tc.change(c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// The defaults are the design card's (§6.6), anchored on hashicorp/raft's.
func TestDefaultConfigTimings(t *testing.T) {
	c := DefaultConfig()
	if c.HeartbeatTimeout != time.Second || c.ElectionTimeout != time.Second || c.LeaderLeaseTimeout != 500*time.Millisecond ||
		c.CommitTimeout != 50*time.Millisecond || c.MaxAppendEntries != 64 || c.SnapshotThreshold != 8192 ||
		c.SnapshotInterval != 120*time.Second || c.TrailingLogs != 10240 || c.SnapshotRetain != 2 ||
		c.ReconnectInterval != 30*time.Second || c.PromoteAfter != 10*time.Second || c.ProposeTimeout != 10*time.Second {
		t.Fatalf("defaults drifted from the design: %+v", c)
	}
}

func TestDerivedKeysAreSeparateAndBoundToTheCluster(t *testing.T) {
	k1, err := deriveKeys(testSecret, "a")
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := deriveKeys(testSecret, "b")
	if len(k1.gossip) != 32 || len(k1.auth) != 32 {
		t.Fatalf("key sizes %d, %d", len(k1.gossip), len(k1.auth))
	}
	if bytes.Equal(k1.gossip, k1.auth) || bytes.Equal(k1.auth, k2.auth) || bytes.Equal(k1.gossip, []byte(testSecret)[:32]) {
		t.Fatal("keys are not separate per use and cluster")
	}
}

func TestNodeMetaFitsAndRoundTrips(t *testing.T) {
	long := strings.Repeat("x", 255)
	m := localMeta{id: long, bootID: long, addr: "127.0.0.1:25672", version: "1.2.3", alarms: AlarmDisk, voter: true, inRaft: true}
	b := m.encode()
	if len(b) > 1024 {
		t.Fatalf("meta of %d bytes", len(b))
	}
	short := localMeta{id: "0123456789abcdef", bootID: "fedcba9876543210", addr: "[2001:db8::1]:25672", version: "warren 1.0.0",
		alarms: AlarmDisk | AlarmMemory, voter: true, inRaft: true, leaving: true}
	b = short.encode()
	if len(b) > 512 {
		t.Fatalf("a typical meta is %d bytes, memberlist allows 512", len(b))
	}
	got, leaving, err := decodeMeta(b)
	if err != nil || !leaving || got.ID != short.id || got.BootID != short.bootID || got.Addr != short.addr ||
		got.Version != short.version || got.Alarms != AlarmDisk|AlarmMemory || !got.Voter || !got.InRaft {
		t.Fatalf("decoded %+v leaving %v err %v", got, leaving, err)
	}
}

func TestVoterTarget(t *testing.T) {
	for size, want := range map[int]int{1: 1, 2: 1, 3: 3, 4: 3, 5: 5, 6: 5, 9: 5} {
		if got := voterTarget(size); got != want {
			t.Errorf("voterTarget(%d) = %d, want %d", size, got, want)
		}
	}
}
