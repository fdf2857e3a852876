package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/warrenmq/warren/server"
)

// Handler serves s's metrics in the Prometheus text format at /metrics
// (aggregated, or per object with Options.PerObject) and /metrics/per-object,
// alongside the Go runtime (go_*) and process (process_*) collectors. Other
// paths get 404. Responses are gzip-compressed when the scraper accepts it.
//
// Handler panics if opts is invalid (see Options.Validate): options are fixed
// by the program, so a bad one is a programming error, as a bad pattern is
// for http.Handle.
func Handler(s *server.Server, opts Options) http.Handler {
	if err := opts.Validate(); err != nil {
		panic(fmt.Sprintf("metrics: invalid options: %v", err))
	}
	t := newTally()
	defaultEndpoint := aggregated
	if opts.PerObject {
		defaultEndpoint = perObject
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", endpointHandler(s, opts, defaultEndpoint, t))
	mux.Handle("GET /metrics/per-object", endpointHandler(s, opts, perObject, t))
	mux.Handle("GET /metrics/detailed", detailedHandler(s, opts))
	return mux
}

// endpointHandler builds the registry and HTTP handler of one endpoint.
func endpointHandler(s *server.Server, opts Options, e endpoint, t *tally) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newCollector(s, opts, e, t),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: errorLogger{opts.Logger},
		// A statistic that cannot be read is logged and left out; the rest
		// of the scrape is still worth having.
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// errorLogger adapts slog to promhttp's Logger.
type errorLogger struct{ log *slog.Logger }

func (l errorLogger) Println(v ...any) { l.log.Warn("metrics scrape", "err", fmt.Sprint(v...)) }

// clientVersion is client_golang's version, a label of rabbitmq_build_info.
var clientVersion = clientGolangVersion()

// clientGolangVersion returns the version of client_golang linked in, for
// rabbitmq_build_info's prometheus_client_version.
func clientGolangVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/prometheus/client_golang" {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "unknown"
}

// Exporter serves Handler on its own TCP listener.
//
// Its one goroutine, the HTTP server's accept loop, is started by Start and
// stopped by Close, which waits for it.
type Exporter struct {
	cfg  Config
	srv  *server.Server
	http *http.Server

	mu      sync.Mutex // guards ln, started, closed
	ln      net.Listener
	started bool
	closed  bool
	wg      sync.WaitGroup
}

// New validates cfg and builds an exporter for s. Call Start to listen.
func New(s *server.Server, cfg Config) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("metrics: invalid config: %w", err)
	}
	return &Exporter{
		cfg: cfg,
		srv: s,
		http: &http.Server{
			Handler:           Handler(s, cfg.Options),
			ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			ReadTimeout:       cfg.ReadTimeout,
			WriteTimeout:      cfg.WriteTimeout,
			IdleTimeout:       cfg.IdleTimeout,
			ErrorLog:          slog.NewLogLogger(cfg.Options.Logger.Handler(), slog.LevelWarn),
		},
	}, nil
}

// Start listens on Config.Listen and serves scrapes in the background.
func (e *Exporter) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return ErrClosed
	case e.started:
		return ErrStarted
	}
	ln, err := net.Listen("tcp", e.cfg.Listen)
	if err != nil {
		return fmt.Errorf("metrics: listen %s: %w", e.cfg.Listen, err)
	}
	ln = netutil.LimitListener(e.srv.SocketListener(ln), e.cfg.MaxConnections)
	if e.cfg.TLS != nil {
		ln = tls.NewListener(ln, e.cfg.TLS)
	}
	e.ln, e.started = ln, true
	e.cfg.Options.Logger.Info("Prometheus metrics listener started", "addr", ln.Addr().String(), "tls", e.cfg.TLS != nil)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.cfg.Options.Logger.Error("metrics listener stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the listener's address (useful with port 0), or nil before
// Start.
func (e *Exporter) Addr() net.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln == nil {
		return nil
	}
	return e.ln.Addr()
}

// Close stops the listener, lets scrapes in progress finish for up to
// Config.ShutdownTimeout, then cuts them and waits for the serving goroutine.
// Calling it again, or before Start, is harmless.
func (e *Exporter) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	started := e.started
	e.mu.Unlock()
	if !started {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownTimeout)
	defer cancel()
	err := e.http.Shutdown(ctx)
	if err != nil {
		// Scrapes still running past the timeout: cut them.
		err = errors.Join(err, e.http.Close())
	}
	e.wg.Wait()
	if err != nil {
		return fmt.Errorf("metrics: close: %w", err)
	}
	return nil
}
