// Package route holds the binding structures Warren's exchanges route with, so
// that routing a message never scans every binding of an exchange:
//
//   - [Direct]: a map from routing key to the destinations bound with it.
//   - [Fanout]: the list of bound destinations; the routing key is ignored.
//   - [Topic]: a trie over dot-separated words, where a "*" edge matches exactly
//     one word and a "#" edge zero or more words.
//   - [Headers]: per-binding matching of message headers against binding
//     arguments, with RabbitMQ's x-match modes all, any, all-with-x and any-with-x.
//
// All four implement [Matcher], generic over the destination type D (the broker
// uses an interface satisfied by queues and exchanges).
//
// The types that send each message to at most one destination implement
// [Picker], which sees the whole message once ([Delivery]):
//
//   - [ConsistentHash]: x-consistent-hash as RabbitMQ 3.10's plugin, bit for
//     bit: erlang:phash2 of the hashed term (phash2.go), the plugin's jump
//     consistent hash over OTP's exs1024 generator (jump.go), and its ring of
//     one weighted segment per destination.
//   - [ModulusHash]: x-modulus-hash (the sharding plugin): phash2 of all the
//     routing keys modulo the number of bindings, in route-table order.
//   - [Random]: x-random and x-local-random, a uniform choice among bindings.
//
// # Invariants
//
//   - A binding's identity is (Dest, Key, Args), as in RabbitMQ: the same
//     destination bound with the same key but different arguments is two
//     bindings. Args are compared by wire type and value (see [Binding]).
//   - Match calls visit once per matching destination, however many of its
//     bindings match.
//   - Bindings returns bindings in the order they were added; removing a binding
//     does not reorder the rest.
//   - ConsistentHash Pick allocates nothing and costs O(log destinations) after
//     hashing; Add and Remove rebuild its segment index, O(destinations).
//   - Direct and Fanout Match allocate nothing. Topic Match allocates nothing in
//     steady state: it walks the routing key in place and keeps its per-call
//     scratch space in a sync.Pool. Headers Match allocates nothing.
//   - Headers matching is per binding, as in RabbitMQ: Match evaluates each
//     binding's compiled arguments (a map lookup per argument) until one of a
//     destination's bindings matches, so its cost grows with the number of
//     bindings; no index would help with x-match any and void arguments.
//   - Topic matching runs as a set-of-states walk over the trie, so its cost is
//     bounded by (words in the key) × (trie nodes) even for patterns such as
//     "#.a.#.a.#" that make a backtracking matcher exponential. Consecutive "#"
//     words in a pattern are collapsed into one ("#.#" matches exactly what "#"
//     does).
//
// # Concurrency
//
// No Matcher is safe for concurrent use on its own: the owning exchange guards it
// with a sync.RWMutex. Match, Len, Bindings and HasDest only read the structure
// and may run concurrently with each other under the read lock; Add, Remove and
// RemoveDest must hold the write lock. The visit callback runs while Match is in
// progress, so it must not call Add, Remove or RemoveDest on the same Matcher.
//
// # Caveats
//
//   - Args tables are kept as given, not copied: the caller must not modify a
//     table after passing it to Add. Bindings returns those same tables.
//   - Values of Go types the AMQP codec does not encode (see amqp.Table) are
//     treated as void, exactly as amqp.AppendTable would write them; int and
//     uint64 are treated as the signed 64-bit 'l' they are written as.
//   - Nested tables are compared without regard to key order. RabbitMQ compares
//     nested tables in wire order, but a Go map has no order to compare.
//   - Timestamps are compared at the one-second precision the wire carries.
//   - The order in which Match visits destinations is unspecified.
//   - ValidateHeadersArgs renders rejected values the way Erlang's ~tp does for
//     the values clients actually send (short strings and numbers); for long
//     tables and arrays Erlang would wrap lines and Warren does not.
//   - D must be a type whose values never panic when compared: an interface
//     type is fine as long as every dynamic value stored in it is comparable.
package route
