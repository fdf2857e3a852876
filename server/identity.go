package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// nodeIDFile is the file in the data directory that holds the node's id.
const nodeIDFile = "node_id"

// nodeIDPattern is the form of a node id: a random (version 4) UUID.
var nodeIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// defaultNodeName is "warren@" + the host name, RabbitMQ's name@host form.
func defaultNodeName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		// A node needs some name; RabbitMQ falls back to the same.
		host = "localhost"
	}
	return "warren@" + host
}

// NodeName returns the node's name (Config.NodeName).
func (s *Server) NodeName() string { return s.cfg.NodeName }

// announcedClusterName is the cluster_name of connection.start: the cluster
// name once set, else the node's name, which is what RabbitMQ announces
// before a cluster name is set.
func (s *Server) announcedClusterName() string {
	if name := s.ClusterName(); name != "" {
		return name
	}
	return s.cfg.NodeName
}

// NodeID returns the node's identity: a random UUID created the first time
// the node starts on its data directory and kept there, so a restart keeps it
// and a wiped data directory gets a new one. A cluster tells a node that lost
// its data from the one it knew by it, even under the same NodeName. Without
// a data directory it is new at every start.
func (s *Server) NodeID() string { return s.nodeID }

// loadNodeID reads the node id from the data directory, creating it on
// first boot. The file is written whole and synced before it is renamed into
// place, so a crash leaves either no id (the next start makes one) or a
// complete one.
func loadNodeID(dataDir string) (string, error) {
	if dataDir == "" {
		return newUUID()
	}
	path := filepath.Join(dataDir, nodeIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !nodeIDPattern.MatchString(id) {
			return "", fmt.Errorf("%w: %s holds %q, not a node id", ErrMetaUnreadable, path, id)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("server: reading %s: %w", path, err)
	}
	id, err := newUUID()
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(path, []byte(id+"\n"), true); err != nil {
		return "", fmt.Errorf("server: writing %s: %w", path, err)
	}
	return id, nil
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("server: generating an id: %w", err)
	}
	raw[6] = raw[6]&0x0f | 0x40 // version 4
	raw[8] = raw[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", raw[0:4], raw[4:6], raw[6:8], raw[8:10], raw[10:]), nil
}
