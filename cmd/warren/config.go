package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/server"
)

// setting is one configuration key: its flag, default and documentation. The
// README's configuration table lists the same keys.
type setting struct {
	key   string
	def   any
	usage string
}

var settings = []setting{
	{"data-dir", "./data", "directory for all persistent state"},
	{"amqp-listen", ":5672", "AMQP listener address; no host is every address, IPv4 and IPv6"},
	{"amqps-listen", "", "AMQP over TLS listener address, e.g. :5671 (empty disables; needs tls-cert and tls-key)"},
	{"tls-cert", "", "PEM server certificate (chain) for AMQPS and, with mgmt-tls or metrics-tls, HTTPS"},
	{"tls-key", "", "PEM private key of tls-cert"},
	{"tls-ca", "", "PEM authorities trusted for client certificates"},
	{"tls-verify-peer", false, "request and verify AMQPS client certificates (enables the EXTERNAL mechanism; needs tls-ca)"},
	{"tls-fail-if-no-peer-cert", false, "refuse AMQPS clients without a valid certificate (needs tls-verify-peer)"},
	{"mgmt-listen", ":15672", "management HTTP API and web UI address (empty disables)"},
	{"mgmt-tls", false, "serve the management API over HTTPS with tls-cert and tls-key"},
	{"mgmt-read-timeout", 2 * time.Minute, "longest a management client may take to send one request, body included"},
	{"mgmt-write-timeout", 5 * time.Minute, "longest the management API may take to send one response (definitions exports are the longest)"},
	{"mgmt-max-connections", 128, "most management HTTP connections served at once; more wait until one closes"},
	{"metrics-listen", ":15692", "Prometheus metrics address (empty disables)"},
	{"metrics-tls", false, "serve Prometheus metrics over HTTPS with tls-cert and tls-key"},
	{"metrics-max-connections", 32, "most Prometheus metrics connections served at once; more wait until one closes"},
	{"pprof-listen", "", "Go profiler (net/http/pprof) address, e.g. 127.0.0.1:6060 (empty disables)"},
	{"metrics-per-object", false, "serve per-queue and per-connection metrics at /metrics (always at /metrics/per-object)"},
	{"node-name", "", "the node's name in the management API and metrics (default warren@<hostname>)"},
	{"log-format", "text", "log format: text or json"},
	{"log-level", "info", "log level: debug, info, warn or error"},
	{"frame-max", 131072, "largest frame in bytes proposed to clients"},
	{"channel-max", 2047, "highest channel number a client may open"},
	{"heartbeat", 60 * time.Second, "heartbeat interval proposed to clients (0 disables)"},
	{"handshake-timeout", 10 * time.Second, "drop connections that do not finish the handshake in this time"},
	{"login-failure-delay", 3 * time.Second, "hold a connection whose login failed (or whose handshake broke the protocol) this long before refusing it"},
	{"login-failure-log-interval", time.Minute, "log failed logins at most once per peer and user in this interval, counting the rest"},
	{"max-message-size", 128 << 20, "largest message body accepted, in bytes"},
	{"memory-high-watermark", 0.4, "block publishers above this fraction of RAM (<= 1.0) or number of bytes (> 1.0); 0 disables"},
	{"disk-free-limit", 1 << 30, "block publishers while the data directory's file system has fewer free bytes (0 disables)"},
	{"default-vhost", "/", "vhost created at start"},
	{"vhosts", []string{}, "more vhosts created at start, comma-separated"},
	{"load-definitions", "", "RabbitMQ definitions file, or directory of .json files, imported at every start before the listeners open"},
	{"load-definitions-skip-if-unchanged", "auto", "skip the load-definitions import when the files' SHA-256 is the one imported last (RabbitMQ's definitions.skip_if_unchanged): true, false, or auto (true on a cluster node, false standalone)"},
	{"default-user", "guest", "user created at start with full access to the default vhost"},
	{"default-pass", "guest", "password of the default user"},
	{"loopback-users", []string{"guest"}, "users that may only connect from loopback addresses"},
	{"write-buffer-limit", 4 << 20, "bytes queued for one connection's socket before its consumers are paused"},
	{"flush-policy", "fsync", "what a publisher confirm guarantees: fsync, interval, messages or os"},
	{"flush-interval", 200 * time.Millisecond, "fsync period of the interval policy"},
	{"flush-messages", 1000, "fsync after this many messages under the messages policy"},
	{"segment-size", 64 << 20, "message store segment file size in bytes"},
	{"queue-head-messages", 2048, "ready messages a durable queue keeps in memory"},
	{"queue-head-bytes", 8 << 20, "ready message bytes a durable queue keeps in memory"},
	{"max-open-index-files", 0, "most queue index files kept open; idle ones are closed (0 = half of what the socket share of the descriptor limit leaves)"},
	{"max-connections", 0, "most client sockets of the node; more are closed at accept (0 = unlimited)"},
	{"max-connections-per-vhost", 0, "most connections of each vhost; more are refused at connection.open with 530 (0 = unlimited)"},
	{"max-queues-per-vhost", 0, "most queues of each vhost; more fail queue.declare with 406 (0 = unlimited)"},
	{"max-consumers-per-channel", 0, "most consumers of one channel; more close the connection with 530 (0 = unlimited)"},
	{"max-field-table-size", 0, "largest method arguments or message headers table in bytes; larger close the channel with 406 (0 = unlimited)"},
	{"consumer-timeout", 30 * time.Minute, "close a channel whose delivery stays unacknowledged this long (0 disables)"},
	{"cluster-listen", "", "inter-node cluster port, host:port, e.g. :25672 (empty: a standalone node, no cluster port)"},
	{"cluster-advertise", "", "host:port other nodes dial to reach this one (default: cluster-listen's address)"},
	{"cluster-seeds", []string{}, "host:port of cluster nodes to join, comma-separated (a node may list itself)"},
	{"cluster-bootstrap-expect", 0, "nodes to wait for before the first election of a new cluster (0: only join an existing one)"},
	{"cluster-name", "warren", "the cluster's name: equal on every node, part of every inter-node handshake"},
	{"cluster-secret", "", "shared secret (at least 16 characters) authenticating and keying all cluster traffic; required with cluster-listen"},
}

