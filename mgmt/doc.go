// Package mgmt serves Warren's management HTTP API, compatible with
// RabbitMQ's management plugin (the /api paths, JSON field names and types,
// status codes and error bodies that rabbitmqadmin, rabbit-hole, the
// Terraform provider, the Kubernetes operators and exporters rely on).
//
// The package is a pure consumer of server's exported administrative API:
// handlers take value snapshots from the server, release every server lock,
// and only then filter, sort, page and encode. Mutations go through the
// server's own declare/delete/bind methods, so they are validated exactly as
// AMQP requests are and recorded durably by the same code.
//
// Routing works on the escaped request path: each segment is unescaped on its
// own, so a vhost named "/" arrives as %2F and a name may contain "/", "+",
// "%" or spaces. Go's ServeMux cannot route such paths.
//
// Statistics: counters live in the objects they count (atomics in server);
// one sampler goroutine owned by the API reads them every StatsInterval and
// keeps a bounded ring of samples per object, from which rates
// (x_details.rate) and, on request, sample histories are computed. There is
// no event stream and no central database to fall behind.
//
// Invariants:
//   - No server lock is held while a response is encoded or written.
//   - Lists are filtered, sorted and paged on cheap snapshot fields first;
//     rates are computed only for the rows returned.
//   - Every response body is JSON with Content-Type application/json, also
//     when a client asks for another type (kbudde's exporter asks for BERT).
//   - Memory is bounded: request bodies by Config.MaxBodyBytes, pages by 500
//     rows, sample history by StatsHistory/ObjectHistory samples per object.
//
// Caveats:
//   - /api/users shows password hashes, as RabbitMQ 3.10 does: its routes are
//     for administrators, who can export the same hashes anyway.
//   - Queue-level deliver and get are not split by acknowledgement mode (the
//     queues count both together); message_stats of queues therefore carry
//     deliver_get, publish, ack and redeliver only. Channel, vhost and
//     overview statistics carry the full set.
//   - Counts kept by RabbitMQ's Erlang runtime (reductions, garbage
//     collection, process memory, disk reads of the old backing queue) have
//     no equivalent and are left out rather than invented.
//   - Unpaginated lists are streamed row by row; a paginated page and every
//     single-object answer are built whole before being written.
//   - PUT and POST bodies must be declared application/json (else 415), on
//     every endpoint: RabbitMQ requires it only on some and also takes its
//     web UI's multipart definitions upload, which a cross-site form could
//     forge with a browser's cached credentials.
//   - Vhost metadata, runtime parameters and the cluster name live in
//     memory only; policies and topic permissions are durable.
package mgmt
