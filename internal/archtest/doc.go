// Package archtest holds the test that enforces Warren's package dependency
// direction: cmd → mgmt, cluster → server → queueindex → msgstore, with amqp
// importable by all and importing only the standard library.
package archtest