// usageHeader precedes the flags in warren --help.
const usageHeader = `Usage: warren [flags]        (-h, --help prints this and exits)

Runs the Warren AMQP 0-9-1 broker. Every key below is a flag, a WARREN_*
environment variable (dashes become underscores: WARREN_AMQP_LISTEN) and a
key of the YAML file given with --config; config, help and version are flags
only, users, vhost-flush-policies and shovels keys of the file only. Flags win over
the environment, which wins over the file.

`

// newFlagSet defines every flag: --config, --version and one per setting;
// pflag answers -h and --help with ErrHelp, its own usage output being off
// (run prints printUsage's to stdout).
func newFlagSet(stderr io.Writer) (fs *pflag.FlagSet, configFile *string, version *bool) {
	fs = pflag.NewFlagSet("warren", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	configFile = fs.String("config", "", "YAML configuration file")
	version = fs.Bool("version", false, "print the version and exit")
	for _, s := range settings {
		switch d := s.def.(type) {
		case string:
			fs.String(s.key, d, s.usage)
		case int:
			fs.Int(s.key, d, s.usage)
		case float64:
			fs.Float64(s.key, d, s.usage)
		case time.Duration:
			fs.Duration(s.key, d, s.usage)
		case []string:
			fs.StringSlice(s.key, d, s.usage)
		case bool:
			fs.Bool(s.key, d, s.usage)
		}
	}
	return fs, configFile, version
}

// printUsage writes warren --help.
func printUsage(w io.Writer) {
	fs, _, _ := newFlagSet(io.Discard)
	fmt.Fprint(w, usageHeader)
	fmt.Fprint(w, fs.FlagUsages())
}

// loadConfig merges flags, WARREN_* environment variables and an optional
// YAML file (flags win, then environment, then file, then defaults). --help
// returns pflag.ErrHelp.
func loadConfig(args []string, stderr io.Writer) (server.Config, *viper.Viper, bool, error) {
	fs, configFile, version := newFlagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return server.Config{}, nil, false, err
	}
	v := viper.New()
	v.SetEnvPrefix("WARREN")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	for _, s := range settings {
		v.SetDefault(s.key, s.def)
	}
	if err := v.BindPFlags(fs); err != nil {
		return server.Config{}, nil, false, err
	}
	if *version {
		return server.Config{}, v, true, nil
	}
	if *configFile != "" {
		v.SetConfigFile(*configFile)
		if err := v.ReadInConfig(); err != nil {
			return server.Config{}, nil, false, fmt.Errorf("reading %s: %w", *configFile, err)
		}
	}
	cfg, err := toServerConfig(v)
	return cfg, v, false, err
}

