package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/queueindex"
)

// User is a user account from the configuration.
type User struct {
	// Name is the user name clients log in with.
	Name string
	// Password is the clear-text password; it is hashed when the server starts.
	// Leave empty and set PasswordHash to configure a RabbitMQ-style hash instead.
	Password string
	// PasswordHash is a base64 RabbitMQ SHA-256 salted hash (4-byte salt then
	// SHA-256 of salt+password), as found in RabbitMQ definitions exports.
	PasswordHash string
	// Tags are management tags such as "administrator".
	Tags []string
	// Permissions maps vhost names to the user's permissions there.
	Permissions map[string]Permission
}

// Permission holds the three regular expressions RabbitMQ checks resource names against.
type Permission struct {
	Configure string
	Write     string
	Read      string
}

// Config configures a Server. Start from DefaultConfig: the zero value is not valid.
type Config struct {
	// AMQPListen is the TCP address of the AMQP listener, e.g. ":5672": no
	// host listens on every address, IPv4 and IPv6 (dual-stack [::]).
	// Use "127.0.0.1:0" in tests for a free port.
	AMQPListen string

	// AMQPSListen is the TCP address of the AMQP-over-TLS listener, e.g.
	// "0.0.0.0:5671" (RabbitMQ's port). Empty, the default, disables it; when
	// set, TLSCertFile and TLSKeyFile are required.
	AMQPSListen string

	// TLSCertFile and TLSKeyFile are the PEM server certificate (chain) and
	// private key used by the AMQPS listener.
	TLSCertFile string
	TLSKeyFile  string

	// TLSCAFile is a PEM bundle of the authorities whose client certificates
	// are trusted. Required when TLSVerifyPeer is set.
	TLSCAFile string

	// TLSVerifyPeer asks clients for a certificate and verifies any they
	// present against TLSCAFile (RabbitMQ's verify_peer). A connection with
	// a verified certificate may log in with the EXTERNAL mechanism.
	TLSVerifyPeer bool

	// TLSFailIfNoPeerCert refuses TLS clients without a valid certificate
	// (RabbitMQ's fail_if_no_peer_cert). Requires TLSVerifyPeer.
	TLSFailIfNoPeerCert bool

	// MaxConnections caps the client sockets of the node, handshaking ones
	// included; sockets beyond it are closed right after accept, so a flood
	// costs existing connections nothing. 0, the default, is unlimited, as
	// RabbitMQ's connection_max.
	MaxConnections int

	// MaxConnectionsPerVhost caps the open connections of every vhost; the
	// next connection.open is refused with 530 NOT_ALLOWED, as RabbitMQ's
	// max-connections vhost limit does. 0, the default, is unlimited.
	MaxConnectionsPerVhost int

	// MaxQueuesPerVhost caps the queues of every vhost; a queue.declare that
	// would create one more fails with 406 PRECONDITION_FAILED, as RabbitMQ's
	// max-queues vhost limit does. 0, the default, is unlimited.
	MaxQueuesPerVhost int

	// MaxConsumersPerChannel caps the consumers of one channel; basic.consume
	// beyond it closes the connection with 530 NOT_ALLOWED, as RabbitMQ's
	// consumer_max_per_channel. 0, the default, is unlimited.
	MaxConsumersPerChannel int

	// MaxFieldTableSize caps, in bytes, the encoded size of a method's
	// arguments table and of a message's headers table; a larger one closes
	// the channel with 406 PRECONDITION_FAILED. 0, the default, leaves them
	// bounded by the frame and message size only, as in RabbitMQ.
	MaxFieldTableSize int

	// NodeName is this node's name, RabbitMQ style ("warren@host"): the
	// "node" of every object in the management API and the rabbitmq_node
	// label of the metrics. Default "warren@" + the host name.
	NodeName string

	// DataDir holds all persistent state: meta.db, the node's identity
	// (node_id) and each vhost's message stores. Empty keeps everything in
	// memory, and the node gets a new identity at every start.
	DataDir string

	// MaxOpenIndexFiles bounds the files the queue indexes of the node keep
	// open (segment files and directories of durable queues, and of transient
	// queues paging to disk): a queue opens its files when it reads or writes
	// them and the least recently used idle one is closed to make room, so
	// the number of queues is bounded by the disk, not the descriptor limit.
	// Files in use are never closed, so the cache can exceed the bound by the
	// number of queues being written at one moment. 0, the default, is half
	// of the descriptors the socket share of RLIMIT_NOFILE leaves (1,045 of
	// 20,000), the other half staying for message stores, streams and
	// meta.db; otherwise at least 2.
	MaxOpenIndexFiles int

	// FrameMax is the largest frame the server accepts and proposes in
	// connection.tune, in bytes including the 8 bytes of frame overhead.
	// A lower value from the client wins. Default 131072, minimum 4096.
	FrameMax uint32

	// ChannelMax is the highest channel number a client may open. A lower non-zero
	// value from the client wins. Default 2047.
	ChannelMax uint16

	// Heartbeat is the heartbeat interval proposed to clients; the lower non-zero
	// value of the two wins, and 0 from both disables heartbeats. Default 60 s.
	Heartbeat time.Duration

	// HandshakeTimeout drops a connection that has not finished connection.open
	// in this time. Default 10 s.
	HandshakeTimeout time.Duration

	// LoginFailureDelay is how long a connection whose login failed, or whose
	// handshake broke the protocol before connection.open, is held before it is
	// answered and closed, so that passwords cannot be tried at network speed.
	// Default 3 s, RabbitMQ's delay before it closes such a connection.
	LoginFailureDelay time.Duration

	// LoginFailureLogInterval limits the log to one line per peer address and
	// user name per interval for failed logins (and per peer for broken
	// handshakes); the next line counts those left out. Default 1 minute.
	LoginFailureLogInterval time.Duration

	// MaxMessageSize is the largest message body accepted; a larger publish
	// closes the channel with 406 PRECONDITION_FAILED. Default 128 MiB.
	MaxMessageSize uint64

	// MemoryHighWatermark is the heap size in bytes above which publishing
	// connections are blocked (connection.blocked) until memory falls below it
	// again. 0 disables the alarm. The default is 40% of physical memory, or 0
	// where that cannot be read.
	MemoryHighWatermark uint64

	// DiskFreeLimit blocks publishing connections while the file system of
	// DataDir has fewer free bytes than this. 0 disables. Default 1 GiB.
	DiskFreeLimit uint64

	// MemoryCheckInterval is how often memory use and free disk space are
	// compared with their limits. Default 1 s.
	MemoryCheckInterval time.Duration

	// DefaultVhost is created at start. Default "/".
	DefaultVhost string

	// Vhosts are further virtual hosts created at start.
	Vhosts []string

	// DefaultUser is created at start with full permissions on DefaultVhost and the
	// administrator tag, unless a user of that name is in Users. Default guest/guest.
	DefaultUser     string
	DefaultPassword string

	// LoopbackUsers may only connect from loopback addresses. Default ["guest"],
	// as in RabbitMQ; set to an empty slice to allow guest from anywhere.
	LoopbackUsers []string

	// Users are further accounts.
	Users []User

	// ConsumerTimeout closes, with 406 PRECONDITION_FAILED, a channel whose
	// delivery has stayed unacknowledged this long, requeueing its deliveries.
	// A queue's x-consumer-timeout overrides it. 0 disables. Default 30 min.
	ConsumerTimeout time.Duration

	// ConsumerTimeoutCheck is how often each connection looks for deliveries
	// past their consumer timeout. Default 5 s.
	ConsumerTimeoutCheck time.Duration

	// Flush is the flush policy of the message store and queue indexes:
	// FlushFsync (default: a confirm means the message is on stable storage),
	// FlushInterval and FlushMessages (a confirm means written to the OS, which
	// survives a broker crash; fsync on a timer or count), FlushOS (never fsync
	// on the hot path).
	Flush msgstore.FlushPolicy
	// VhostFlush overrides Flush for the vhosts it names.
	VhostFlush map[string]msgstore.FlushPolicy
	// FlushInterval and FlushMessages tune the interval and messages policies.
	FlushInterval time.Duration
	FlushMessages int
	// SegmentSize is the message store's segment file size. Default 64 MiB.
	SegmentSize int64
	// QueueHeadMessages and QueueHeadBytes bound the ready messages a durable
	// queue keeps in memory; the rest stay on disk only. Default 2048 and 8 MiB.
	QueueHeadMessages int
	QueueHeadBytes    int

	// WriteBufferLimit is the most bytes queued for one connection's socket before
	// queues stop delivering to its consumers until the writer catches up.
	// Default 4 MiB.
	WriteBufferLimit int

	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger

	// indexIdleEvery overrides indexIdleEvery (tests); zero means the default.
	indexIdleEvery time.Duration

	// ProductVersion is reported to clients in connection.start server-properties.
	ProductVersion string

	// Cluster, when set, makes the node a member of a cluster: every
	// definition change is proposed to the metadata Raft group and takes
	// effect when committed (cluster_node.go). Nil, the default, is a
	// standalone node, which opens no cluster port and runs no cluster
	// code. NodeName, DataDir (DataDir/cluster), Version and Logger are
	// filled from this configuration when empty; a data directory is
	// required.
	Cluster *cluster.Config
}

