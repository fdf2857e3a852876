package server

// FeatureFlag is one of RabbitMQ 3.10's feature flags with the state Warren
// really has: "enabled" only where Warren behaves as the flag promises.
type FeatureFlag struct {
	Name, Desc, State, Stability, ProvidedBy string
}

// Whether the features behind some flags exist yet. Each is a fact about
// this build, changed by the work that adds the feature.
const (
	// replicatedQueues backs classic_mirrored_queue_version: x-queue-version
	// on mirrored classic queues. Mirroring exists (mirror.go), but a
	// mirrored queue runs the quorum queue's code, where a classic queue
	// version means nothing, so the flag stays off.
	replicatedQueues = false
	// quorumQueues: x-queue-type quorum makes a queue whose messages live
	// in a replicated log (quorum_queue.go).
	quorumQueues = true
	// maintenanceMode: a node can be drained of its leaderships.
	maintenanceMode = false
	// userLimits: max-connections and max-channels per user are enforced.
	userLimits = true
)

// FeatureFlags lists the flags RabbitMQ 3.10 reports, each enabled only
// when this node has the feature.
func (s *Server) FeatureFlags() []FeatureFlag {
	flag := func(name, desc, by string, on bool) FeatureFlag {
		state := "disabled"
		if on {
			state = "enabled"
		}
		return FeatureFlag{Name: name, Desc: desc, State: state, Stability: "stable", ProvidedBy: by}
	}
	return []FeatureFlag{
		flag("classic_mirrored_queue_version", "Support setting version for classic mirrored queues", "rabbit", replicatedQueues),
		// Unroutable drops and empty basic.gets are counted per channel
		// (channelStats) and shown in the stats and metrics.
		flag("drop_unroutable_metric", "Count unroutable publishes to be dropped in stats", "rabbitmq_management_agent", true),
		flag("empty_basic_get_metric", "Count AMQP `basic.get` on empty queues in stats", "rabbitmq_management_agent", true),
		// The default exchange routes by queue name without stored bindings.
		flag("implicit_default_bindings", "Default bindings are now implicit, instead of being stored in the database", "rabbit", true),
		flag("maintenance_mode_status", "Maintenance mode status", "rabbit", maintenanceMode),
		flag("quorum_queue", "Support queues of type `quorum`", "rabbit", quorumQueues),
		flag("stream_queue", "Support queues of type `stream`", "rabbit", true),
		flag("user_limits", "Configure connection and channel limits for a user", "rabbit", userLimits),
		// Description, tags and default queue type are stored (meta.db).
		flag("virtual_host_metadata", "Virtual host metadata (description, tags, etc)", "rabbit", true),
	}
}
