package cluster

import "errors"

// Sentinel errors. They cross the RPC plane as codes (see rpcErrorCodes), so
// errors.Is works on the node that asked as well as on the node that refused.
var (
	// ErrNoQuorum means a proposal was not known to be committed within its
	// deadline because no Raft majority was reachable. The entry may still
	// commit later if it reached a leader's log; it never diverges.
	ErrNoQuorum = errors.New("cluster: no quorum")
	// ErrNotApplied means the entry was committed (at the index in the
	// message) but this node had not applied it when the deadline passed.
	ErrNotApplied = errors.New("cluster: committed but not yet applied on this node")
	// ErrNotLeader is returned by leader-only operations on a follower.
	ErrNotLeader = errors.New("cluster: not the raft leader")
	// ErrShutdown is returned by every operation after Shutdown or Leave.
	ErrShutdown = errors.New("cluster: node is shut down")
	// ErrIdentityConflict refuses a node whose name is a member of the
	// cluster with another storage identity (a wiped node with a reused
	// name): it is refused until the old identity is forgotten.
	ErrIdentityConflict = errors.New("cluster: node name is in use by another node identity; forget it first")
	// ErrMemberAlive refuses to forget a node that gossip reports alive.
	ErrMemberAlive = errors.New("cluster: node is alive; stop it before forgetting it")
	// ErrUnknownMember is returned when a named node is not in the cluster.
	ErrUnknownMember = errors.New("cluster: no such node")
	// ErrNoHandler means the peer has no RPC handler for the method.
	ErrNoHandler = errors.New("cluster: no rpc handler for method")
	// ErrAuthFailed means an inter-node connection failed authentication
	// (wrong secret or cluster name).
	ErrAuthFailed = errors.New("cluster: inter-node authentication failed")
	// ErrHasState refuses a bootstrap or join when this node already has
	// Raft state of another cluster.
	ErrHasState = errors.New("cluster: node already has raft state")
)

// rpcErrorCodes numbers the sentinels that an RPC handler may return, so the
// caller gets the same sentinel back. Codes are part of the wire format:
// append only.
var rpcErrorCodes = []error{
	nil, // 0: no sentinel, plain message
	ErrNoQuorum,
	ErrNotLeader,
	ErrShutdown,
	ErrIdentityConflict,
	ErrMemberAlive,
	ErrUnknownMember,
	ErrNoHandler,
	ErrHasState,
}

// errorCode returns the wire code of err's sentinel, 0 if it has none.
func errorCode(err error) uint8 {
	for i, s := range rpcErrorCodes {
		if s != nil && errors.Is(err, s) {
			return uint8(i)
		}
	}
	return 0
}