// fileUser is a user in the YAML file's users list.
type fileUser struct {
	Name         string                       `mapstructure:"name"`
	Password     string                       `mapstructure:"password"`
	PasswordHash string                       `mapstructure:"password_hash"`
	Tags         []string                     `mapstructure:"tags"`
	Permissions  map[string]map[string]string `mapstructure:"permissions"`
}

func toServerConfig(v *viper.Viper) (server.Config, error) {
	cfg := server.DefaultConfig()
	cfg.DataDir = v.GetString("data-dir")
	if node := v.GetString("node-name"); node != "" {
		cfg.NodeName = node
	}
	cfg.AMQPListen = v.GetString("amqp-listen")
	cfg.AMQPSListen = v.GetString("amqps-listen")
	cfg.TLSCertFile = v.GetString("tls-cert")
	cfg.TLSKeyFile = v.GetString("tls-key")
	cfg.TLSCAFile = v.GetString("tls-ca")
	cfg.TLSVerifyPeer = v.GetBool("tls-verify-peer")
	cfg.TLSFailIfNoPeerCert = v.GetBool("tls-fail-if-no-peer-cert")
	cfg.MaxConnections = v.GetInt("max-connections")
	cfg.MaxConnectionsPerVhost = v.GetInt("max-connections-per-vhost")
	cfg.MaxQueuesPerVhost = v.GetInt("max-queues-per-vhost")
	cfg.MaxOpenIndexFiles = v.GetInt("max-open-index-files")
	cfg.MaxConsumersPerChannel = v.GetInt("max-consumers-per-channel")
	cfg.MaxFieldTableSize = v.GetInt("max-field-table-size")
	cfg.FrameMax = v.GetUint32("frame-max")
	cfg.ChannelMax = uint16(v.GetUint32("channel-max"))
	if v.GetUint32("channel-max") > 65535 {
		return cfg, fmt.Errorf("channel-max %d above 65535", v.GetUint32("channel-max"))
	}
	cfg.Heartbeat = v.GetDuration("heartbeat")
	cfg.HandshakeTimeout = v.GetDuration("handshake-timeout")
	cfg.LoginFailureDelay = v.GetDuration("login-failure-delay")
	cfg.LoginFailureLogInterval = v.GetDuration("login-failure-log-interval")
	cfg.MaxMessageSize = v.GetUint64("max-message-size")
	cfg.DefaultVhost = v.GetString("default-vhost")
	cfg.DefaultUser = v.GetString("default-user")
	if v.GetString("load-definitions") != "" {
		// As RabbitMQ: a node that imports definitions at boot makes no
		// default user on its first boot, the file names the users; a
		// guest/guest next to them would be an account nobody asked for.
		cfg.DefaultUser = ""
	}
	cfg.DefaultPassword = v.GetString("default-pass")
	cfg.LoopbackUsers = stringList(v, "loopback-users")
	cfg.WriteBufferLimit = v.GetInt("write-buffer-limit")
	cfg.DiskFreeLimit = uint64(max(v.GetInt64("disk-free-limit"), 0))
	cfg.Vhosts = stringList(v, "vhosts")
	flush, err := msgstore.ParseFlushPolicy(v.GetString("flush-policy"))
	if err != nil {
		return cfg, fmt.Errorf("flush-policy: %w", err)
	}
	cfg.Flush = flush
	for vh, name := range v.GetStringMapString("vhost-flush-policies") {
		p, err := msgstore.ParseFlushPolicy(name)
		if err != nil {
			return cfg, fmt.Errorf("vhost-flush-policies[%s]: %w", vh, err)
		}
		if cfg.VhostFlush == nil {
			cfg.VhostFlush = make(map[string]msgstore.FlushPolicy)
		}
		cfg.VhostFlush[vh] = p
	}
	cfg.FlushInterval = v.GetDuration("flush-interval")
	cfg.FlushMessages = v.GetInt("flush-messages")
	cfg.SegmentSize = v.GetInt64("segment-size")
	cfg.QueueHeadMessages = v.GetInt("queue-head-messages")
	cfg.QueueHeadBytes = v.GetInt("queue-head-bytes")
	cfg.ConsumerTimeout = v.GetDuration("consumer-timeout")
	wm := v.GetFloat64("memory-high-watermark")
	switch {
	case wm < 0:
		return cfg, fmt.Errorf("memory-high-watermark %v is negative", wm)
	case wm == 0:
		cfg.MemoryHighWatermark = 0
	case wm <= 1:
		total := server.DefaultConfig().MemoryHighWatermark * 10 / 4
		cfg.MemoryHighWatermark = uint64(float64(total) * wm)
	default:
		cfg.MemoryHighWatermark = uint64(wm)
	}
	var users []fileUser
	if err := v.UnmarshalKey("users", &users); err != nil {
		return cfg, fmt.Errorf("users: %w", err)
	}
	for _, u := range users {
		su := server.User{Name: u.Name, Password: u.Password, PasswordHash: u.PasswordHash, Tags: u.Tags,
			Permissions: make(map[string]server.Permission)}
		for vh, p := range u.Permissions {
			su.Permissions[vh] = server.Permission{Configure: p["configure"], Write: p["write"], Read: p["read"]}
		}
		cfg.Users = append(cfg.Users, su)
	}
	logger, err := newLogger(v.GetString("log-format"), v.GetString("log-level"))
	if err != nil {
		return cfg, err
	}
	cfg.Logger = logger
	cfg.Cluster, err = clusterConfig(v)
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// clusterConfig is the cluster part of the configuration: nil for a
// standalone node (no cluster-listen), which runs no cluster code at all.
// The node name, data directory and logger come from the server's
// configuration (server.New fills them in).
func clusterConfig(v *viper.Viper) (*cluster.Config, error) {
	listen := v.GetString("cluster-listen")
	if listen == "" {
		for _, key := range []string{"cluster-advertise", "cluster-secret"} {
			if v.GetString(key) != "" {
				return nil, fmt.Errorf("%s is set but cluster-listen is empty", key)
			}
		}
		if len(stringList(v, "cluster-seeds")) > 0 || v.GetInt("cluster-bootstrap-expect") != 0 {
			return nil, errors.New("cluster-seeds or cluster-bootstrap-expect is set but cluster-listen is empty")
		}
		return nil, nil
	}
	secret := v.GetString("cluster-secret")
	if len(secret) < cluster.MinSecretLen {
		return nil, fmt.Errorf("cluster-secret is required with cluster-listen and must be at least %d characters", cluster.MinSecretLen)
	}
	c := cluster.DefaultConfig()
	c.BindAddr = listen
	c.AdvertiseAddr = v.GetString("cluster-advertise")
	c.Seeds = stringList(v, "cluster-seeds")
	c.BootstrapExpect = v.GetInt("cluster-bootstrap-expect")
	c.ClusterName = v.GetString("cluster-name")
	c.Secret = secret
	return c, nil
}

// stringList reads a list key: a YAML list, or a comma-separated flag or
// WARREN_* variable. viper splits a variable's string on spaces only, so
// "a,b" would be one element; every element is split on commas here.
func stringList(v *viper.Viper, key string) []string {
	var out []string
	for _, e := range v.GetStringSlice(key) {
		for _, part := range strings.Split(e, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log-level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(logOutput, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(logOutput, opts)), nil
	}
	return nil, errors.New("log-format must be text or json")
}
