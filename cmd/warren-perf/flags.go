package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// options is everything the command line sets: the run's Config plus how
// to print the result.
type options struct {
	cfg   Config
	json  bool
	quiet bool
}

// flagDoc is one line of -h output.
type flagDoc struct {
	names []string // long name first, then aliases
	arg   string   // placeholder for the value; "" for booleans
	usage string
}

// docFlags wraps a flag.FlagSet so that every flag is registered together
// with its help line and its aliases.
type docFlags struct {
	fs   *flag.FlagSet
	docs []flagDoc
}

func newDocFlags(name string, out io.Writer) *docFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return &docFlags{fs: fs}
}

func (d *docFlags) add(names []string, arg, usage string, def any, reg func(name string)) {
	for _, n := range names {
		reg(n)
	}
	switch v := def.(type) {
	case string:
		if v != "" {
			usage += fmt.Sprintf(" (default %q)", v)
		}
	default:
		if s := fmt.Sprint(v); s != "0" && s != "0s" && s != "false" {
			usage += " (default " + s + ")"
		}
	}
	d.docs = append(d.docs, flagDoc{names: names, arg: arg, usage: usage})
}

func (d *docFlags) str(p *string, names []string, arg, usage string) {
	d.add(names, arg, usage, *p, func(n string) { d.fs.StringVar(p, n, *p, usage) })
}

func (d *docFlags) int(p *int, names []string, arg, usage string) {
	d.add(names, arg, usage, *p, func(n string) { d.fs.IntVar(p, n, *p, usage) })
}

func (d *docFlags) uint64(p *uint64, names []string, arg, usage string) {
	d.add(names, arg, usage, *p, func(n string) { d.fs.Uint64Var(p, n, *p, usage) })
}

func (d *docFlags) float(p *float64, names []string, arg, usage string) {
	d.add(names, arg, usage, *p, func(n string) { d.fs.Float64Var(p, n, *p, usage) })
}

func (d *docFlags) bool(p *bool, names []string, usage string) {
	d.add(names, "", usage, *p, func(n string) { d.fs.BoolVar(p, n, *p, usage) })
}

func (d *docFlags) duration(p *time.Duration, names []string, arg, usage string) {
	d.add(names, arg, usage, *p, func(n string) { d.fs.DurationVar(p, n, *p, usage) })
}

// printDocs writes the flag table.
func (d *docFlags) printDocs(w io.Writer) {
	for _, doc := range d.docs {
		var parts []string
		for i := len(doc.names) - 1; i >= 1; i-- { // short aliases first
			parts = append(parts, "-"+doc.names[i])
		}
		parts = append(parts, "--"+doc.names[0])
		left := strings.Join(parts, ", ")
		if doc.arg != "" {
			left += " " + doc.arg
		}
		fmt.Fprintf(w, "  %-28s %s\n", left, doc.usage)
	}
}

// parse parses args and rejects positional arguments. It returns
// flag.ErrHelp for -h after printing the usage.
func (d *docFlags) parse(args []string) error {
	if err := d.fs.Parse(args); err != nil {
		return err
	}
	if d.fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrInvalidConfig, d.fs.Arg(0))
	}
	return nil
}

const mainUsageHead = `Usage: warren-perf [flags]
       warren-perf scenario NAME [flags]    (warren-perf scenario list; warren-perf scenario -h)
       warren-perf probe --queue Q [--url U] [--timeout D] [--json]
                                            (time until a starting broker delivers Q's first message)

warren-perf is a load generator for any AMQP 0-9-1 broker (Warren, RabbitMQ).
Every publisher and consumer has its own connection. Messages carry their
publish time, so the consumers measure end-to-end latency. One progress line
is printed per second, a summary at the end (and on Ctrl-C).

Flags:
`

// clientUsage is the help line of --client, in both flag sets.
const clientUsage = "AMQP client of publishers and consumers: fast (built in: many publishes per write, " +
	"deliveries parsed in place) or amqp091 (github.com/rabbitmq/amqp091-go)"

