package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the broker refused something, or the run failed
	exitUsage = 2 // bad flags
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain is main without the process: it parses args, runs, prints, and
// returns the exit code.
func realMain(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, give signals back to the runtime so that a
	// second Ctrl-C kills a run that hangs in teardown.
	context.AfterFunc(ctx, stop)
	if len(args) > 0 && args[0] == "scenario" {
		return scenarioMain(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "probe" {
		return probeMain(ctx, args[1:], stdout, stderr)
	}
	return runMain(ctx, args, stdout, stderr)
}

// usageExit turns a flag-parsing error into an exit code. The flag package
// has already printed its own errors with the usage.
func usageExit(err error, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrUnknownScenario) {
		fmt.Fprintf(stderr, "warren-perf: %v\n", err)
	}
	return exitUsage
}

// progressWriter is where per-second lines go: nowhere with --quiet, stderr
// with --json (stdout carries only the JSON), else stdout.
func progressWriter(jsonOut, quiet bool, stdout, stderr io.Writer) io.Writer {
	switch {
	case quiet:
		return nil
	case jsonOut:
		return stderr
	default:
		return stdout
	}
}

// finish prints the result (if there is one) and the error (if any), and
// returns the exit code.
func finish(write func() error, haveResult bool, runErr error, stderr io.Writer) int {
	code := exitOK
	if haveResult {
		if err := write(); err != nil {
			fmt.Fprintf(stderr, "warren-perf: %v\n", err)
			code = exitFail
		}
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "warren-perf: %v\n", runErr)
		code = exitFail
	}
	return code
}

// runMain runs warren-perf without a subcommand.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return usageExit(err, stderr)
	}
	o.cfg.Progress = progressWriter(o.json, o.quiet, stdout, stderr)
	sum, err := run(ctx, o.cfg)
	return finish(func() error {
		if o.json {
			return writeJSON(stdout, sum)
		}
		return sum.writeText(stdout)
	}, sum.ran(), err, stderr)
}

const scenarioUsageHead = `Usage: warren-perf scenario NAME [flags]
       warren-perf scenario list

Runs a preset. Queues are named warren-perf-NAME... and deleted at the end.

Flags:
`

// scenarioFlags registers the scenario subcommand's flags.
func scenarioFlags(o *scenarioOptions, out io.Writer) *docFlags {
	d := newDocFlags("warren-perf scenario", out)
	d.str(&o.url, []string{"url"}, "URL", "broker AMQP URI")
	d.duration(&o.duration, []string{"duration", "z"}, "D", "length of the measured period")
	d.duration(&o.warmup, []string{"warmup"}, "D", "time run before the measured period")
	d.uint64(&o.messages, []string{"messages"}, "N", "backlog: number of messages to fill the queue with")
	d.str(&o.client, []string{"client"}, "NAME", clientUsage)
	d.int(&o.brokerPID, []string{"broker-pid"}, "PID", "a local broker process whose peak RSS each phase reports (from /proc)")
	d.int(&o.idleQueues, []string{"queues"}, "N", "idle: number of durable queues to declare")
	d.int(&o.idleConns, []string{"connections"}, "N", "idle: number of idle connections to hold")
	d.bool(&o.json, []string{"json"}, "print the result as one JSON object (progress lines go to stderr)")
	d.bool(&o.quiet, []string{"quiet"}, "no per-second progress lines")
	d.fs.Usage = func() {
		fmt.Fprint(d.fs.Output(), scenarioUsageHead)
		d.printDocs(d.fs.Output())
		fmt.Fprintln(d.fs.Output(), "\nScenarios:")
		writeScenarioList(d.fs.Output())
	}
	return d
}

// parseScenarioArgs parses `scenario NAME [flags]`; flags may also come
// before NAME. It returns flag.ErrHelp for -h.
func parseScenarioArgs(args []string, out io.Writer) (string, scenarioOptions, error) {
	o := defaultScenarioOptions()
	d := scenarioFlags(&o, out)
	if err := d.fs.Parse(args); err != nil {
		return "", o, err
	}
	if d.fs.NArg() == 0 {
		d.fs.Usage()
		return "", o, fmt.Errorf("%w: scenario: missing NAME", ErrInvalidConfig)
	}
	name := d.fs.Arg(0)
	if err := d.parse(d.fs.Args()[1:]); err != nil {
		return "", o, err
	}
	if name == "list" {
		return name, o, nil
	}
	if _, err := findScenario(name); err != nil {
		return "", o, err
	}
	if o.messages == 0 {
		return "", o, fmt.Errorf("%w: --messages must be > 0", ErrInvalidConfig)
	}
	if err := validateClient(o.client); err != nil {
		return "", o, err
	}
	return name, o, nil
}

// writeScenarioList prints every preset with its description.
func writeScenarioList(w io.Writer) {
	for _, s := range scenarios {
		fmt.Fprintf(w, "  %-16s %s\n", s.name, s.description)
	}
}

// scenarioMain runs the scenario subcommand.
func scenarioMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name, o, err := parseScenarioArgs(args, stderr)
	if err != nil {
		return usageExit(err, stderr)
	}
	if name == "list" {
		writeScenarioList(stdout)
		return exitOK
	}
	sc, err := findScenario(name)
	if err != nil {
		return usageExit(err, stderr)
	}
	res, err := runScenario(ctx, sc, o, progressWriter(o.json, o.quiet, stdout, stderr))
	return finish(func() error {
		if o.json {
			return writeJSON(stdout, res)
		}
		return res.writeText(stdout)
	}, len(res.Phases) > 0, err, stderr)
}
