package mgmt

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/warrenmq/warren/server"
)

// Config configures the management API. Start from DefaultConfig and set
// Server; the zero value is not valid.
type Config struct {
	// Listen is the TCP address of the HTTP listener, e.g. ":15672" (every address, IPv4 and IPv6).
	// Use "127.0.0.1:0" in tests for a free port.
	Listen string

	// Server is the broker the API manages. Required.
	Server *server.Server

	// Logger receives the API's logs. Default slog.Default().
	Logger *slog.Logger

	// ProductName is reported as product_name. Default "Warren".
	ProductName string

	// StatsInterval is how often the sampler reads the counters and turns
	// them into rates. Default 5 s (rabbit-hole waits 5 s for statistics);
	// between 10 ms and 1 min.
	StatsInterval time.Duration

	// StatsHistory is how many samples the overview and each vhost keep for
	// charts. Default 120 (10 minutes at 5 s); at most 10,000.
	StatsHistory int

	// ObjectHistory is how many samples each queue, exchange, connection and
	// channel keeps; it bounds the sampler's memory with many objects.
	// Default 12 (one minute at 5 s); between 2 and 1,000.
	ObjectHistory int

	// MaxBodyBytes bounds request bodies (definitions imports are the
	// largest). Default 64 MiB.
	MaxBodyBytes int64

	// TLS, when set, makes the API serve HTTPS only, e.g. with
	// server.Server.TLSConfig(). Nil, the default, serves plain HTTP.
	TLS *tls.Config

	// UI, when set, serves every path outside /api (the web UI).
	UI http.Handler

	// Shovels, when set, is the shovel runner whose status /api/shovels
	// shows (cmd/warren sets the shovel package's Manager). Unset, the
	// list is empty.
	Shovels Shovels

	// Federation, when set, is the federation runner whose links
	// /api/federation-links shows (cmd/warren sets the federation
	// package's Manager). Unset, the list is empty.
	Federation Federation

	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// HTTP server's timeouts. ReadTimeout bounds a whole request, body
	// included, so a client announcing a body it never sends is cut off;
	// it is generous for importing large definitions, and WriteTimeout for
	// exporting them. Defaults 10 s, 2 min, 5 min and 2 min.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration

	// MaxConnections caps the HTTP connections served at once; more wait
	// in the listen queue until one closes. Every connection also counts
	// against the broker's socket share (server.Server.SocketListener).
	// Default 128.
	MaxConnections int
}

// DefaultConfig returns the defaults; Server must still be set.
func DefaultConfig() Config {
	return Config{
		Listen:            ":15672",
		Logger:            slog.Default(),
		ProductName:       "Warren",
		StatsInterval:     5 * time.Second,
		StatsHistory:      120,
		ObjectHistory:     12,
		MaxBodyBytes:      64 << 20,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxConnections:    128,
	}
}

// Validate reports every invalid setting, wrapped in ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("Listen is empty"))
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("Listen %q: %w", c.Listen, err))
	}
	if c.Server == nil {
		errs = append(errs, errors.New("Server is nil"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("Logger is nil"))
	}
	if c.ProductName == "" {
		errs = append(errs, errors.New("ProductName is empty"))
	}
	if c.StatsInterval < 10*time.Millisecond || c.StatsInterval > time.Minute {
		errs = append(errs, fmt.Errorf("StatsInterval %s out of range 10ms..1m", c.StatsInterval))
	}
	if c.StatsHistory < 2 || c.StatsHistory > 10000 {
		errs = append(errs, fmt.Errorf("StatsHistory %d out of range 2..10000", c.StatsHistory))
	}
	if c.ObjectHistory < 2 || c.ObjectHistory > 1000 {
		errs = append(errs, fmt.Errorf("ObjectHistory %d out of range 2..1000", c.ObjectHistory))
	}
	if c.TLS != nil && len(c.TLS.Certificates) == 0 && c.TLS.GetCertificate == nil {
		errs = append(errs, errors.New("TLS has no certificate"))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("MaxBodyBytes %d below 1 KiB", c.MaxBodyBytes))
	}
	if c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0 {
		errs = append(errs, errors.New("HTTP timeouts must be positive"))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("MaxConnections %d below 1", c.MaxConnections))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}
