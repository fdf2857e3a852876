package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// scenarioOptions are the settings a scenario takes from the command line.
type scenarioOptions struct {
	url      string
	duration time.Duration
	warmup   time.Duration
	messages uint64 // backlog only
	client   string // Config.Client
	// brokerPID, when set, is the local broker process whose peak RSS each
	// phase reports.
	brokerPID int
	// idleQueues and idleConns size the idle scenario.
	idleQueues, idleConns int
	json                  bool
	quiet                 bool
}

// defaultScenarioOptions returns the scenario flags' defaults.
func defaultScenarioOptions() scenarioOptions {
	return scenarioOptions{url: DefaultConfig().URL, duration: 30 * time.Second, messages: 1_000_000, client: clientFast,
		idleQueues: 10_000, idleConns: 1_000}
}

// scenario is a named preset of one or more runs.
type scenario struct {
	name        string
	description string
	// phases builds the runs, in order.
	phases func(o scenarioOptions) []Config
	// exchange is the exchange the scenario declares, deleted at the end.
	exchange string
	// next, if set, adjusts a phase from the summary of the phase before.
	next func(prev Summary, cfg *Config)
	// custom, if set, runs the scenario instead of phases (one summary) and
	// returns the queues to delete.
	custom func(ctx context.Context, o scenarioOptions, progress io.Writer) (Summary, []string, error)
}

// ScenarioResult is the outcome of a scenario: one summary per phase.
type ScenarioResult struct {
	// Scenario is the preset's name.
	Scenario string `json:"scenario"`
	// Phases holds the summary of every phase that ran, in order.
	Phases []Summary `json:"phases"`
}

// scenarioBase is a single-queue run with the scenario's URL and timing.
func scenarioBase(o scenarioOptions, name, pattern string) Config {
	c := DefaultConfig()
	c.Name = name
	c.URL = o.url
	c.Duration = o.duration
	c.Warmup = o.warmup
	c.Client = o.client
	c.QueuePattern = pattern
	c.Purge = true // leftovers of an interrupted run would skew the figures
	return c
}

// persistentConfig is the "persistent" preset: durable queue, persistent
// 1 KiB messages, confirm window 256, manual acks, prefetch 100.
func persistentConfig(o scenarioOptions, name, pattern string) Config {
	c := scenarioBase(o, name, pattern)
	c.Durable = true
	c.Persistent = true
	c.Size = 1024
	c.Confirm = 256
	c.Prefetch = 100
	return c
}

// fanoutExchange is the fanout scenario's exchange.
const fanoutExchange = "warren-perf-fanout"

// scenarios lists the presets in the order `scenario list` shows them.
var scenarios = []scenario{
	{
		name:        "transient",
		description: "1 publisher, 1 consumer, autoack, 16-byte bodies, non-durable queue",
		phases: func(o scenarioOptions) []Config {
			c := scenarioBase(o, "transient", "warren-perf-transient")
			c.Size = 16
			c.AutoAck = true
			c.Prefetch = 0
			return []Config{c}
		},
	},
	{
		name:        "persistent",
		description: "1 publisher, 1 consumer, durable queue, persistent 1 KiB, confirm window 256, manual ack, prefetch 100",
		phases: func(o scenarioOptions) []Config {
			return []Config{persistentConfig(o, "persistent", "warren-perf-persistent")}
		},
	},
	{
		name:        "persistent-4x4",
		description: "as persistent with 4 publishers, 4 consumers and 4 queues",
		phases: func(o scenarioOptions) []Config {
			c := persistentConfig(o, "persistent-4x4", "warren-perf-4x4-%d")
			c.Publishers, c.Consumers, c.Queues = 4, 4, 4
			return []Config{c}
		},
	},
	{
		name:        "latency",
		description: "as persistent at a fixed 2,000 msg/s: end-to-end latency under moderate load",
		phases: func(o scenarioOptions) []Config {
			c := persistentConfig(o, "latency", "warren-perf-latency")
			c.Rate = 2000
			return []Config{c}
		},
	},
	{
		name:        "fanout",
		description: "1 persistent 1 KiB publisher (confirm window 256) to a fanout exchange bound to 10 durable queues, 10 consumers",
		exchange:    fanoutExchange,
		phases: func(o scenarioOptions) []Config {
			c := persistentConfig(o, "fanout", "warren-perf-fanout-%d")
			c.Exchange, c.ExchangeType = fanoutExchange, "fanout"
			c.Queues, c.Consumers = 10, 10
			return []Config{c}
		},
	},
	{
		name: "backlog",
		description: "fill one durable queue with --messages persistent 1 KiB messages (confirm window 256, no consumers), " +
			"then drain it with one consumer (prefetch 100, manual ack); fill and drain rates reported separately; " +
			"--duration does not apply",
		phases: func(o scenarioOptions) []Config {
			fill := persistentConfig(o, "fill", "warren-perf-backlog")
			fill.Consumers = 0
			fill.PMessages = o.messages
			fill.Duration, fill.Warmup = 0, 0
			drain := persistentConfig(o, "drain", "warren-perf-backlog")
			drain.Publishers = 0
			drain.CMessages = o.messages
			drain.Predeclared = true
			drain.Purge = false
			drain.Duration, drain.Warmup = 0, 0
			return []Config{fill, drain}
		},
		// Drain what the broker confirmed, not what was asked for: a nacked
		// message is not in the queue and would be waited for forever.
		next: func(prev Summary, cfg *Config) {
			if cfg.CMessages > prev.Confirmed {
				cfg.CMessages = prev.Confirmed
			}
		},
	},
}

