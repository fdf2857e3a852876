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
// # Clients
//
// Publishers and consumers speak AMQP through one of two clients, chosen
// with --client (Config.Client); declarations, purges and deletes always
// use github.com/rabbitmq/amqp091-go.
//
//   - fast (the default) is warren-perf's own minimal client, standard
//     library only and independent of Warren's code (wire.go, fastconn.go,
//     fastpub.go, fastcons.go). A publisher copies a message encoded once
//     (publishTemplate) into a reusable buffer, patching only the publish
//     time, and writes when the buffer passes 64 KiB, when the confirm
//     window is full, before every rate-limiter pause and at the end: many
//     messages per syscall, no allocation per message. A consumer reads
//     256 KiB at a time, parses frames in place and writes the basic.ack
//     frames of one read (one per delivery, multiple=false, unless
//     --multi-ack-every) in one write. It is meant to outrun the brokers it
//     measures, so that the figures are the broker's and not the client's.
//   - amqp091 is amqp091-go: one write and flush per publish, deliveries
//     handed over through Go channels with an allocation each. It is kept
//     for comparison and as a cross-check of the fast client.
//
// Both update the same counters and latency histograms, so every option,
// scenario and the JSON output work with either.
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
//     reuses one body buffer (the fast client: one encoded message and a
//     write buffer of about 64 KiB; each fast consumer a 256 KiB read
//     buffer).
//   - Totals cover the whole run; rates and latencies cover only the
//     measured period, which starts when --warmup ends. A run that ends by
//     message counts ends its measured period at the last worker's own
//     finishing time (last confirm, last delivery), not at the next poll.
//   - Goroutines: one per publisher (plus one reading its confirms, which
//     the publisher waits for; with the fast client always one reading its
//     connection), one per consumer (the fast consumer reads its own
//     socket), with the fast client one heartbeat sender per connection
//     when the broker asks for heartbeats (stopped when the connection
//     closes), and one waiter per group while stopping. The reporter runs on the caller's goroutine. When the
//     run ends publishers are stopped first (they drain their confirms for
//     up to --drain-timeout), then consumers; a worker still blocked after
//     its grace period has its socket closed under it.
//
// # Failover
//
// With --failover-urls (fast client only) a publisher or consumer whose
// connection fails, or whose channel or consumer the broker closes,
// reconnects to those nodes in turn (the node of --url last), resubscribes
// and goes on; the messages it left unconfirmed are counted as in doubt,
// not republished. With --kill-pid the runner (one goroutine, stopped with
// the run) sends SIGKILL to that process --kill-after into the run; the
// summary then gives the time from the kill to the first confirm of a
// message published after it (by delivery tag: the first tag a publisher
// stamped after the kill, every tag of a connection opened after it) and
// to the first delivery of such a message (by the publish time in its
// body). --setup-url declares and deletes the queues on another node than
// the workers use, since in a cluster the declaring node leads a queue.
// Failover runs end by --duration: a worker that reconnected cannot tell
// which of its messages counted towards --pmessages.
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
//     The fast client does not: it reads no faster than it parses, and TCP
//     pushes back on the broker.
//   - The fast client implements only what warren-perf needs: PLAIN login,
//     one channel, confirms, qos, consume, publish, ack; frame_max is at
//     most 128 KiB. It answers the broker's heartbeats by sending its own
//     but does not time out a broker that stops sending them (a dead
//     broker still ends the run through a socket error or --duration). It
//     never sets mandatory, so it expects no basic.return, and treats any
//     method it does not expect as a protocol error.
//   - The fast publisher stamps a message when it encodes it, up to one
//     64 KiB buffer before it is written; without a rate limit the queue
//     in the broker dwarfs that, and with one the buffer is written before
//     every pause, so latency figures are not skewed by the batching.
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
