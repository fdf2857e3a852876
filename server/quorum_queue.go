package server

import (
	"github.com/warrenmq/warren/amqp"
)

// quorumKind is a quorum queue (x-queue-type: quorum).
type quorumKind struct{}

func (quorumKind) newHandle(q *Queue) queueHandle { return classicQueue{q} }

func (quorumKind) checkDeclare(vh *Vhost, name string, m *amqp.QueueDeclare, _ *queueArgs) *amqp.Error {
	return checkQuorumDeclare(vh, name, m)
}

// policyArgs: the policy keys that set arguments (policyKeys) are all ones
// a quorum queue takes, so the classic merge applies.
func (quorumKind) policyArgs(vh *Vhost, name string, declared amqp.Table, qa queueArgs, def map[string]any) queueArgs {
	return effectiveQueueArgs(name, vh.name, declared, def, qa)
}