// idleScenario is the preset for many idle queues and connections.
var idleScenario = scenario{
	name: "idle",
	description: "declare --queues durable queues (default 10,000) and open --connections idle connections " +
		"(default 1,000) with a channel each, hold them for --duration; reports declare time and, with --broker-pid, broker RSS",
	custom: runIdle,
}

func init() { scenarios = append(scenarios, idleScenario) }

// findScenario returns the preset called name.
func findScenario(name string) (scenario, error) {
	for _, s := range scenarios {
		if s.name == name {
			return s, nil
		}
	}
	return scenario{}, fmt.Errorf("%w %q (warren-perf scenario list shows them)", ErrUnknownScenario, name)
}

// runScenario runs the phases of sc in order, stopping at the first error
// or when ctx ends, then deletes what the scenario declared.
func runScenario(ctx context.Context, sc scenario, o scenarioOptions, progress io.Writer) (ScenarioResult, error) {
	res := ScenarioResult{Scenario: sc.name, Phases: []Summary{}}
	if sc.custom != nil {
		rss := startRSSSampler(o.brokerPID)
		sum, queues, err := sc.custom(ctx, o, progress)
		peak, rerr := rss.finish()
		sum.BrokerRSSKiB = peak
		res.Phases = append(res.Phases, sum)
		if len(queues) > 0 {
			err = errors.Join(err, deleteTopology(o.url, sc.exchange, queues))
		}
		return res, errors.Join(err, rerr)
	}
	cfgs := sc.phases(o)
	seen := map[string]bool{}
	var queues []string
	var err error
	for i, cfg := range cfgs {
		if i > 0 && ctx.Err() != nil {
			break
		}
		if i > 0 && sc.next != nil {
			sc.next(res.Phases[len(res.Phases)-1], &cfg)
			if cfg.CMessages == 0 && cfg.Publishers == 0 {
				break // nothing was confirmed, so there is nothing to drain
			}
		}
		cfg.Progress = progress
		if verr := cfg.Validate(); verr != nil {
			err = verr
			break
		}
		for _, q := range cfg.queueNames() {
			if !seen[q] {
				seen[q] = true
				queues = append(queues, q)
			}
		}
		if progress != nil && len(cfgs) > 1 {
			if _, werr := fmt.Fprintf(progress, "phase %s\n", cfg.Name); werr != nil {
				err = fmt.Errorf("progress output: %w", werr)
				break
			}
		}
		rss := startRSSSampler(o.brokerPID)
		sum, rerr := run(ctx, cfg)
		peak, serr := rss.finish()
		sum.BrokerRSSKiB = peak
		rerr = errors.Join(rerr, serr)
		if sum.ran() {
			res.Phases = append(res.Phases, sum)
		}
		if rerr != nil {
			err = rerr
			break
		}
	}
	// Delete only if something ran: a failed setup may have met queues
	// that were there before and are not ours to delete.
	if len(res.Phases) > 0 {
		err = errors.Join(err, deleteTopology(o.url, sc.exchange, queues))
	}
	return res, err
}

// writeText prints every phase for people.
func (r ScenarioResult) writeText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "scenario %s\n", r.Scenario); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	for _, s := range r.Phases {
		if err := s.writeText(w); err != nil {
			return err
		}
	}
	return nil
}
