package server

import (
	"regexp"
	"slices"
	"testing"
)

// TestInternalClusterIDMadeOnceAndKept: a standalone node's first boot
// makes internal_cluster_id in RabbitMQ's format; it is a global parameter,
// exported, and a restart keeps it. Deleted, the next boot makes a new one,
// as RabbitMQ's boot step does whenever it finds none.
func TestInternalClusterIDMadeOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	id := ts.InternalClusterID()
	if !regexp.MustCompile(`^rabbitmq-cluster-id-[A-Za-z0-9_-]{22}$`).MatchString(id) {
		t.Fatalf("internal cluster id %q, want rabbitmq-cluster-id- and 22 base64url characters", id)
	}
	d, err := ts.ExportDefinitions("")
	must(t, err)
	if !slices.Contains(d.GlobalParameters, Parameter{Name: internalClusterIDParam, Value: id}) {
		t.Fatalf("exported global parameters %v lack internal_cluster_id %q", d.GlobalParameters, id)
	}
	must(t, ts.Close())

	ts = startServer(t, withDataDir(dir))
	if got := ts.InternalClusterID(); got != id {
		t.Fatalf("after a restart the internal cluster id is %q, want %q kept", got, id)
	}
	must(t, ts.DeleteGlobalParameter(internalClusterIDParam))
	must(t, ts.Close())

	ts = startServer(t, withDataDir(dir))
	if got := ts.InternalClusterID(); got == "" || got == id {
		t.Fatalf("after deleting it and a restart the internal cluster id is %q (was %q), want a new one", got, id)
	}
}