// DefaultConfig returns a configuration with RabbitMQ's defaults.
func DefaultConfig() Config {
	return Config{
		AMQPListen:           ":5672",
		NodeName:             defaultNodeName(),
		DataDir:              "./data",
		FrameMax:             131072,
		ChannelMax:           2047,
		Heartbeat:            60 * time.Second,
		HandshakeTimeout:     10 * time.Second,
		MaxMessageSize:       128 << 20,
		MemoryHighWatermark:  defaultMemoryWatermark(),
		MemoryCheckInterval:  time.Second,
		DiskFreeLimit:        1 << 30,
		DefaultVhost:         "/",
		DefaultUser:          "guest",
		DefaultPassword:      "guest",
		LoopbackUsers:        []string{"guest"},
		WriteBufferLimit:     4 << 20,
		ConsumerTimeout:      30 * time.Minute,
		ConsumerTimeoutCheck: 5 * time.Second,
		Flush:                msgstore.FlushFsync,
		FlushInterval:        200 * time.Millisecond,
		FlushMessages:        1000,
		SegmentSize:          64 << 20,
		QueueHeadMessages:    2048,
		QueueHeadBytes:       8 << 20,
		Logger:               slog.Default(),
		ProductVersion:       "dev",

		LoginFailureDelay:       3 * time.Second,
		LoginFailureLogInterval: time.Minute,
	}
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	var errs []error
	if c.AMQPListen == "" {
		errs = append(errs, errors.New("AMQPListen is empty"))
	} else if _, _, err := net.SplitHostPort(c.AMQPListen); err != nil {
		errs = append(errs, fmt.Errorf("AMQPListen %q: %w", c.AMQPListen, err))
	}
	errs = append(errs, c.validateTLSAndLimits()...)
	if c.FrameMax < 4096 {
		errs = append(errs, fmt.Errorf("FrameMax %d is below the protocol minimum 4096", c.FrameMax))
	}
	if c.ChannelMax == 0 {
		errs = append(errs, errors.New("ChannelMax must be at least 1"))
	}
	if c.Heartbeat < 0 || c.Heartbeat > 65535*time.Second {
		errs = append(errs, fmt.Errorf("Heartbeat %s out of range 0..65535s", c.Heartbeat))
	}
	if c.HandshakeTimeout <= 0 {
		errs = append(errs, errors.New("HandshakeTimeout must be positive"))
	}
	if c.LoginFailureDelay < 0 || c.LoginFailureLogInterval < 0 {
		errs = append(errs, errors.New("LoginFailureDelay and LoginFailureLogInterval must not be negative"))
	}
	if c.MaxMessageSize == 0 || c.MaxMessageSize > 512<<20 {
		errs = append(errs, fmt.Errorf("MaxMessageSize %d out of range 1..512 MiB", c.MaxMessageSize))
	}
	if c.QueueHeadMessages < 1 || c.QueueHeadBytes < 1 {
		errs = append(errs, errors.New("QueueHeadMessages and QueueHeadBytes must be positive"))
	}
	if c.SegmentSize < 1<<20 {
		errs = append(errs, fmt.Errorf("SegmentSize %d below 1 MiB", c.SegmentSize))
	}
	if c.FlushInterval <= 0 || c.FlushMessages <= 0 {
		errs = append(errs, errors.New("FlushInterval and FlushMessages must be positive"))
	}
	if c.ConsumerTimeout < 0 {
		errs = append(errs, errors.New("ConsumerTimeout is negative"))
	}
	if c.ConsumerTimeoutCheck <= 0 {
		errs = append(errs, errors.New("ConsumerTimeoutCheck must be positive"))
	}
	if c.MemoryCheckInterval <= 0 {
		errs = append(errs, errors.New("MemoryCheckInterval must be positive"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("NodeName is empty"))
	}
	if c.DefaultVhost == "" {
		errs = append(errs, errors.New("DefaultVhost is empty"))
	}
	if c.MaxOpenIndexFiles < 0 || (c.MaxOpenIndexFiles > 0 && c.MaxOpenIndexFiles < queueindex.MinFileCacheLimit) {
		errs = append(errs, fmt.Errorf("MaxOpenIndexFiles %d: 0 (the default) or at least %d", c.MaxOpenIndexFiles, queueindex.MinFileCacheLimit))
	}
	if c.WriteBufferLimit < 64<<10 {
		errs = append(errs, fmt.Errorf("WriteBufferLimit %d below 64 KiB", c.WriteBufferLimit))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("Logger is nil"))
	}
	if c.Cluster != nil && c.DataDir == "" {
		errs = append(errs, errors.New("a cluster node needs a DataDir (its definitions are the Raft group's state)"))
	}
	for _, u := range c.Users {
		if u.Name == "" {
			errs = append(errs, errors.New("a user has an empty name"))
		}
		if u.Password == "" && u.PasswordHash == "" {
			errs = append(errs, fmt.Errorf("user %q has neither Password nor PasswordHash", u.Name))
		}
	}
	return errors.Join(errs...)
}
