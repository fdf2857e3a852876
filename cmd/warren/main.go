// Command warren runs the Warren AMQP 0-9-1 broker.
//
//	go run ./cmd/warren                  # embedded defaults: AMQP on :5672, data in ./data
//	go run ./cmd/warren --config warren.yaml --log-format json
//
// Every setting is a flag, a WARREN_* environment variable (dashes become
// underscores: WARREN_AMQP_LISTEN) and a key of the YAML file given with --config.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

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
	cfg, _, showVersion, err := loadConfig(args, stderr)
	if showVersion {
		fmt.Fprintf(stdout, "warren %s\n", version)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "warren: %v\n", err)
		return 2
	}
	cfg.ProductVersion = version
	srv, err := server.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "warren: %v\n", err)
		return 1
	}
	if err := srv.Start(); err != nil {
		fmt.Fprintf(stderr, "warren: %v\n", err)
		return 1
	}
	sig := <-sigs
	cfg.Logger.Info("shutting down", "signal", sig.String())
	if err := srv.Close(); err != nil {
		cfg.Logger.Warn("closing listener", "err", err)
	}
	return 0
}
