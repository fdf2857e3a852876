package server

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestParametersAndVhostMetaSurviveRestart sets a vhost's metadata, runtime
// and global parameters and the cluster name, restarts the broker on the
// same directory and finds each of them again; a vhost delete then takes
// its parameters with it, also across a restart.
func TestParametersAndVhostMetaSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	meta := VhostMeta{Description: "defs vhost", Tags: []string{"a", "b"}, DefaultQueueType: "quorum", Tracing: true}
	_, err := ts.PutVhost("defs-p", meta)
	must(t, err)
	_, err = ts.PutVhost("defs-p2", VhostMeta{Description: "first"})
	must(t, err)
	_, err = ts.PutVhost("defs-p2", VhostMeta{Description: "updated"}) // an update of an existing vhost
	must(t, err)
	params := []Parameter{
		{Component: "federation-upstream", Vhost: "defs-p", Name: "up", Value: map[string]any{"uri": "amqp://x", "prefetch-count": json.Number("1000")}},
		{Component: "shovel", Vhost: "defs-p2", Name: "sh", Value: map[string]any{"src-uri": "amqp://", "src-queue": "q", "dest-uri": "amqp://", "dest-queue": "q2"}},
	}
	globals := []Parameter{{Name: "defs-global", Value: []any{"x", json.Number("2.5")}}}
	must(t, ts.ImportDefinitions(Definitions{Parameters: params, GlobalParameters: globals}, ""))
	must(t, ts.SetClusterName("defs-cluster"))
	must(t, ts.Close())

	ts2 := startServer(t, withDataDir(dir))
	if got := ts2.Vhost("defs-p").Meta(); !reflect.DeepEqual(got, meta) {
		t.Errorf("vhost metadata after restart: %+v, want %+v", got, meta)
	}
	if got := ts2.Vhost("defs-p2").Meta().Description; got != "updated" {
		t.Errorf("updated vhost description after restart: %q", got)
	}
	if got := ts2.Parameters(); !reflect.DeepEqual(got, params) {
		t.Errorf("runtime parameters after restart: %#v, want %#v", got, params)
	}
	// The internal cluster id the first boot made is kept (and not made
	// again by the second).
	wantGlobals := []Parameter{{Name: "cluster_name", Value: "defs-cluster"}, globals[0],
		{Name: internalClusterIDParam, Value: ts.InternalClusterID()}}
	if got := ts2.GlobalParameters(); !reflect.DeepEqual(got, wantGlobals) {
		t.Errorf("global parameters after restart: %#v, want %#v", got, wantGlobals)
	}
	if got := ts2.ClusterName(); got != "defs-cluster" {
		t.Errorf("cluster name after restart: %q", got)
	}
	must(t, ts2.DeleteVhost("defs-p"))
	must(t, ts2.Close())

	ts3 := startServer(t, withDataDir(dir))
	if got := ts3.Parameters(); !reflect.DeepEqual(got, params[1:]) {
		t.Errorf("runtime parameters after the vhost delete and a restart: %#v, want %#v", got, params[1:])
	}
}

// TestDefaultClusterNameIsNotStored checks that the default cluster name
// (the node's name, set by the management API) does not stick: a restart
// under another default reports the new one.
func TestDefaultClusterNameIsNotStored(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, withDataDir(dir))
	ts.SetDefaultClusterName("defs@node-a")
	if got := ts.ClusterName(); got != "defs@node-a" {
		t.Fatalf("cluster name: %q", got)
	}
	must(t, ts.Close())
	ts2 := startServer(t, withDataDir(dir))
	ts2.SetDefaultClusterName("defs@node-b")
	if got := ts2.ClusterName(); got != "defs@node-b" {
		t.Fatalf("cluster name after a restart under another default: %q", got)
	}
}
