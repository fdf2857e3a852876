// Package archtest holds the test that enforces Warren's package dependency
// direction: cmd → mgmt → server → cluster, queueindex → msgstore, with amqp
// importable by all and importing only the standard library. cluster imports
// no broker package: only the standard library, hashicorp/raft,
// raft-boltdb/v2, memberlist and msgstore. Every package's allowed
// third-party imports are listed too.
package archtest
