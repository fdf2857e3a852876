package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// probeRetryEvery is how often probe retries while the broker does not
// answer or the queue is still empty.
const probeRetryEvery = 10 * time.Millisecond

// probeResult is what `warren-perf probe --json` prints.
type probeResult struct {
	Queue string `json:"queue"`
	// Seconds is the time from the probe's start to its first delivery.
	Seconds float64 `json:"seconds"`
	// Attempts counts connection attempts and basic.gets that failed or
	// came back empty before the delivery.
	Attempts int `json:"attempts"`
}

// probeMain runs `warren-perf probe`: it measures how long a broker that is
// starting (or recovering) takes to deliver the first message of a queue.
// It connects and tries basic.get until a message comes back, which it
// returns to the queue (basic.reject with requeue), and prints the time
// since it started. bench/compare.sh starts a broker and this probe
// together to time a restart.
func probeMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("warren-perf probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", DefaultConfig().URL, "broker AMQP URI")
	queue := fs.String("queue", "", "queue to take the first message from (required)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return usageExit(err, stderr)
	}
	if *queue == "" || *timeout <= 0 {
		fmt.Fprintln(stderr, "warren-perf probe: --queue is required and --timeout must be positive")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := probeFirstDelivery(ctx, *url, *queue)
	if err != nil {
		fmt.Fprintf(stderr, "warren-perf probe: %v\n", err)
		return exitFail
	}
	if *asJSON {
		err = json.NewEncoder(stdout).Encode(res)
	} else {
		_, err = fmt.Fprintf(stdout, "first delivery from %s after %.3f s (%d attempts before)\n", res.Queue, res.Seconds, res.Attempts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "warren-perf probe: %v\n", err)
		return exitFail
	}
	return exitOK
}

// probeFirstDelivery retries until queue delivers a message or ctx ends.
func probeFirstDelivery(ctx context.Context, url, queue string) (probeResult, error) {
	start := time.Now()
	res := probeResult{Queue: queue}
	var last error
	for {
		ok, err := probeOnce(url, queue)
		if ok {
			res.Seconds = time.Since(start).Seconds()
			return res, nil
		}
		res.Attempts++
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("queue stayed empty")
			}
			return res, fmt.Errorf("no delivery from %s within the timeout: %w", queue, last)
		case <-time.After(probeRetryEvery):
		}
	}
}

// probeOnce connects, takes one message from queue and puts it back.
func probeOnce(url, queue string) (bool, error) {
	conn, ch, err := openChannel(url, "probe")
	if err != nil {
		return false, err
	}
	defer conn.close()
	d, ok, err := ch.Get(queue, false)
	if err != nil || !ok {
		return false, err
	}
	return true, d.Reject(true)
}
