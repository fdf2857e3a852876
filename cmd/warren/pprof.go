package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startPprof serves Go's profiler (CPU, heap, allocations, blocking, mutex,
// goroutines) on addr, on a mux of its own so it is never exposed on the
// management port by accident. It is off by default: profiles reveal the
// broker's internals and cost CPU while they run, so operators turn it on, on
// a loopback address, when they measure. It returns a function that stops it.
func startPprof(addr string, log *slog.Logger) (func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// A CPU profile or trace streams for its whole duration: no write timeout.
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { // owned by the returned stop function, which waits for it
		defer close(done)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof listener stopped", "err", err)
		}
	}()
	log.Info("pprof started", "addr", ln.Addr().String())
	return func() error {
		err := hs.Close()
		<-done
		return err
	}, nil
}