// runFlags registers the flags of a plain run on a new flag set whose
// defaults come from o.
func runFlags(o *options, out io.Writer) *docFlags {
	d := newDocFlags("warren-perf", out)
	c := &o.cfg
	d.str(&c.URL, []string{"url"}, "URL", "broker AMQP URI")
	d.str(&c.SetupURL, []string{"setup-url"}, "URL", "declare and delete the queues through this URI instead of --url (in a cluster the declaring node leads the queue)")
	d.int(&c.Publishers, []string{"publishers", "x"}, "N", "number of publishers, one connection each")
	d.int(&c.Consumers, []string{"consumers", "y"}, "N", "number of consumers, one connection each")
	d.int(&c.Queues, []string{"queues"}, "N", "number of queues; publisher i uses queue i mod N, consumer j queue j mod N")
	d.str(&c.QueuePattern, []string{"queue-pattern"}, "PATTERN", "queue names, one %d numbered from 1 (a single queue may have a literal name)")
	d.str(&c.Exchange, []string{"exchange"}, "NAME", `exchange to publish to; "" is the default exchange, otherwise it is declared and every queue bound with its name as key`)
	d.str(&c.ExchangeType, []string{"exchange-type"}, "TYPE", "type of --exchange: direct, fanout or topic")
	d.int(&c.Size, []string{"size", "s"}, "BYTES", "message body size; the first 8 bytes carry the publish time (a header does when smaller)")
	d.int(&c.Confirm, []string{"confirm", "c"}, "N", "publisher confirms with at most N unconfirmed messages per publisher; 0 = no confirms")
	d.bool(&c.Persistent, []string{"persistent"}, "publish persistent messages (delivery mode 2)")
	d.bool(&c.Durable, []string{"durable"}, "declare durable queues (and exchange)")
	d.int(&c.Prefetch, []string{"prefetch", "q"}, "N", "basic.qos prefetch count per consumer; 0 = unlimited")
	d.bool(&c.AutoAck, []string{"autoack", "a"}, "consume without acks")
	d.int(&c.MultiAckEvery, []string{"multi-ack-every", "A"}, "N", "ack with multiple=true once every N deliveries; 0 or 1 = ack each one")
	d.float(&c.Rate, []string{"rate", "r"}, "MSGS", "messages per second per publisher; 0 = unlimited")
	d.duration(&c.Duration, []string{"duration", "z"}, "D", "length of the measured period after --warmup, e.g. 30s; 0 = until message limits or Ctrl-C")
	d.duration(&c.Warmup, []string{"warmup"}, "D", "time run before the measured period; not counted in rates or latencies")
	d.uint64(&c.PMessages, []string{"pmessages", "C"}, "N", "stop each publisher after N messages; 0 = no limit")
	d.uint64(&c.CMessages, []string{"cmessages", "D"}, "N", "stop each consumer after N messages; 0 = no limit")
	d.bool(&c.Predeclared, []string{"predeclared"}, "do not declare exchange, queues or bindings; only check they exist")
	d.bool(&c.Purge, []string{"purge"}, "purge the queues before starting")
	d.bool(&c.DeleteQueues, []string{"delete-queues"}, "delete the queues on exit")
	d.duration(&c.DrainTimeout, []string{"drain-timeout"}, "D", "how long publishers wait for outstanding confirms after stopping")
	d.str(&c.Client, []string{"client"}, "NAME", clientUsage)
	d.add([]string{"queue-arg"}, "KEY=VALUE", "queue argument of every declare, repeatable, e.g. x-queue-type=quorum; "+
		"an integer or true/false value is sent as such, anything else as a string", "",
		func(n string) { d.fs.Var((*queueArgs)(&c.QueueArgs), n, "queue argument") })
	d.add([]string{"failover-urls"}, "URL,...", "other cluster nodes: a worker whose connection fails reconnects to them in turn (fast client)", "",
		func(n string) { d.fs.Var((*urlList)(&c.FailoverURLs), n, "failover URLs") })
	d.int(&c.KillPID, []string{"kill-pid"}, "PID", "kill -9 this process --kill-after into the run and time the first confirm and delivery of a message published after it")
	d.duration(&c.KillAfter, []string{"kill-after"}, "D", "when --kill-pid is killed, from the start of the run")
	d.bool(&o.json, []string{"json"}, "print the summary as one JSON object (progress lines go to stderr)")
	d.bool(&o.quiet, []string{"quiet"}, "no per-second progress lines")
	d.fs.Usage = func() {
		fmt.Fprint(d.fs.Output(), mainUsageHead)
		d.printDocs(d.fs.Output())
	}
	return d
}

// parseFlags parses the flags of a plain run (no subcommand). Usage and
// errors are written to out. It returns flag.ErrHelp for -h.
func parseFlags(args []string, out io.Writer) (options, error) {
	o := options{cfg: DefaultConfig()}
	d := runFlags(&o, out)
	if err := d.parse(args); err != nil {
		return o, err
	}
	if err := o.cfg.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// queueArgs is the --queue-arg flag: KEY=VALUE into an amqp.Table.
type queueArgs amqp.Table

func (q *queueArgs) String() string { return fmt.Sprint(map[string]any(*q)) }

func (q *queueArgs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%w: --queue-arg %q: want KEY=VALUE", ErrInvalidConfig, s)
	}
	if *q == nil {
		*q = queueArgs{}
	}
	// Brokers check types: x-quorum-initial-group-size must be an
	// integer, x-queue-type a string.
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		(*q)[k] = n
	} else if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
		(*q)[k] = b
	} else {
		(*q)[k] = v
	}
	return nil
}

// urlList is a comma-separated list flag.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }

func (u *urlList) Set(s string) error {
	*u = nil
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*u = append(*u, part)
		}
	}
	return nil
}
