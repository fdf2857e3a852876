// Package amqp is Warren's AMQP 0-9-1 wire codec: frames, method arguments, field
// tables and content properties. It knows nothing about sockets, vhosts or queues,
// and it imports only the standard library.
//
// Method structs are generated from RabbitMQ's codegen JSON (spec/, MIT licence
// inside it) by cmd/amqpgen; tables, properties and frames are written by hand
// because they sit on the publish and deliver paths.
//
// Decoding works on byte slices with offsets. A frame's payload aliases the
// caller's read buffer; method Decode methods and Properties.Decode keep a string
// field unchanged when the incoming bytes equal it, so a connection that reuses
// one struct per method decodes repeated publishes without allocating.
//
// Caveats:
//   - Payload slices returned by ParseFrame alias the input buffer and are only
//     valid until the caller reuses it.
//   - Longstr fields decoded by a method alias the input too. Field tables,
//     including their byte arrays, are copied out of it.
//   - appendShortstr truncates strings longer than 255 bytes; callers validate
//     names before they reach the wire.
package amqp

//go:generate go run ../cmd/amqpgen -spec spec/amqp-rabbitmq-0.9.1.json -out spec_gen.go
