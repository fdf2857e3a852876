// Package server is the Warren broker: connections, channels, vhosts, users,
// exchanges, bindings, routing, queues and consumers.
//
// Each connection has one reader goroutine, which owns every channel's state
// and handles frames strictly in order, and one writer goroutine, which flushes
// the connection's outbox (frames appended by any goroutine under a short lock)
// with as few socket writes as possible and sends heartbeats. Queues have no
// goroutine of their own: the goroutine that publishes, acks or frees write
// buffer space dispatches under the queue's lock.
//
// AMQP failures are *amqp.Error values carrying reply code, class and method;
// the connection closes the channel for soft codes and the whole connection for
// hard ones, as the specification classes them. Texts follow RabbitMQ's.
//
// The AMQPS listener (tls.go) wraps the same connection code in TLS 1.2 (ECDHE
// AEAD suites only) or 1.3; the TLS handshake runs inside the AMQP handshake
// deadline. EXTERNAL is offered only to a TLS client whose certificate was
// verified, and logs it in as the certificate's subject CN.
//
// Limits (limits.go) follow RabbitMQ's codes and texts: sockets beyond
// MaxConnections are closed right after accept, before any goroutine or
// handshake exists; MaxConnectionsPerVhost refuses connection.open with 530;
// MaxQueuesPerVhost fails queue.declare with 406; MaxConsumersPerChannel
// closes the connection with 530; MaxFieldTableSize closes the channel with
// 406. All default to unlimited. A vhost's own limits (its vhost-limits
// runtime parameter, vhost_limits.go) replace the two per-vhost defaults for
// it; a user's max-connections and max-channels (user_limits.go) refuse
// connection.open and channel.open with 530.
//
// Runtime parameters of federation, shovel and vhost limits are validated
// as RabbitMQ 3.10's components validate them, with its texts
// (paramcheck.go, paramcomponents.go; values printed as Erlang's ~p prints
// them, erlterm.go and erlpretty.go). The shovel package runs the shovels
// (OnParameterChange tells it of changes; InternalCredential is its login
// for direct URIs); the federation package runs the federation links
// (OnParameterChange and OnDefinitionChange tell it of upstream, policy,
// exchange, queue and binding changes).
//
// Invariants:
//   - A queue's messages reach the wire in queue order, and a channel's delivery
//     tags reach the wire in increasing order (tags are assigned and frames
//     appended under the channel's unacked lock).
//   - consume-ok precedes the consumer's first delivery; cancel-ok follows its last.
//   - A requeued message returns to its original position with redelivered set.
//
// Caveats:
//   - MaxConnections counts sockets still in their handshake too, so a flood
//     of idle sockets can hold every slot for up to HandshakeTimeout, and a
//     refused login holds its slot for LoginFailureDelay.
//   - TLS certificates are read once at New; replacing them needs a restart.
//   - Durable definitions live in meta.db (bbolt), persistent messages in
//     each vhost's msgstore with a queueindex per durable queue; queues keep
//     a bounded head in memory and page the rest (persist.go, queue_disk.go).
//     Every definition change is a Command applied by one function
//     (apply.go): checked, stored in one meta.db transaction, then made in
//     memory; no disk I/O happens under Vhost.mu (LOCKS.md).
//   - The default user guest may connect only from loopback, as in RabbitMQ.
//   - In a cluster (Config.Cluster; cluster_node.go, cluster_boot.go) every
//     command is proposed to the metadata Raft group of package cluster and
//     applied, committed, by every node through the same apply; the caller
//     is answered once its node applied it; a node that has to answer that
//     something is missing first catches up through a barrier entry
//     (Vhost.catchUp), so those answers are linearizable too. A Raft
//     snapshot is installed into a running node as the difference to its
//     definitions (apply_restore.go). The seed (the configuration's
//     definitions) is proposed by the leader while no seed was applied;
//     a restart does not propose the configuration again (cluster_boot.go).
//     Deletes by auto-delete, x-expires and a dead node's cleanup name the
//     queue's instance, so a late one leaves a queue declared again. Not
//     yet: serving streams homed on other nodes (unservedQueue refuses;
//     classic queues are served through the remote-queue proxy, remote*.go),
//     and transient definitions in snapshots (a node that missed them lacks
//     them, as after its restart).
//
// Quorum queues (x-queue-type quorum; quorum_*.go) keep their messages in a
// replicated log (package cluster/replica): a publish is confirmed once its
// record is committed, which in a cluster means durable (fsynced) on every
// member of the in-sync set with at least a majority of the replicas in it,
// and unconfirmed publishes are nacked after 30 s. The leader runs the
// classic queue code in memory over the log's state; a leader's node going
// down makes the metadata leader elect an in-sync mirror (never an
// unclean election), which rebuilds the queue from its log: confirmed
// messages survive, unacknowledged ones come back redelivered with their
// x-delivery-count raised. x-dead-letter-strategy at-least-once (with
// reject-publish; drop-head falls back to at-most-once as in 3.10) keeps
// dead-lettered messages in the log until their targets confirm them
// (quorum_dlx.go). Not yet: paging of the leader's in-memory
// queue (it holds every live message's body), member management (add, delete,
// grow, shrink, transfer, rebalance), drain and revive, re-attaching
// consumers after a failover (consumers of the old leader are cancelled
// and must re-subscribe), resending a non-leader's unconfirmed forwarded
// publishes to the new leader (they are nacked; so is a publish
// forwarded to a node that does not serve the queue yet or any more, an
// elected node before its rebuild included), the queue-leader-locator
// policy key (x-queue-leader-locator balanced is applied), and replicated
// streams.
//
// Mirrored classic queues (mirror.go): in a cluster, a durable,
// non-exclusive classic queue matched at declare by an ha-* policy runs
// the quorum queue's code with the classic queue's argument, consume and
// delete rules (the classic queue's own files, queueindex and the vhost
// store, do not run under replication), with MinISR from ha-min-isr
// (default 1). The metadata leader keeps each one's replicas as its
// policy asks (ChangeQueueReplicas). ha-sync-mode manual is served as
// automatic, ha-promote-on-* always as when-synced; a queue declared
// before its policy is not mirrored; README lists the rest.
//
// Lock order is in LOCKS.md at the repository root, goroutines in THREADS.md.
package server
