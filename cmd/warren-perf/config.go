package main

import (
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Limits that keep a typo from asking for something absurd; they are far
// above what one load-generator process can use.
const (
	maxWorkers      = 10_000
	maxQueues       = 10_000
	maxBodySize     = 128 << 20 // RabbitMQ's and Warren's max message size
	maxConfirmWin   = 1 << 20
	maxPrefetch     = math.MaxUint16 // basic.qos prefetch-count is a short
	maxQueueNameLen = 255            // AMQP shortstr
)

// The AMQP clients publishers and consumers can use (Config.Client).
const (
	// clientFast is warren-perf's own client (wire.go, fastconn.go): it
	// batches many publishes per write and parses deliveries in place.
	clientFast = "fast"
	// clientAMQP091 is github.com/rabbitmq/amqp091-go, one write per
	// publish and a Go channel hop per delivery.
	clientAMQP091 = "amqp091"
)

// Config describes one run: the topology, the publishers and consumers, and
// when to stop. Build one with DefaultConfig and change fields; the zero
// value is not valid.
type Config struct {
	// Name labels the run in the summary (a scenario phase, for example).
	Name string
	// URL is the broker's AMQP URI, amqp:// or amqps://.
	URL string
	// SetupURL, if not "", is where the topology is declared and deleted
	// instead of URL: in a cluster, the node a queue is declared on
	// leads it (client-local placement), which need not be the node the
	// workers talk to.
	SetupURL string
	// Publishers is the number of publishers, each with its own connection.
	Publishers int
	// Consumers is the number of consumers, each with its own connection.
	Consumers int
	// Queues is the number of queues. Publisher i publishes to queue
	// i mod Queues and consumer j consumes from queue j mod Queues.
	Queues int
	// QueuePattern names the queues: fmt pattern with one %d, numbered
	// from 1. With a single queue a pattern without %d is the literal name.
	QueuePattern string
	// Exchange is the exchange to publish to; "" is the default exchange,
	// where the routing key is the queue name. Otherwise it is declared with
	// ExchangeType and every queue is bound to it with its own name as key.
	Exchange string
	// ExchangeType is direct, fanout or topic; used only when Exchange != "".
	ExchangeType string
	// Size is the body size in bytes.
	Size int
	// Confirm is the publisher-confirm window: at most this many
	// unconfirmed messages per publisher. 0 disables confirms.
	Confirm int
	// Persistent publishes with delivery mode 2.
	Persistent bool
	// Durable declares durable queues (and a durable exchange).
	Durable bool
	// Prefetch is the per-consumer basic.qos prefetch count; 0 = unlimited.
	Prefetch int
	// AutoAck consumes in no-ack mode.
	AutoAck bool
	// MultiAckEvery acks with multiple=true once every N deliveries; 0 or 1
	// acks each delivery on its own.
	MultiAckEvery int
	// Rate is the messages per second of each publisher; 0 = unlimited.
	Rate float64
	// Duration is how long the measured period lasts, after Warmup; 0 means
	// until the message counts are reached or the context ends.
	Duration time.Duration
	// Warmup is run time before the measured period; its messages count in
	// the totals but not in rates or latencies.
	Warmup time.Duration
	// PMessages stops each publisher after that many messages; 0 = no limit.
	PMessages uint64
	// CMessages stops each consumer after that many messages; 0 = no limit.
	CMessages uint64
	// Predeclared skips declaring the exchange, queues and bindings; they
	// are checked with passive declares instead.
	Predeclared bool
	// Purge empties the queues before the run starts.
	Purge bool
	// DeleteQueues deletes the queues when the run ends.
	DeleteQueues bool
	// DrainTimeout bounds how long publishers wait for outstanding confirms
	// after they stop publishing.
	DrainTimeout time.Duration
	// Client is the AMQP client of publishers and consumers: clientFast
	// or clientAMQP091. Declarations always use amqp091-go.
	Client string
	// QueueArgs are the arguments of every queue declare, such as
	// x-queue-type: quorum; nil declares without arguments.
	QueueArgs amqp.Table
	// FailoverURLs are the other nodes of a cluster: a publisher or
	// consumer whose connection fails reconnects to them in turn and goes
	// on (fast client only). Empty: a failed connection fails the run.
	FailoverURLs []string
	// KillPID, when > 0, is sent SIGKILL KillAfter after the workers
	// start; the summary then times the first confirm and the first
	// delivery of a message published after the kill.
	KillPID   int
	KillAfter time.Duration
	// Progress receives one line per second while the run goes on; nil
	// prints nothing.
	Progress io.Writer
}

// DefaultConfig returns the settings warren-perf uses when no flag is given.
func DefaultConfig() Config {
	return Config{
		URL:          "amqp://guest:guest@localhost:5672/",
		Publishers:   1,
		Consumers:    1,
		Queues:       1,
		QueuePattern: "perf-%d",
		ExchangeType: "direct",
		Size:         16,
		Prefetch:     1000,
		DrainTimeout: 10 * time.Second,
		Client:       clientFast,
	}
}

// Validate reports the first setting that is out of range or contradicts
// another, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return bad("--url %q: %v", redactURL(c.URL), err)
	}
	if c.SetupURL != "" {
		if _, err := amqp.ParseURI(c.SetupURL); err != nil {
			return bad("--setup-url %q: %v", redactURL(c.SetupURL), err)
		}
	}
	if err := validateClient(c.Client); err != nil {
		return err
	}
	switch {
	case c.Publishers < 0 || c.Publishers > maxWorkers:
		return bad("--publishers %d: want 0..%d", c.Publishers, maxWorkers)
	case c.Consumers < 0 || c.Consumers > maxWorkers:
		return bad("--consumers %d: want 0..%d", c.Consumers, maxWorkers)
	case c.Publishers == 0 && c.Consumers == 0:
		return bad("no publishers and no consumers: nothing to do")
	case c.Queues < 1 || c.Queues > maxQueues:
		return bad("--queues %d: want 1..%d", c.Queues, maxQueues)
	case c.Size < 0 || c.Size > maxBodySize:
		return bad("--size %d: want 0..%d", c.Size, maxBodySize)
	case c.Confirm < 0 || c.Confirm > maxConfirmWin:
		return bad("--confirm %d: want 0..%d", c.Confirm, maxConfirmWin)
	case c.Prefetch < 0 || c.Prefetch > maxPrefetch:
		return bad("--prefetch %d: want 0..%d", c.Prefetch, maxPrefetch)
	case c.MultiAckEvery < 0:
		return bad("--multi-ack-every %d: want >= 0", c.MultiAckEvery)
	case c.AutoAck && c.MultiAckEvery > 1:
		return bad("--multi-ack-every needs manual acks, not --autoack")
	case !c.AutoAck && c.Prefetch > 0 && c.MultiAckEvery > c.Prefetch:
		// The broker would stop at Prefetch unacked deliveries and the
		// consumer would wait for more before acking: a deadlock.
		return bad("--multi-ack-every %d exceeds --prefetch %d: consumers would stall", c.MultiAckEvery, c.Prefetch)
	case math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate < 0:
		return bad("--rate %v: want a finite number >= 0", c.Rate)
	case c.Duration < 0:
		return bad("--duration %v: want >= 0", c.Duration)
	case c.Warmup < 0:
		return bad("--warmup %v: want >= 0", c.Warmup)
	case c.DrainTimeout <= 0:
		return bad("drain timeout %v: want > 0", c.DrainTimeout)
	}
	if c.Exchange == "" {
		if c.ExchangeType != "" && c.ExchangeType != "direct" {
			return bad("--exchange-type %s needs --exchange: the default exchange is direct", c.ExchangeType)
		}
	} else {
		switch c.ExchangeType {
		case "direct", "fanout", "topic":
		default:
			return bad("--exchange-type %q: want direct, fanout or topic", c.ExchangeType)
		}
		if len(c.Exchange) > maxQueueNameLen {
			return bad("--exchange: name longer than %d bytes", maxQueueNameLen)
		}
	}
	if err := c.validateFailover(); err != nil {
		return err
	}
	return validatePattern(c.QueuePattern, c.Queues)
}

