package mgmt

import (
	"net/http"

	"github.com/warrenmq/warren/server"
)

// buildRoutes lists every endpoint. Routes with literal segments come before
// parameterised routes of the same length they overlap with.
func (a *API) buildRoutes() []*route {
	var t routeTable
	a.nodeRoutes(&t)
	a.accessRoutes(&t)
	a.topologyRoutes(&t)
	a.paramRoutes(&t)
	a.shovelRoutes(&t)
	a.federationRoutes(&t)
	return t.routes
}

const (
	get  = http.MethodGet
	put  = http.MethodPut
	post = http.MethodPost
	del  = http.MethodDelete
)

// nodeRoutes are the node-wide endpoints: overview, nodes, health checks.
func (a *API) nodeRoutes(t *routeTable) {
	t.handle(get, "overview", authMgmt, a.getOverview)
	t.handle(get, "whoami", authMgmt, a.getWhoami)
	t.handle(get, "auth", authNone, a.getAuth)
	t.handle(get, "cluster-name", authMgmt, a.getClusterName)
	t.handle(put, "cluster-name", authAdmin, a.putClusterName)
	t.handle(get, "nodes", authMonitor, a.listNodes)
	t.handle(get, "nodes/{node}", authMonitor, a.getNode)
	t.handle(get, "cluster", authMonitor, a.getCluster)
	t.handle(post, "cluster/join", authAdmin, a.postClusterJoin)
	t.handle(post, "cluster/leave", authAdmin, a.postClusterLeave)
	t.handle(del, "cluster/nodes/{node}", authAdmin, a.deleteClusterNode)
	t.handle(get, "nodes/{node}/memory", authMonitor, a.getNodeMemory(false))
	t.handle(get, "nodes/{node}/memory/relative", authMonitor, a.getNodeMemory(true))
	t.handle(get, "extensions", authMgmt, a.getExtensions)
	t.handle(get, "feature-flags", authAdmin, a.getFeatureFlags)
	t.handle(put, "feature-flags/{name}/enable", authAdmin, a.enableFeatureFlag)

	// Health checks. The four Kubernetes probes need no credentials.
	t.handle(get, "health/checks/is-in-service", authNone, a.healthInService)
	t.handle(get, "health/checks/ready-to-serve-clients", authNone, a.healthReadyToServeClients)
	t.handle(get, "health/checks/below-node-connection-limit", authNone, a.healthBelowConnectionLimit)
	// A standalone node is the whole of its cluster, so it has reached any
	// target size it can be given.
	t.handle(get, "health/checks/reached-target-cluster-size", authNone, a.healthOK)
	t.handle(get, "health/checks/alarms", authMgmt, a.healthAlarms(false))
	t.handle(get, "health/checks/local-alarms", authMgmt, a.healthAlarms(true))
	t.handle(get, "health/checks/port-listener/{port}", authMgmt, a.healthPortListener)
	t.handle(get, "health/checks/protocol-listener/{protocol}", authMgmt, a.healthProtocolListener)
	t.handle(get, "health/checks/virtual-hosts", authMgmt, a.healthVirtualHosts)
	t.handle(get, "health/checks/certificate-expiration/{within}/{unit}", authMgmt, a.healthCertificateExpiration)
	t.handle(get, "health/checks/node-is-quorum-critical", authMgmt, a.healthQuorumCritical)
	t.handle(get, "health/checks/node-is-mirror-sync-critical", authMgmt, a.healthMirrorSyncCritical)
	t.handle(get, "aliveness-test/{vhost}", authMgmt, a.aliveness)
	t.handle(get, "definitions", authAdmin, a.getDefinitions)
	t.handle(post, "definitions", authAdmin, a.postDefinitions)
	t.handle(get, "definitions/{vhost}", authAdmin, a.getDefinitions)
	t.handle(post, "definitions/{vhost}", authAdmin, a.postDefinitions)
}

// accessRoutes are vhosts, users and permissions.
func (a *API) accessRoutes(t *routeTable) {
	t.handle(get, "vhosts", authMgmt, a.listVhosts)
	t.handle(get, "vhosts/{vhost}", authAdmin, a.getVhost)
	t.handle(put, "vhosts/{vhost}", authAdmin, a.putVhost)
	t.handle(del, "vhosts/{vhost}", authAdmin, a.deleteVhost)
	t.handle(get, "vhosts/{vhost}/permissions", authAdmin, a.listVhostPermissions)
	t.handle(get, "vhosts/{vhost}/topic-permissions", authAdmin, a.listVhostTopicPermissions)
	t.handle(get, "vhosts/{vhost}/connections", authMgmt, a.listConnections)
	t.handle(get, "vhosts/{vhost}/channels", authMgmt, a.listChannels)

	t.handle(get, "users", authAdmin, a.listUsers)
	t.handle(get, "users/without-permissions", authAdmin, a.listUsersWithoutPermissions)
	t.handle(post, "users/bulk-delete", authAdmin, a.bulkDeleteUsers)
	t.handle(get, "users/{user}", authAdmin, a.getUser)
	t.handle(put, "users/{user}", authAdmin, a.putUser)
	t.handle(del, "users/{user}", authAdmin, a.deleteUser)
	t.handle(get, "users/{user}/permissions", authAdmin, a.listUserPermissions)
	t.handle(get, "users/{user}/topic-permissions", authAdmin, a.listUserTopicPermissions)

	t.handle(get, "permissions", authAdmin, a.listPermissions)
	t.handle(get, "permissions/{vhost}/{user}", authAdmin, a.getPermission)
	t.handle(put, "permissions/{vhost}/{user}", authAdmin, a.putPermission)
	t.handle(del, "permissions/{vhost}/{user}", authAdmin, a.deletePermission)
	t.handle(get, "topic-permissions", authAdmin, a.listTopicPermissions)
	t.handle(get, "topic-permissions/{vhost}/{user}", authAdmin, a.getTopicPermissions)
	t.handle(put, "topic-permissions/{vhost}/{user}", authAdmin, a.putTopicPermission)
	t.handle(del, "topic-permissions/{vhost}/{user}", authAdmin, a.deleteTopicPermissions)
	t.handle(get, "topic-permissions/{vhost}/{user}/{exchange}", authAdmin, a.getTopicPermissions)
	t.handle(del, "topic-permissions/{vhost}/{user}/{exchange}", authAdmin, a.deleteTopicPermissions)
}

