// Command warren-perf is a load generator for AMQP 0-9-1 brokers, Warren or
// RabbitMQ, in the spirit of RabbitMQ's PerfTest and lavinmqperf. It
// declares a topology (queues, optionally an exchange and bindings), runs
// publishers and consumers against it, prints one progress line per second
// and a summary at the end: totals, publish/confirm/consume rates over the
// measured period and end-to-end latency percentiles. The subcommand
// `warren-perf scenario NAME` runs presets (transient, persistent,
// persistent-4x4, latency, fanout, backlog).
//
// The core is run(ctx, Config) (Summary, error), which tests call directly.
//
// # Invariants
//
//   - Every publisher and every consumer has its own connection and channel;
//     a setup connection declares the topology and a cleanup connection
//     deletes it.
//   - Every message carries its publish time in Unix nanoseconds: in the
//     first 8 bytes of the body (big-endian) when the body has 8 bytes or
//     more, else in the x-warren-perf-ts header. Latency is delivery time
//     minus that, measured by the consumer.
//   - Memory does not grow with the number of messages: latencies go to
//     fixed-size log-linear histograms (about 58 KiB each: two per consumer,
//     three in the reporter), counters are atomics, and each publisher
//     reuses one body buffer.
//   - Totals cover the whole run; rates and latencies cover only the
//     measured period, which starts when --warmup ends. A run that ends by
//     message counts ends its measured period at the last worker's own
//     finishing time (last confirm, last delivery), not at the next poll.
//   - Goroutines: one per publisher (plus one reading its confirms, which
//     the publisher waits for), one per consumer, and one waiter per group
//     while stopping. The reporter runs on the caller's goroutine. When the
//     run ends publishers are stopped first (they drain their confirms for
//     up to --drain-timeout), then consumers; a worker still blocked after
//     its grace period has its socket closed under it.
//
// # Caveats
//
//   - Latency compares two clocks; it is only meaningful when publishers and
//     consumers run on the same host (they do in one warren-perf process)
//     or on hosts with synchronised clocks. A negative value counts as 0.
//   - Without confirms, the publish rate is how fast the client writes to
//     its socket; a broker under flow control shows it as a stall, and the
//     queue (and latency) grows without bound if consumers are slower.
//   - amqp091-go buffers deliveries in the client without limit; with
//     --autoack or --prefetch 0 a slow consumer's process memory can grow.
//   - When publishers stop after --pmessages and consumers have no
//     --cmessages, the consumers stop once they received published x routes
//     messages, where routes is the number of queues for a fanout exchange
//     and 1 otherwise. With --predeclared and other bindings this may never
//     happen; --duration or Ctrl-C still ends the run.
//   - Messages left in a queue by an earlier run are consumed and measured
//     like new ones; use --purge (scenarios purge and delete their queues).
//   - In the backlog scenario's drain phase the latency includes the time
//     the messages waited in the queue; the drain rate is the figure that
//     matters there.
package main
