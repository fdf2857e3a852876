package server

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// The internal cluster id, as RabbitMQ keeps it: the global parameter
// internal_cluster_id, "rabbitmq-cluster-id-" and 16 random bytes in
// unpadded base64url (rabbit_guid:binary/2), made when a boot finds none
// (rabbit_nodes:seed_internal_cluster_id/0) and kept from then on. Tools
// read it as the cluster's permanent identity (rabbitmq_prometheus's
// rabbitmq_cluster_permanent_id label, rabbit-hole's suite expects it among
// the global parameters), so it must be one value for the whole cluster:
// the random choice is made by the boot — a standalone node's, or the
// bootstrapping node's seed entry — and travels as a plain
// SetGlobalParameter command, so applying the same entries on two nodes
// still gives the same meta.db.

// internalClusterIDParam is the global parameter holding the id.
const internalClusterIDParam = "internal_cluster_id"

// newInternalClusterID makes a fresh id in RabbitMQ's format.
func newInternalClusterID() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("server: internal cluster id: %w", err)
	}
	return "rabbitmq-cluster-id-" + base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// InternalClusterID returns the cluster's id, or "" while it has none (a
// cluster node before the seed entry reached it).
func (s *Server) InternalClusterID() string {
	p, err := s.GetGlobalParameter(internalClusterIDParam)
	if err != nil {
		return ""
	}
	id, _ := p.Value.(string)
	return id
}

// clusterIDOrNew returns the id this node has or, when it has none, a new
// one (fresh), logged as RabbitMQ logs it.
func (s *Server) clusterIDOrNew() (id string, fresh bool, err error) {
	if _, err := s.GetGlobalParameter(internalClusterIDParam); err == nil {
		return s.InternalClusterID(), false, nil
	}
	if id, err = newInternalClusterID(); err != nil {
		return "", false, err
	}
	s.log.Info(fmt.Sprintf("Initialising internal cluster ID to '%s'", id))
	return id, true, nil
}

// seedClusterID gives a standalone node's cluster its id at the boot that
// finds none: the first boot, or the first of a data directory made before
// Warren kept one.
func (s *Server) seedClusterID() error {
	id, fresh, err := s.clusterIDOrNew()
	if err != nil || !fresh {
		return err
	}
	if err := s.apply(SetGlobalParameter{Name: internalClusterIDParam, Value: id}); err != nil {
		return fmt.Errorf("server: storing the internal cluster id: %w", err)
	}
	return nil
}
