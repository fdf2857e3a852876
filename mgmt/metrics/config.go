package metrics

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Options says how the node identifies itself in the exposition and which
// shape /metrics has. Start from DefaultOptions. The rabbitmq_node label of
// rabbitmq_identity_info is the server's node name (server.Config.NodeName).
type Options struct {
	// ClusterName is the rabbitmq_cluster label while the server has no
	// cluster name of its own (server.Server.ClusterName, set through the
	// management API or definitions), which wins when set. Dashboards select
	// a cluster by it. Empty, the default, uses the server's node name, as
	// RabbitMQ does before a cluster name is set.
	ClusterName string

	// ProductName is the product_name label of rabbitmq_build_info.
	// Default "Warren".
	ProductName string

	// PerObject makes /metrics return the per-object exposition, like
	// RabbitMQ's prometheus.return_per_object_metrics = true.
	PerObject bool

	// Logger receives scrape errors (a node statistic that could not be read).
	// Default slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the default options.
func DefaultOptions() Options {
	return Options{
		ProductName: "Warren",
		Logger:      slog.Default(),
	}
}

// Validate reports every invalid option.
func (o *Options) Validate() error {
	var errs []error
	if o.ProductName == "" {
		errs = append(errs, errors.New("ProductName is empty"))
	}
	if o.Logger == nil {
		errs = append(errs, errors.New("Logger is nil"))
	}
	return errors.Join(errs...)
}

// Config configures an Exporter: Handler on its own listener. Start from
// DefaultConfig: the zero value is not valid.
type Config struct {
	// Listen is the TCP address of the metrics listener. Default
	// ":15692" (every address, IPv4 and IPv6), rabbitmq_prometheus's port; "127.0.0.1:0" in tests.
	Listen string

	// Options are passed to Handler.
	Options Options

	// TLS, when set, makes the endpoint serve HTTPS only, e.g. with
	// server.Server.TLSConfig(). Nil, the default, serves plain HTTP.
	TLS *tls.Config

	// ReadHeaderTimeout bounds how long a client may take to send request
	// headers. Default 10 s.
	ReadHeaderTimeout time.Duration

	// WriteTimeout bounds one scrape's response. Per-object scrapes of very
	// many queues take long (RabbitMQ users raise this for 100k queues).
	// Default 60 s.
	WriteTimeout time.Duration

	// ReadTimeout bounds reading a whole request, body included (scrapes
	// have none). Default 30 s.
	ReadTimeout time.Duration

	// IdleTimeout closes keep-alive connections idle this long. Default 2 min.
	IdleTimeout time.Duration

	// MaxConnections caps the connections served at once; more wait in the
	// listen queue. Each also counts against the broker's socket share.
	// Default 32.
	MaxConnections int

	// ShutdownTimeout is how long Close waits for scrapes in progress before
	// cutting their connections. Default 5 s.
	ShutdownTimeout time.Duration
}

// DefaultConfig returns a configuration listening on RabbitMQ's metrics port.
func DefaultConfig() Config {
	return Config{
		Listen:            ":15692",
		Options:           DefaultOptions(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxConnections:    32,
		ShutdownTimeout:   5 * time.Second,
	}
}

// Validate reports every invalid setting.
func (c *Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("Listen is empty"))
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("Listen %q: %w", c.Listen, err))
	}
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil {
		errs = append(errs, errors.New("TLS has no certificate"))
	}
	if c.ReadHeaderTimeout <= 0 {
		errs = append(errs, errors.New("ReadHeaderTimeout must be positive"))
	}
	if c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("WriteTimeout must be positive"))
	}
	if c.ReadTimeout <= 0 {
		errs = append(errs, errors.New("ReadTimeout must be positive"))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, errors.New("IdleTimeout must be positive"))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("MaxConnections %d below 1", c.MaxConnections))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("ShutdownTimeout is negative"))
	}
	return errors.Join(errs...)
}
