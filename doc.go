// Package warren is the root of the Warren module, an AMQP 0-9-1 message
// broker for applications written against RabbitMQ. It holds no code: the
// broker binary is cmd/warren, the protocol and queues are in server, the
// persistence in msgstore and queueindex, the management API in mgmt and
// the wire codec in amqp. README.md tells how to run and test it; THREADS.md,
// LOCKS.md and BENCHMARKS.md describe its goroutines, locks and speed.
//
// The package's only test, TestSoak, makes the soak command written in the
// project's issue work as typed (see soak_test.go).
package warren