// topologyRoutes are queues, exchanges, bindings, connections, channels,
// consumers and policies.
func (a *API) topologyRoutes(t *routeTable) {
	t.handle(get, "queues", authMgmt, a.listQueues)
	t.handle(get, "queues/{vhost}", authMgmt, a.listQueues)
	t.handle(get, "queues/{vhost}/{queue}", authMgmt, a.getQueue)
	t.handle(put, "queues/{vhost}/{queue}", authMgmt, a.putQueue)
	t.handle(del, "queues/{vhost}/{queue}", authMgmt, a.deleteQueue)
	t.handle(get, "queues/{vhost}/{queue}/bindings", authMgmt, a.listQueueBindings)
	t.handle(del, "queues/{vhost}/{queue}/contents", authMgmt, a.purgeQueue)
	t.handle(post, "queues/{vhost}/{queue}/get", authMgmt, a.getMessages)
	t.handle(post, "queues/{vhost}/{queue}/actions", authAdmin, a.queueAction)

	t.handle(get, "exchanges", authMgmt, a.listExchanges)
	t.handle(get, "exchanges/{vhost}", authMgmt, a.listExchanges)
	t.handle(get, "exchanges/{vhost}/{exchange}", authMgmt, a.getExchange)
	t.handle(put, "exchanges/{vhost}/{exchange}", authMgmt, a.putExchange)
	t.handle(del, "exchanges/{vhost}/{exchange}", authMgmt, a.deleteExchange)
	t.handle(get, "exchanges/{vhost}/{exchange}/bindings/source", authMgmt, a.listExchangeSourceBindings)
	t.handle(get, "exchanges/{vhost}/{exchange}/bindings/destination", authMgmt, a.listExchangeDestinationBindings)
	t.handle(post, "exchanges/{vhost}/{exchange}/publish", authMgmt, a.publish)

	t.handle(get, "bindings", authMgmt, a.listBindings)
	t.handle(get, "bindings/{vhost}", authMgmt, a.listBindings)
	for kind, destType := range map[string]string{"q": server.DestQueue, "e": server.DestExchange} {
		base := "bindings/{vhost}/e/{source}/" + kind + "/{destination}"
		t.handle(get, base, authMgmt, a.listBindingsBetween(destType))
		t.handle(post, base, authMgmt, a.postBinding(destType))
		t.handle(get, base+"/{props}", authMgmt, a.getBinding(destType))
		t.handle(del, base+"/{props}", authMgmt, a.deleteBinding(destType))
	}

	t.handle(get, "connections", authMgmt, a.listConnections)
	t.handle(get, "connections/{connection}", authMgmt, a.getConnection)
	t.handle(del, "connections/{connection}", authMgmt, a.deleteConnection)
	t.handle(get, "connections/{connection}/channels", authMgmt, a.listConnectionChannels)
	t.handle(get, "channels", authMgmt, a.listChannels)
	t.handle(get, "channels/{channel}", authMgmt, a.getChannel)
	t.handle(get, "consumers", authMgmt, a.listConsumers)
	t.handle(get, "consumers/{vhost}", authMgmt, a.listConsumers)

	// One policy, read or written, is for policymakers and one operator
	// policy for administrators (RabbitMQ's rabbit_mgmt_wm_policy and
	// rabbit_mgmt_wm_operator_policy); the lists are open to every user of
	// the vhost.
	for _, op := range []struct {
		path     string
		operator bool
		one      authLevel
	}{{"policies", false, authPolicymaker}, {"operator-policies", true, authAdmin}} {
		t.handle(get, op.path, authMgmt, a.listPolicies(op.operator))
		t.handle(get, op.path+"/{vhost}", authMgmt, a.listPolicies(op.operator))
		t.handle(get, op.path+"/{vhost}/{name}", op.one, a.getPolicy(op.operator))
		t.handle(put, op.path+"/{vhost}/{name}", op.one, a.putPolicy(op.operator))
		t.handle(del, op.path+"/{vhost}/{name}", op.one, a.deletePolicy(op.operator))
	}
}
