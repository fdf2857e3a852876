// Command warren runs the Warren AMQP 0-9-1 broker.
//
//	go run ./cmd/warren                  # embedded defaults: AMQP on :5672, data in ./data
//	go run ./cmd/warren --config warren.yaml --log-format json
//
// Every setting is a flag, a WARREN_* environment variable (dashes become
// underscores: WARREN_AMQP_LISTEN) and a key of the YAML file given with --config.
package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/mgmt/metrics"
	"github.com/warrenmq/warren/mgmt/ui"
	"github.com/warrenmq/warren/server"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

var logOutput io.Writer = os.Stderr

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// run starts the broker and serves until a signal arrives on sigs.
func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	cfg, v, showVersion, err := loadConfig(args, stderr)
	if showVersion {
		fmt.Fprintf(stdout, "warren %s\n", version)
		return 0
	}
	if errors.Is(err, pflag.ErrHelp) {
		printUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "warren: %v (warren --help lists the keys)\n", err)
		return 2
	}
	cfg.ProductVersion = version
	srv, err := server.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "warren: %v\n", err)
		return 1
	}
	if path := v.GetString("load-definitions"); path != "" {
		if err := loadDefinitions(srv, path, v.GetString("load-definitions-skip-if-unchanged"), cfg.Logger); err != nil {
			fmt.Fprintf(stderr, "warren: %v\n", err)
			srv.Close()
			return 1
		}
	}
	static, err := staticShovels(v, srv)
	if err != nil {
		fmt.Fprintf(stderr, "warren: %v\n", err)
		srv.Close()
		return 1
	}
	if err := srv.Start(); err != nil {
		fmt.Fprintf(stderr, "warren: %v\n", listenKeyError(err))
		srv.Close()
		return 1
	}
	shovels := startShovels(srv, static, cfg.Logger)
	fed := startFederation(srv, cfg.Logger)
	stopHTTP, err := startHTTP(srv, cfg, v, shovels, fed)
	if err != nil {
		fmt.Fprintf(stderr, "warren: %v\n", err)
		fed.Close()
		shovels.Close()
		srv.Close()
		return 1
	}
	sig := <-sigs
	cfg.Logger.Info("shutting down", "signal", sig.String())
	stopHTTP()
	fed.Close()
	shovels.Close()
	if err := srv.Close(); err != nil {
		cfg.Logger.Warn("closing listener", "err", err)
	}
	return 0
}

// listenKeyError names the configuration key of a listener that could not
// be opened, so the operator knows which setting to change.
func listenKeyError(err error) error {
	var le *server.ListenError
	if !errors.As(err, &le) {
		return err
	}
	key := map[string]string{"AMQPListen": "amqp-listen", "AMQPSListen": "amqps-listen"}[le.Field]
	if key == "" {
		return err
	}
	return fmt.Errorf("%s %s: %w", key, le.Addr, le.Err)
}

// startHTTP starts the management API with the web UI and the Prometheus
// exporter, each unless its listen address is empty, and returns a function
// that stops them.
func startHTTP(srv *server.Server, cfg server.Config, v *viper.Viper, shovels mgmt.Shovels, fed mgmt.Federation) (func(), error) {
	var stops []func() error
	stop := func() {
		for _, f := range stops {
			if err := f(); err != nil {
				cfg.Logger.Warn("stopping an HTTP listener", "err", err)
			}
		}
	}
	if addr := v.GetString("pprof-listen"); addr != "" {
		stopPprof, err := startPprof(addr, cfg.Logger)
		if err != nil {
			return nil, err
		}
		stops = append(stops, stopPprof)
	}
	if addr := v.GetString("mgmt-listen"); addr != "" {
		mc := mgmt.DefaultConfig()
		mc.Listen, mc.Server, mc.Logger, mc.UI = addr, srv, cfg.Logger, ui.Handler()
		mc.Shovels, mc.Federation = shovels, fed
		mc.ReadTimeout, mc.WriteTimeout = v.GetDuration("mgmt-read-timeout"), v.GetDuration("mgmt-write-timeout")
		mc.MaxConnections = v.GetInt("mgmt-max-connections")
		tc, err := httpTLS(srv, v.GetBool("mgmt-tls"), "mgmt-tls")
		if err != nil {
			return nil, err
		}
		mc.TLS = tc
		api, err := mgmt.New(mc)
		if err == nil {
			err = api.Start()
		}
		if err != nil {
			return nil, fmt.Errorf("mgmt-listen %s: management API: %w", addr, err)
		}
		stops = append(stops, api.Close)
		cfg.Logger.Info("management API and web UI started", "addr", api.Addr().String())
	}
	if addr := v.GetString("metrics-listen"); addr != "" {
		mc := metrics.DefaultConfig()
		mc.Listen = addr
		mc.MaxConnections = v.GetInt("metrics-max-connections")
		mc.Options.Logger = cfg.Logger
		mc.Options.PerObject = v.GetBool("metrics-per-object")
		tc, err := httpTLS(srv, v.GetBool("metrics-tls"), "metrics-tls")
		if err != nil {
			stop()
			return nil, err
		}
		mc.TLS = tc
		exp, err := metrics.New(srv, mc)
		if err == nil {
			err = exp.Start()
		}
		if err != nil {
			stop()
			return nil, fmt.Errorf("metrics-listen %s: metrics: %w", addr, err)
		}
		stops = append(stops, exp.Close)
		cfg.Logger.Info("Prometheus metrics started", "addr", exp.Addr().String())
	}
	return stop, nil
}

// httpTLS returns the TLS configuration of an HTTP listener when on is set:
// the broker's certificate, without asking browsers and scrapers for client
// certificates (tls-verify-peer applies to AMQPS only).
func httpTLS(srv *server.Server, on bool, key string) (*tls.Config, error) {
	if !on {
		return nil, nil
	}
	tc := srv.TLSConfig()
	if tc == nil {
		return nil, fmt.Errorf("%s needs tls-cert and tls-key", key)
	}
	tc.ClientAuth = tls.NoClientCert
	tc.ClientCAs = nil
	return tc, nil
}