// validateFailover checks the failover settings.
func (c Config) validateFailover() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	for _, u := range c.FailoverURLs {
		if _, err := amqp.ParseURI(u); err != nil {
			return bad("--failover-urls %q: %v", redactURL(u), err)
		}
	}
	switch {
	case len(c.FailoverURLs) > 0 && c.Client != clientFast:
		return bad("--failover-urls needs --client %s", clientFast)
	case len(c.FailoverURLs) > 0 && (c.PMessages > 0 || c.CMessages > 0):
		// A reconnected worker cannot know which of its messages counted.
		return bad("--failover-urls runs end by --duration, not message counts")
	case c.KillPID < 0:
		return bad("--kill-pid %d: want > 0", c.KillPID)
	case c.KillPID > 0 && c.KillAfter <= 0:
		return bad("--kill-pid needs --kill-after > 0")
	case c.KillPID == 0 && c.KillAfter != 0:
		return bad("--kill-after needs --kill-pid")
	}
	return nil
}

// validateClient checks a --client value.
func validateClient(client string) error {
	if client != clientFast && client != clientAMQP091 {
		return fmt.Errorf("%w: --client %q: want %s or %s", ErrInvalidConfig, client, clientFast, clientAMQP091)
	}
	return nil
}

// validatePattern checks that pattern yields distinct, legal queue names.
func validatePattern(pattern string, queues int) error {
	if pattern == "" {
		return fmt.Errorf("%w: --queue-pattern is empty", ErrInvalidConfig)
	}
	verbs := strings.Count(pattern, "%")
	hasD := strings.Count(pattern, "%d") == 1 && verbs == 1
	if !hasD && verbs > 0 {
		return fmt.Errorf("%w: --queue-pattern %q: want exactly one %%d and no other %%", ErrInvalidConfig, pattern)
	}
	if !hasD && queues > 1 {
		return fmt.Errorf("%w: --queue-pattern %q has no %%d but --queues is %d", ErrInvalidConfig, pattern, queues)
	}
	if n := len(queueName(pattern, queues)); n > maxQueueNameLen {
		return fmt.Errorf("%w: --queue-pattern gives names of %d bytes, max %d", ErrInvalidConfig, n, maxQueueNameLen)
	}
	return nil
}

// queueName returns the name of queue i (numbered from 1).
func queueName(pattern string, i int) string {
	if !strings.Contains(pattern, "%d") {
		return pattern
	}
	return fmt.Sprintf(pattern, i)
}

// queueNames returns the names of all c.Queues queues.
func (c Config) queueNames() []string {
	names := make([]string, c.Queues)
	for i := range names {
		names[i] = queueName(c.QueuePattern, i+1)
	}
	return names
}

// routesPerMessage is how many queues one published message reaches with
// the topology warren-perf declares.
func (c Config) routesPerMessage() uint64 {
	if c.Exchange != "" && c.ExchangeType == "fanout" {
		return uint64(c.Queues)
	}
	return 1
}

// setupURL is where the topology is declared and deleted.
func (c Config) setupURL() string {
	if c.SetupURL != "" {
		return c.SetupURL
	}
	return c.URL
}

// redactURL hides the password of an AMQP URI for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
