package cluster

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// MinSecretLen is the shortest cluster secret accepted: every key is derived
// from it, so a short one would make every inter-node connection guessable.
const MinSecretLen = 16

// Config configures one cluster node. Build it from DefaultConfig and set at
// least NodeName, DataDir, BindAddr and Secret.
type Config struct {
	// NodeName is unique in the cluster (the broker's node-name).
	NodeName string
	// NodeID is this node's storage identity. Leave it empty: it is
	// generated on first start and kept in DataDir/node-id, so a node
	// restarted with the same data resumes its place and a wiped node gets
	// a new identity. When set it must match the stored one.
	NodeID string
	// DataDir holds node-id and raft/ (log, stable store, snapshots).
	DataDir string
	// BindAddr is host:port of the one cluster port: TCP for every
	// connection class and UDP for gossip packets. Port 0 picks a free port
	// (tests); a restarted node should keep its port, since the Raft
	// configuration records addresses.
	BindAddr string
	// AdvertiseAddr is host:port other nodes dial; empty means BindAddr's
	// actual address.
	AdvertiseAddr string
	// Seeds are host:port of nodes to join; this node's own address may be
	// listed.
	Seeds []string
	// BootstrapExpect is the number of nodes to wait for before the first
	// election; 0 means never bootstrap, only join an existing cluster.
	BootstrapExpect int
	// ClusterName must be equal on every node; it is part of every
	// connection proof.
	ClusterName string
	// Secret (at least MinSecretLen bytes) derives the gossip keyring key
	// and the connection authentication key.
	Secret string
	// Version is gossiped (the broker's version); informational.
	Version string

	// Raft timings (hashicorp/raft defaults, design §6.6).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	MaxAppendEntries   int
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	SnapshotRetain     int

	// ProposeTimeout bounds Propose when the caller's context has no
	// earlier deadline.
	ProposeTimeout time.Duration
	// RPCTimeout bounds one RPC when the caller's context has no deadline.
	RPCTimeout time.Duration
	// HandshakeTimeout bounds the authentication of one connection.
	HandshakeTimeout time.Duration
	// ReconnectInterval is how often seeds and Raft servers that gossip
	// does not see alive are joined again (Serf's reconnect).
	ReconnectInterval time.Duration
	// PromoteAfter is how long a non-voter must be alive and in the Raft
	// configuration before the leader promotes it (Consul autopilot).
	PromoteAfter time.Duration
	// ReconcileInterval is how often the leader checks voters and
	// promotions besides membership events.
	ReconcileInterval time.Duration

	// Gossip is the memberlist base configuration; nil means
	// memberlist.DefaultLANConfig(). Name, addresses, transport, keyring,
	// delegates and logging are always set by the node.
	Gossip *memberlist.Config

	// Faults, when set, is applied to every connection and gossip packet
	// of this node (tests: cut, delay or drop one direction of a pair).
	Faults *Faults

	// Logger receives the node's, Raft's and memberlist's logs; nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a Config with the design's defaults (§6.6).
func DefaultConfig() *Config {
	return &Config{
		ClusterName:        "warren",
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		MaxAppendEntries:   64,
		SnapshotThreshold:  8192,
		SnapshotInterval:   120 * time.Second,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
		ProposeTimeout:     10 * time.Second,
		RPCTimeout:         10 * time.Second,
		HandshakeTimeout:   5 * time.Second,
		ReconnectInterval:  30 * time.Second,
		PromoteAfter:       10 * time.Second,
		ReconcileInterval:  time.Second,
	}
}

// Validate reports the first thing wrong with c.
func (c *Config) Validate() error {
	switch {
	case c.NodeName == "":
		return errors.New("cluster: NodeName is required")
	case len(c.NodeName) > 255:
		return errors.New("cluster: NodeName is longer than 255 bytes")
	case c.DataDir == "":
		return errors.New("cluster: DataDir is required")
	case c.ClusterName == "" || len(c.ClusterName) > 255:
		return errors.New("cluster: ClusterName must be 1 to 255 bytes")
	case len(c.Secret) < MinSecretLen:
		return fmt.Errorf("cluster: Secret must be at least %d characters (cluster traffic is always authenticated)", MinSecretLen)
	case len(c.NodeID) > 64 || len(c.Version) > 64 || len(c.AdvertiseAddr) > 255:
		// keeps the gossiped node meta within memberlist's 512 bytes
		return errors.New("cluster: NodeID and Version must be at most 64 bytes, AdvertiseAddr 255")
	case c.BootstrapExpect < 0:
		return errors.New("cluster: BootstrapExpect must not be negative")
	}
	if err := checkHostPort("BindAddr", c.BindAddr, true); err != nil {
		return err
	}
	if c.AdvertiseAddr != "" {
		if err := checkHostPort("AdvertiseAddr", c.AdvertiseAddr, false); err != nil {
			return err
		}
	}
	for _, s := range c.Seeds {
		if err := checkHostPort("Seeds", s, false); err != nil {
			return err
		}
	}
	return c.validateTimings()
}

func (c *Config) validateTimings() error {
	durations := []struct {
		name string
		d    time.Duration
	}{
		{"HeartbeatTimeout", c.HeartbeatTimeout}, {"ElectionTimeout", c.ElectionTimeout},
		{"LeaderLeaseTimeout", c.LeaderLeaseTimeout}, {"CommitTimeout", c.CommitTimeout},
		{"SnapshotInterval", c.SnapshotInterval}, {"ProposeTimeout", c.ProposeTimeout},
		{"RPCTimeout", c.RPCTimeout}, {"HandshakeTimeout", c.HandshakeTimeout},
		{"ReconnectInterval", c.ReconnectInterval}, {"PromoteAfter", c.PromoteAfter},
		{"ReconcileInterval", c.ReconcileInterval},
	}
	for _, d := range durations {
		if d.d <= 0 {
			return fmt.Errorf("cluster: %s must be positive", d.name)
		}
	}
	switch {
	case c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return errors.New("cluster: LeaderLeaseTimeout must not exceed HeartbeatTimeout")
	case c.MaxAppendEntries < 1 || c.MaxAppendEntries > 1024:
		return errors.New("cluster: MaxAppendEntries must be 1 to 1024")
	case c.SnapshotRetain < 1:
		return errors.New("cluster: SnapshotRetain must be at least 1")
	}
	return nil
}

func checkHostPort(field, addr string, portZeroOK bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("cluster: %s %q: %v", field, addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || (p == 0 && !portZeroOK) {
		return fmt.Errorf("cluster: %s %q: bad port", field, addr)
	}
	if host == "" && field != "BindAddr" {
		return fmt.Errorf("cluster: %s %q: host is required", field, addr)
	}
	return nil
}

// keys are derived from the secret, each for one use, so that knowing the
// gossip key (which memberlist keeps in memory) does not give the
// connection key.
type keys struct {
	gossip []byte // 32 bytes: AES-256-GCM key for memberlist's keyring
	auth   []byte // 32 bytes: HMAC-SHA256 key of the connection handshake
}

func deriveKeys(secret, clusterName string) (keys, error) {
	salt := []byte("warren-cluster/" + clusterName)
	g, err := hkdf.Key(sha256.New, []byte(secret), salt, "memberlist keyring", 32)
	if err != nil {
		return keys{}, err
	}
	a, err := hkdf.Key(sha256.New, []byte(secret), salt, "connection auth", 32)
	if err != nil {
		return keys{}, err
	}
	return keys{gossip: g, auth: a}, nil
}
